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
    /// Milliseconds; `None`: never.
    pub expires_at: Option<i64>,
    /// The models it may use (ids, aliases, tiers); `None`: all.
    pub allowed_models: Option<Vec<String>>,
}

/// What a key lookup tells the request pipeline.
#[derive(Debug, Clone)]
pub struct KeyAuth {
    pub key_id: String,
    pub account_id: String,
    pub plan: String,
    pub requests_per_hour: Option<i64>,
    pub requests_per_day: Option<i64>,
    /// When the key stops working, in milliseconds; `None`: never.
    pub expires_at: Option<i64>,
    /// The models it may use (ids, aliases, tiers); `None`: all.
    pub allowed_models: Option<std::sync::Arc<[String]>>,
}

/// `allowed_models` as stored: a JSON array of strings.
fn models_of(text: Option<String>) -> Option<Vec<String>> {
    text.and_then(|t| serde_json::from_str(&t).ok())
}

impl Ledger {
    pub async fn insert_key(&self, account_id: &str, k: &NewKey, now: i64) -> Result<()> {
        self.insert_key_with(account_id, k, now, None, None).await
    }

    /// A key that stops working at `expires_at` (milliseconds), or never, limited to
    /// `allowed_models` (a JSON array), or not.
    pub async fn insert_key_with(
        &self,
        account_id: &str,
        k: &NewKey,
        now: i64,
        expires_at: Option<i64>,
        allowed_models: Option<&str>,
    ) -> Result<()> {
        on_pool!(self, p => {
            sqlx::query("INSERT INTO api_keys (id, account_id, name, prefix, hash, created_at, expires_at, allowed_models) VALUES ($1, $2, $3, $4, $5, $6, $7, $8)")
                .bind(&k.id).bind(account_id).bind(&k.name).bind(&k.prefix).bind(&k.hash).bind(now).bind(expires_at).bind(allowed_models)
                .execute(p).await?;
            Ok(())
        })
    }

    /// Sets the models one of the account's keys may use (a JSON array, `None` for all);
    /// returns its hash or `None` when the account has no such key.
    pub async fn set_key_models(
        &self,
        account_id: &str,
        key_id: &str,
        allowed_models: Option<&str>,
    ) -> Result<Option<String>> {
        on_pool!(self, p => {
            let row = sqlx::query("UPDATE api_keys SET allowed_models = $1 WHERE id = $2 AND account_id = $3 RETURNING hash")
                .bind(allowed_models).bind(key_id).bind(account_id).fetch_all(p).await?.into_iter().next();
            match row {
                Some(r) => Ok(Some(r.try_get("hash")?)),
                None => Ok(None),
            }
        })
    }

    /// Sets when one of the account's keys expires; returns its hash (for cache eviction) or
    /// `None` when the account has no such key.
    pub async fn set_key_expiry(
        &self,
        account_id: &str,
        key_id: &str,
        expires_at: Option<i64>,
    ) -> Result<Option<String>> {
        on_pool!(self, p => {
            let row = sqlx::query("UPDATE api_keys SET expires_at = $1 WHERE id = $2 AND account_id = $3 RETURNING hash")
                .bind(expires_at).bind(key_id).bind(account_id).fetch_all(p).await?.into_iter().next();
            match row {
                Some(r) => Ok(Some(r.try_get("hash")?)),
                None => Ok(None),
            }
        })
    }

