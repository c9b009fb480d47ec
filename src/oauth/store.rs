//! The ledger's OAuth tables (migration 0011): registered clients, grants and authorization
//! codes, on either backend with the same SQL. Codes are stored as hashes only.

use sqlx::Row;

use crate::ledger::store::{on_pool, Result};
use crate::ledger::Ledger;

/// A client registered through `POST /oauth/register`.
#[derive(Debug, Clone)]
pub struct Client {
    pub id: String,
    pub name: String,
    pub redirect_uris: Vec<String>,
}

/// What an account approved: a client acting as one of its keys on one resource.
#[derive(Debug, Clone)]
pub struct Grant {
    pub id: String,
    pub account_id: String,
    pub key_id: String,
    pub client_id: String,
    /// The path of the resource: `/mcp` or `/mcp/{slug}`.
    pub resource: String,
    pub revoked: bool,
}

/// A grant as the dashboard lists it.
#[derive(Debug, Clone)]
pub struct GrantRow {
    pub id: String,
    pub client_name: String,
    pub key_id: String,
    pub key_name: String,
    pub resource: String,
    pub created_at: i64,
    pub last_used_at: Option<i64>,
}

/// A code that was exchanged: the grant it was issued for, and what the exchange must match.
pub struct CodeUse {
    pub grant_id: String,
    pub redirect_uri: String,
    pub code_challenge: String,
}

pub async fn insert_client(ledger: &Ledger, c: &Client, now: i64) -> Result<()> {
    let uris = serde_json::to_string(&c.redirect_uris).unwrap_or_else(|_| "[]".into());
    on_pool!(ledger, p => {
        sqlx::query("INSERT INTO oauth_clients (id, name, redirect_uris, created_at) VALUES ($1, $2, $3, $4)")
            .bind(&c.id).bind(&c.name).bind(uris).bind(now).execute(p).await?;
        Ok(())
    })
}

pub async fn client(ledger: &Ledger, id: &str) -> Result<Option<Client>> {
    on_pool!(ledger, p => {
        let row = sqlx::query("SELECT id, name, redirect_uris FROM oauth_clients WHERE id = $1")
            .bind(id).fetch_optional(p).await?;
        match row {
            Some(r) => {
                let uris: String = r.try_get("redirect_uris")?;
                Ok(Some(Client {
                    id: r.try_get("id")?,
                    name: r.try_get("name")?,
                    redirect_uris: serde_json::from_str(&uris).unwrap_or_default(),
                }))
            }
            None => Ok(None),
        }
    })
}

/// Records an approval and its one-time code in one transaction.
pub async fn insert_grant_with_code(
    ledger: &Ledger,
    g: &Grant,
    code_hash: &str,
    redirect_uri: &str,
    code_challenge: &str,
    now: i64,
    code_expires_at: i64,
) -> Result<()> {
    on_pool!(ledger, p => {
        let mut tx = p.begin().await?;
        sqlx::query("INSERT INTO oauth_grants (id, account_id, key_id, client_id, resource, created_at) VALUES ($1, $2, $3, $4, $5, $6)")
            .bind(&g.id).bind(&g.account_id).bind(&g.key_id).bind(&g.client_id).bind(&g.resource).bind(now)
            .execute(&mut *tx).await?;
        sqlx::query("INSERT INTO oauth_codes (hash, grant_id, redirect_uri, code_challenge, expires_at) VALUES ($1, $2, $3, $4, $5)")
            .bind(code_hash).bind(&g.id).bind(redirect_uri).bind(code_challenge).bind(code_expires_at)
            .execute(&mut *tx).await?;
        tx.commit().await?;
        Ok(())
    })
}

/// What happened to a code presented for exchange.
pub enum CodeOutcome {
    /// Taken now (it can never be taken again).
    Taken(CodeUse),
    /// Exchanged before: the grant it was issued for (to revoke).
    Reused(String),
    Expired,
    Unknown,
}

