//! Access and refresh tokens: random secrets shown to the client once, stored as SHA-256
//! hashes in the ledger (so every instance can resolve them and a revocation holds everywhere).
//! `tga_` + 40 base62 characters for access tokens, `tgr_` for refresh tokens: a log line or a
//! secret scanner tells them from API keys (`tg_`).

use sqlx::Row;
use tollgate_filters::{keys, GatewayError};

use crate::ledger::store::{on_pool, Result};
use crate::ledger::Ledger;

pub const ACCESS_PREFIX: &str = "tga_";
pub const REFRESH_PREFIX: &str = "tgr_";

/// A fresh secret with `prefix`.
pub fn secret(prefix: &str) -> std::result::Result<String, GatewayError> {
    Ok(format!("{prefix}{}", crate::auth::random_id(40)?))
}

/// A newly issued pair, as the token endpoint returns it.
pub struct Pair {
    pub access: String,
    pub refresh: String,
}

/// Issues an access token and a refresh token for a grant, and deletes the grant's tokens and
/// codes past their expiry (kept until then: a rotated refresh token or a used code presented
/// again must still be recognised as a reuse). So a grant in use keeps a bounded set of rows.
pub async fn issue(
    ledger: &Ledger,
    grant_id: &str,
    access_until: i64,
    refresh_until: i64,
) -> std::result::Result<Pair, GatewayError> {
    let pair = Pair {
        access: secret(ACCESS_PREFIX)?,
        refresh: secret(REFRESH_PREFIX)?,
    };
    let (a, r) = (keys::hash(&pair.access), keys::hash(&pair.refresh));
    let now = crate::clock::now_ms();
    on_pool!(ledger, p => {
        sqlx::query("INSERT INTO oauth_tokens (hash, grant_id, kind, expires_at) VALUES ($1, $2, 'access', $3), ($4, $2, 'refresh', $5)")
            .bind(a).bind(grant_id).bind(access_until).bind(r).bind(refresh_until)
            .execute(p).await.map_err(crate::ledger::StoreError::from)?;
        for sql in [
            "DELETE FROM oauth_tokens WHERE grant_id = $1 AND expires_at <= $2",
            "DELETE FROM oauth_codes WHERE grant_id = $1 AND expires_at <= $2",
        ] {
            if let Err(e) = sqlx::query(sql).bind(grant_id).bind(now).execute(p).await {
                tracing::warn!(grant = grant_id, "could not delete expired OAuth rows: {e}");
            }
        }
    });
    Ok(pair)
}

/// What happened to a refresh token presented for rotation.
pub enum RefreshOutcome {
    /// Rotated now: the grant it belongs to (it never works again).
    Rotated(String),
    /// Rotated before: presenting it again means it leaked; the grant (to revoke).
    Reused(String),
    Expired,
    Unknown,
}

pub async fn rotate_refresh(ledger: &Ledger, hash: &str, now: i64) -> Result<RefreshOutcome> {
    on_pool!(ledger, p => {
        let taken = sqlx::query("UPDATE oauth_tokens SET rotated_at = $1 WHERE hash = $2 AND kind = 'refresh' AND rotated_at IS NULL AND expires_at > $1 RETURNING grant_id")
            .bind(now).bind(hash).fetch_all(p).await?;
        if let Some(r) = taken.into_iter().next() {
            return Ok(RefreshOutcome::Rotated(r.try_get("grant_id")?));
        }
        let row = sqlx::query("SELECT grant_id, rotated_at FROM oauth_tokens WHERE hash = $1 AND kind = 'refresh'")
            .bind(hash).fetch_optional(p).await?;
        Ok(match row {
            None => RefreshOutcome::Unknown,
            Some(r) => match r.try_get::<Option<i64>, _>("rotated_at")? {
                Some(_) => RefreshOutcome::Reused(r.try_get("grant_id")?),
                None => RefreshOutcome::Expired,
            },
        })
    })
}

/// An access token as the MCP endpoints resolve it: its live grant and the hash of the key
/// the grant acts as (whose own liveness the key lookup checks).
#[derive(Debug, Clone)]
pub struct AccessRow {
    pub grant_id: String,
    pub resource: String,
    pub expires_at: i64,
    pub key_hash: String,
}

pub async fn access(ledger: &Ledger, hash: &str) -> Result<Option<AccessRow>> {
    on_pool!(ledger, p => {
        let row = sqlx::query(
            "SELECT g.id, g.resource, t.expires_at, k.hash AS key_hash FROM oauth_tokens t \
             JOIN oauth_grants g ON g.id = t.grant_id JOIN api_keys k ON k.id = g.key_id \
             WHERE t.hash = $1 AND t.kind = 'access' AND g.revoked_at IS NULL")
            .bind(hash).fetch_optional(p).await?;
        match row {
            Some(r) => Ok(Some(AccessRow {
                grant_id: r.try_get("id")?,
                resource: r.try_get("resource")?,
                expires_at: r.try_get("expires_at")?,
                key_hash: r.try_get("key_hash")?,
            })),
            None => Ok(None),
        }
    })
}

/// The grant a token (of either kind) belongs to, for revocation (RFC 7009).
pub async fn grant_of(ledger: &Ledger, hash: &str) -> Result<Option<String>> {
    on_pool!(ledger, p => {
        let row = sqlx::query("SELECT grant_id FROM oauth_tokens WHERE hash = $1")
            .bind(hash).fetch_optional(p).await?;
        match row {
            Some(r) => Ok(Some(r.try_get("grant_id")?)),
            None => Ok(None),
        }
    })
}