    pub async fn list_keys(&self, account_id: &str) -> Result<Vec<KeyRow>> {
        on_pool!(self, p => {
            let rows = sqlx::query("SELECT id, name, prefix, created_at, last_used_at, revoked_at, expires_at, allowed_models FROM api_keys WHERE account_id = $1 ORDER BY created_at, id")
                .bind(account_id).fetch_all(p).await?;
            rows.iter().map(|r| Ok(KeyRow {
                id: r.try_get("id")?,
                name: r.try_get("name")?,
                prefix: r.try_get("prefix")?,
                created_at: r.try_get("created_at")?,
                last_used_at: r.try_get("last_used_at")?,
                revoked: r.try_get::<Option<i64>, _>("revoked_at")?.is_some(),
                expires_at: r.try_get("expires_at")?,
                allowed_models: models_of(r.try_get("allowed_models")?),
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
                "SELECT k.id, k.account_id, k.expires_at, k.allowed_models, a.plan, a.requests_per_hour, a.requests_per_day FROM api_keys k JOIN accounts a ON a.user_id = k.account_id WHERE k.hash = $1 AND k.revoked_at IS NULL",
            )
            .bind(hash).fetch_optional(p).await?;
            match row {
                Some(r) => Ok(Some(KeyAuth {
                    key_id: r.try_get("id")?,
                    account_id: r.try_get("account_id")?,
                    plan: r.try_get("plan")?,
                    requests_per_hour: r.try_get("requests_per_hour")?,
                    requests_per_day: r.try_get("requests_per_day")?,
                    expires_at: r.try_get("expires_at")?,
                    allowed_models: models_of(r.try_get("allowed_models")?).map(Into::into),
                })),
                None => Ok(None),
            }
        })
    }

    /// Issues `new` as the successor of the account's live key `key_id`, with its name, expiry
    /// and allowlist, and sets the old one to expire at `until` (or its own expiry when that is
    /// sooner), in one transaction. Returns the old key's hash and its expiry now, or `None`
    /// when the account has no such live key.
    pub async fn rotate_key(
        &self,
        account_id: &str,
        key_id: &str,
        new: &NewKey,
        now: i64,
        until: i64,
    ) -> Result<Option<(String, i64, KeyRow)>> {
        // The first statement writes, so the transaction holds SQLite's write lock from its
        // start: a transaction that read first and then wrote would fail at once when another
        // connection committed in between (BUSY_SNAPSHOT), which a busy ledger does all the
        // time.
        on_pool!(self, p => {
            let mut tx = p.begin().await?;
            let copied = sqlx::query(
                "INSERT INTO api_keys (id, account_id, name, prefix, hash, created_at, expires_at, allowed_models) \
                 SELECT $1, account_id, name, $2, $3, $4, expires_at, allowed_models FROM api_keys \
                 WHERE id = $5 AND account_id = $6 AND revoked_at IS NULL",
            )
            .bind(&new.id).bind(&new.prefix).bind(&new.hash).bind(now).bind(key_id).bind(account_id)
            .execute(&mut *tx).await?;
            if copied.rows_affected() == 0 {
                return Ok(None);
            }
            let old = sqlx::query(
                "UPDATE api_keys SET expires_at = CASE WHEN expires_at IS NULL OR expires_at > $1 THEN $1 ELSE expires_at END \
                 WHERE id = $2 RETURNING hash, expires_at",
            )
            .bind(until).bind(key_id).fetch_all(&mut *tx).await?;
            let row = sqlx::query("SELECT name, expires_at, allowed_models FROM api_keys WHERE id = $1")
                .bind(&new.id).fetch_one(&mut *tx).await?;
            tx.commit().await?;
            let Some(old) = old.into_iter().next() else { return Ok(None) };
            let key = KeyRow {
                id: new.id.clone(),
                name: row.try_get("name")?,
                prefix: new.prefix.clone(),
                created_at: now,
                last_used_at: None,
                revoked: false,
                expires_at: row.try_get("expires_at")?,
                allowed_models: models_of(row.try_get("allowed_models")?),
            };
            Ok(Some((old.try_get("hash")?, old.try_get("expires_at")?, key)))
        })
    }

    pub async fn touch_key(&self, key_id: &str, now: i64) -> Result<()> {
        on_pool!(self, p => {
            sqlx::query("UPDATE api_keys SET last_used_at = $1 WHERE id = $2").bind(now).bind(key_id).execute(p).await?;
            Ok(())
        })
    }
}
