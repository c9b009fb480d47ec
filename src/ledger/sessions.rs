//! Dashboard sessions, stored by the hash of their id.

use sqlx::Row;

use super::store::{on_pool, Ledger, Result};

impl Ledger {
    pub async fn create_session(
        &self,
        id_hash: &str,
        account_id: &str,
        expires_at: i64,
    ) -> Result<()> {
        on_pool!(self, p => {
            sqlx::query("INSERT INTO sessions (id_hash, account_id, expires_at) VALUES ($1, $2, $3)")
                .bind(id_hash).bind(account_id).bind(expires_at).execute(p).await?;
            Ok(())
        })
    }

    pub async fn session_account(&self, id_hash: &str, now: i64) -> Result<Option<String>> {
        on_pool!(self, p => {
            let row = sqlx::query("SELECT account_id FROM sessions WHERE id_hash = $1 AND expires_at > $2")
                .bind(id_hash).bind(now).fetch_optional(p).await?;
            match row {
                Some(r) => Ok(Some(r.try_get("account_id")?)),
                None => Ok(None),
            }
        })
    }

    pub async fn delete_session(&self, id_hash: &str) -> Result<()> {
        on_pool!(self, p => {
            sqlx::query("DELETE FROM sessions WHERE id_hash = $1").bind(id_hash).execute(p).await?;
            Ok(())
        })
    }

    /// Deletes sessions past their expiry (the reaper's round); returns how many.
    pub async fn delete_expired_sessions(&self, now: i64) -> Result<u64> {
        on_pool!(self, p => {
            let r = sqlx::query("DELETE FROM sessions WHERE expires_at <= $1")
                .bind(now).execute(p).await?;
            Ok(r.rows_affected())
        })
    }
}