/// Takes a code for its one exchange: a single conditional update, so of two concurrent
/// exchanges exactly one wins.
pub async fn take_code(ledger: &Ledger, hash: &str, now: i64) -> Result<CodeOutcome> {
    on_pool!(ledger, p => {
        let taken = sqlx::query("UPDATE oauth_codes SET used_at = $1 WHERE hash = $2 AND used_at IS NULL AND expires_at > $1 RETURNING grant_id, redirect_uri, code_challenge")
            .bind(now).bind(hash).fetch_all(p).await?;
        if let Some(r) = taken.into_iter().next() {
            return Ok(CodeOutcome::Taken(CodeUse {
                grant_id: r.try_get("grant_id")?,
                redirect_uri: r.try_get("redirect_uri")?,
                code_challenge: r.try_get("code_challenge")?,
            }));
        }
        let row = sqlx::query("SELECT grant_id, used_at FROM oauth_codes WHERE hash = $1")
            .bind(hash).fetch_optional(p).await?;
        Ok(match row {
            None => CodeOutcome::Unknown,
            Some(r) => match r.try_get::<Option<i64>, _>("used_at")? {
                Some(_) => CodeOutcome::Reused(r.try_get("grant_id")?),
                None => CodeOutcome::Expired,
            },
        })
    })
}

pub async fn grant(ledger: &Ledger, id: &str) -> Result<Option<Grant>> {
    on_pool!(ledger, p => {
        let row = sqlx::query("SELECT id, account_id, key_id, client_id, resource, revoked_at FROM oauth_grants WHERE id = $1")
            .bind(id).fetch_optional(p).await?;
        match row {
            Some(r) => Ok(Some(Grant {
                id: r.try_get("id")?,
                account_id: r.try_get("account_id")?,
                key_id: r.try_get("key_id")?,
                client_id: r.try_get("client_id")?,
                resource: r.try_get("resource")?,
                revoked: r.try_get::<Option<i64>, _>("revoked_at")?.is_some(),
            })),
            None => Ok(None),
        }
    })
}

/// Revokes a grant (of `account`, when given); whether a live grant was revoked.
pub async fn revoke_grant(
    ledger: &Ledger,
    id: &str,
    account: Option<&str>,
    now: i64,
) -> Result<bool> {
    on_pool!(ledger, p => {
        let r = sqlx::query("UPDATE oauth_grants SET revoked_at = $1 WHERE id = $2 AND revoked_at IS NULL AND (CAST($3 AS TEXT) IS NULL OR account_id = $3)")
            .bind(now).bind(id).bind(account).execute(p).await?;
        Ok(r.rows_affected() > 0)
    })
}

/// The account's live grants that were exchanged for tokens, newest first.
pub async fn list_grants(ledger: &Ledger, account: &str) -> Result<Vec<GrantRow>> {
    on_pool!(ledger, p => {
        let rows = sqlx::query(
            "SELECT g.id, c.name AS client_name, g.key_id, k.name AS key_name, g.resource, g.created_at, g.last_used_at \
             FROM oauth_grants g JOIN oauth_clients c ON c.id = g.client_id JOIN api_keys k ON k.id = g.key_id \
             WHERE g.account_id = $1 AND g.revoked_at IS NULL AND k.revoked_at IS NULL \
             AND EXISTS (SELECT 1 FROM oauth_tokens t WHERE t.grant_id = g.id) \
             ORDER BY g.created_at DESC, g.id")
            .bind(account).fetch_all(p).await?;
        let mut out = Vec::with_capacity(rows.len());
        for r in rows {
            out.push(GrantRow {
                id: r.try_get("id")?,
                client_name: r.try_get("client_name")?,
                key_id: r.try_get("key_id")?,
                key_name: r.try_get("key_name")?,
                resource: r.try_get("resource")?,
                created_at: r.try_get("created_at")?,
                last_used_at: r.try_get("last_used_at")?,
            });
        }
        Ok(out)
    })
}

pub async fn touch_grant(ledger: &Ledger, id: &str, now: i64) -> Result<()> {
    on_pool!(ledger, p => {
        sqlx::query("UPDATE oauth_grants SET last_used_at = $1 WHERE id = $2")
            .bind(now).bind(id).execute(p).await?;
        Ok(())
    })
}
