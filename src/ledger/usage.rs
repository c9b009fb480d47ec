//! Usage rows: per-day and per-model totals and recent requests of an account.

use sqlx::Row;

use super::store::{on_pool, Ledger, Result};

#[derive(Debug, Clone, serde::Serialize)]
pub struct UsageRow {
    pub request_id: String,
    pub model_requested: String,
    pub model_used: Option<String>,
    pub provider: Option<String>,
    pub prompt_tokens: i64,
    pub completion_tokens: i64,
    pub credits: i64,
    pub status: i64,
    pub latency_ms: i64,
    pub created_at: i64,
    /// What the credit hold decided for candidates after the first, if anything.
    pub hold_note: Option<String>,
}

#[derive(Debug, Clone)]
pub struct UsageAgg {
    pub key: String,
    pub requests: i64,
    pub prompt_tokens: i64,
    pub completion_tokens: i64,
    pub credits: i64,
}

impl Ledger {
    /// Usage grouped by day (Unix day number) or by model since `since_ms`.
    pub async fn usage_by(
        &self,
        account_id: &str,
        since_ms: i64,
        by_day: bool,
    ) -> Result<Vec<UsageAgg>> {
        let key = if by_day {
            "CAST(created_at / 86400000 AS TEXT)"
        } else {
            "COALESCE(model_used, model_requested)"
        };
        let sql = format!(
            "SELECT {key} AS k, COUNT(*) AS n, CAST(COALESCE(SUM(prompt_tokens), 0) AS BIGINT) AS pt, CAST(COALESCE(SUM(completion_tokens), 0) AS BIGINT) AS ct, CAST(COALESCE(SUM(credits), 0) AS BIGINT) AS cr FROM usage WHERE account_id = $1 AND created_at >= $2 GROUP BY k ORDER BY k"
        );
        on_pool!(self, p => {
            let rows = sqlx::query(&sql).bind(account_id).bind(since_ms).fetch_all(p).await?;
            rows.iter().map(|r| Ok(UsageAgg {
                key: r.try_get("k")?,
                requests: r.try_get("n")?,
                prompt_tokens: r.try_get("pt")?,
                completion_tokens: r.try_get("ct")?,
                credits: r.try_get("cr")?,
            })).collect()
        })
    }

    pub async fn recent_usage(&self, account_id: &str, limit: i64) -> Result<Vec<UsageRow>> {
        on_pool!(self, p => {
            let rows = sqlx::query("SELECT request_id, model_requested, model_used, provider, prompt_tokens, completion_tokens, credits, status, latency_ms, created_at, hold_note FROM usage WHERE account_id = $1 ORDER BY created_at DESC, request_id DESC LIMIT $2")
                .bind(account_id).bind(limit).fetch_all(p).await?;
            rows.iter().map(|r| Ok(UsageRow {
                request_id: r.try_get("request_id")?,
                model_requested: r.try_get("model_requested")?,
                model_used: r.try_get("model_used")?,
                provider: r.try_get("provider")?,
                prompt_tokens: r.try_get("prompt_tokens")?,
                completion_tokens: r.try_get("completion_tokens")?,
                credits: r.try_get("credits")?,
                status: r.try_get("status")?,
                latency_ms: r.try_get("latency_ms")?,
                created_at: r.try_get("created_at")?,
                hold_note: r.try_get("hold_note")?,
            })).collect()
        })
    }

    /// Sum of usage credits and count of rows for an account (tests and admin view).
    pub async fn usage_totals(&self, account_id: &str) -> Result<(i64, i64)> {
        on_pool!(self, p => {
            let r = sqlx::query("SELECT COUNT(*) AS n, CAST(COALESCE(SUM(credits), 0) AS BIGINT) AS s FROM usage WHERE account_id = $1")
                .bind(account_id).fetch_one(p).await?;
            Ok((r.try_get("n")?, r.try_get("s")?))
        })
    }
}
