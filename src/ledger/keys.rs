//! API keys: only a SHA-256 hash is stored, with the first characters for display.

use sqlx::Row;

use super::store::{on_pool, Ledger, Result};

#[derive(Debug, Clone)]
pub struct NewKey {
    pub id: String,
    pub name: String,
    pub prefix: String,
    pub hash: String,
}

#[derive(Debug, Clone)]
pub struct KeyRow {
    pub id: String,
    pub name: String,
    pub prefix: String,
    pub created_at: i64,
    pub last_used_at: Option<i64>,
    pub revoked: bool,
}

/// What a key lookup tells the request pipeline.
#[derive(Debug, Clone)]
pub struct KeyAuth {
    pub key_id: String,
    pub account_id: String,
    pub plan: String,
    pub requests_per_hour: Option<i64>,
    pub requests_per_day: Option<i64>,
}

impl Ledger {
    pub async fn insert_key(&self, account_id: &str, k: &NewKey, now: i64) -> Result<()> {
        on_pool!(self, p => {
            sqlx::query("INSERT INTO api_keys (id, account_id, name, prefix, hash, created_at) VALUES ($1, $2, $3, $4, $5, $6)")
                .bind(&k.id).bind(account_id).bind(&k.name).bind(&k.prefix).bind(&k.hash).bind(now)
                .execute(p).await?;
            Ok(())
        })
    }

    pub async fn list_keys(&self, account_id: &str) -> Result<Vec<KeyRow>> {
        on_pool!(self, p => {
            let rows = sqlx::query("SELECT id, name, prefix, created_at, last_used_at, revoked_at FROM api_keys WHERE account_id = $1 ORDER BY created_at, id")
                .bind(account_id).fetch_all(p).await?;
            rows.iter().map(|r| Ok(KeyRow {
                id: r.try_get("id")?,
                name: r.try_get("name")?,
                prefix: r.try_get("prefix")?,
                created_at: r.try_get("created_at")?,
                last_used_at: r.try_get("last_used_at")?,
                revoked: r.try_get::<Option<i64>, _>("revoked_at")?.is_some(),
            })).collect()
        })
    }

    /// Revokes one of the account's keys; returns its hash (for cache eviction) or `None`
    /// when the account has no such key.
    pub async fn revoke_key(
        &self,
        account_id: &str,
        key_id: &str,
        now: i64,
    ) -> Result<Option<String>> {
        on_pool!(self, p => {
            let row = sqlx::query("UPDATE api_keys SET revoked_at = COALESCE(revoked_at, $1) WHERE id = $2 AND account_id = $3 RETURNING hash")
                .bind(now).bind(key_id).bind(account_id).fetch_all(p).await?.into_iter().next();
            match row {
                Some(r) => Ok(Some(r.try_get("hash")?)),
                None => Ok(None),
            }
        })
    }

    /// The live key with this hash; revoked keys are not returned.
    pub async fn key_auth(&self, hash: &str) -> Result<Option<KeyAuth>> {
        on_pool!(self, p => {
            let row = sqlx::query(
                "SELECT k.id, k.account_id, a.plan, a.requests_per_hour, a.requests_per_day FROM api_keys k JOIN accounts a ON a.user_id = k.account_id WHERE k.hash = $1 AND k.revoked_at IS NULL",
            )
            .bind(hash).fetch_optional(p).await?;
            match row {
                Some(r) => Ok(Some(KeyAuth {
                    key_id: r.try_get("id")?,
                    account_id: r.try_get("account_id")?,
                    plan: r.try_get("plan")?,
                    requests_per_hour: r.try_get("requests_per_hour")?,
                    requests_per_day: r.try_get("requests_per_day")?,
                })),
                None => Ok(None),
            }
        })
    }

    pub async fn touch_key(&self, key_id: &str, now: i64) -> Result<()> {
        on_pool!(self, p => {
            sqlx::query("UPDATE api_keys SET last_used_at = $1 WHERE id = $2").bind(now).bind(key_id).execute(p).await?;
            Ok(())
        })
    }
}
