//! The response cache's table, for a gateway without Redis: entries by key, read while
//! unexpired, written whole, the oldest evicted past the total cap.

use sqlx::Row;

use super::store::{on_pool, Ledger, Result};

/// One stored entry: when it was written (ms) and its bytes.
pub struct CachedRow {
    pub created_at: i64,
    pub entry: Vec<u8>,
}

impl Ledger {
    /// The entry under `key`, unless it expired by `now_ms`.
    pub async fn cached_reply(&self, key: &str, now_ms: i64) -> Result<Option<CachedRow>> {
        on_pool!(self, p => {
            let row = sqlx::query("SELECT created_at, entry FROM response_cache WHERE key = $1 AND expires_at > $2")
                .bind(key).bind(now_ms).fetch_optional(p).await?;
            match row {
                None => Ok(None),
                Some(r) => Ok(Some(CachedRow { created_at: r.try_get("created_at")?, entry: r.try_get("entry")? })),
            }
        })
    }

    /// Writes the entry under `key` (replacing one there), then deletes the expired entries
    /// and the oldest until all together are at most `max_total` bytes.
    pub async fn cache_reply(
        &self,
        (key, wallet): (&str, &str),
        entry: &[u8],
        (now_ms, expires_at): (i64, i64),
        max_total: u64,
    ) -> Result<()> {
        let max_total = i64::try_from(max_total).unwrap_or(i64::MAX);
        on_pool!(self, p => {
            sqlx::query("INSERT INTO response_cache (key, wallet, created_at, expires_at, size, entry) VALUES ($1, $2, $3, $4, $5, $6) \
                         ON CONFLICT (key) DO UPDATE SET wallet = excluded.wallet, created_at = excluded.created_at, expires_at = excluded.expires_at, size = excluded.size, entry = excluded.entry")
                .bind(key).bind(wallet).bind(now_ms).bind(expires_at).bind(entry.len() as i64).bind(entry)
                .execute(p).await?;
            sqlx::query("DELETE FROM response_cache WHERE expires_at <= $1").bind(now_ms).execute(p).await?;
            // Oldest first, one at a time: past the cap by one entry is the common case, and no
            // more is evicted than the cap needs.
            loop {
                let total: i64 = sqlx::query("SELECT CAST(COALESCE(SUM(size), 0) AS BIGINT) AS t FROM response_cache")
                    .fetch_one(p).await?.try_get("t")?;
                if total <= max_total {
                    return Ok(());
                }
                sqlx::query("DELETE FROM response_cache WHERE key IN (SELECT key FROM response_cache ORDER BY created_at, key LIMIT 1)")
                    .execute(p).await?;
            }
        })
    }
}
