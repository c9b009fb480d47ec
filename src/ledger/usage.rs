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
    /// Answered from the response cache.
    pub cache_hit: bool,
    /// What it saved against list price (µcr).
    pub saved_credits: i64,
}

#[derive(Debug, Clone)]
pub struct UsageAgg {
    pub key: String,
    pub requests: i64,
    pub prompt_tokens: i64,
    pub completion_tokens: i64,
    pub credits: i64,
}

/// What a wallet's requests saved against list price (µcr).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Savings {
    /// By the provider's prompt cache: cache-read tokens at the input rate less the
    /// cache-read rate.
    pub cache_reads: i64,
    /// By response cache hits: their list price less their charge.
    pub response_cache: i64,
    pub response_cache_hits: i64,
}

/// One key's usage in an organization.
#[derive(Debug, Clone)]
pub struct KeyUsage {
    pub name: String,
    /// The member who owns it.
    pub owner: Option<String>,
    /// Keyed by the key's id.
    pub usage: UsageAgg,
}

/// The condition that a usage row is of a key member `$n` owns, when a member is named.
fn of_member(member: Option<&str>, n: u8) -> String {
    match member {
        Some(_) => format!(
            " AND key_id IN (SELECT id FROM api_keys WHERE account_id = $1 AND owner_id = ${n})"
        ),
        None => String::new(),
    }
}

impl Ledger {
    /// Usage grouped by day (Unix day number) or by model since `since_ms`; of one member's
    /// keys only when `member` names one (an organization's usage as its member sees it).
    pub async fn usage_by(
        &self,
        account_id: &str,
        member: Option<&str>,
        since_ms: i64,
        by_day: bool,
    ) -> Result<Vec<UsageAgg>> {
        let key = if by_day {
            "CAST(created_at / 86400000 AS TEXT)"
        } else {
            "COALESCE(model_used, model_requested)"
        };
        let sql = format!(
            "SELECT {key} AS k, COUNT(*) AS n, CAST(COALESCE(SUM(prompt_tokens), 0) AS BIGINT) AS pt, CAST(COALESCE(SUM(completion_tokens), 0) AS BIGINT) AS ct, CAST(COALESCE(SUM(credits), 0) AS BIGINT) AS cr FROM usage WHERE account_id = $1 AND created_at >= $2{} GROUP BY k ORDER BY k",
            of_member(member, 3)
        );
        on_pool!(self, p => {
            let mut q = sqlx::query(&sql).bind(account_id).bind(since_ms);
            if let Some(m) = member {
                q = q.bind(m);
            }
            let rows = q.fetch_all(p).await?;
            rows.iter().map(|r| Ok(UsageAgg {
                key: r.try_get("k")?,
                requests: r.try_get("n")?,
                prompt_tokens: r.try_get("pt")?,
                completion_tokens: r.try_get("ct")?,
                credits: r.try_get("cr")?,
            })).collect()
        })
    }

    /// The account's most recent usage rows (of one member's keys only when `member` names one).
    pub async fn recent_usage(
        &self,
        account_id: &str,
        member: Option<&str>,
        limit: i64,
    ) -> Result<Vec<UsageRow>> {
        let sql = format!("SELECT request_id, model_requested, model_used, provider, prompt_tokens, completion_tokens, credits, status, latency_ms, created_at, hold_note, cache_hit, saved_credits FROM usage WHERE account_id = $1{} ORDER BY created_at DESC, request_id DESC LIMIT $2", of_member(member, 3));
        on_pool!(self, p => {
            let mut q = sqlx::query(&sql).bind(account_id).bind(limit);
            if let Some(m) = member {
                q = q.bind(m);
            }
            let rows = q.fetch_all(p).await?;
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
                cache_hit: r.try_get::<i64, _>("cache_hit")? != 0,
                saved_credits: r.try_get("saved_credits")?,
            })).collect()
        })
    }

    /// An organization's usage since `since_ms` per key, with each key's name and owner.
    pub async fn usage_by_key(&self, org: &str, since_ms: i64) -> Result<Vec<KeyUsage>> {
        on_pool!(self, p => {
            let rows = sqlx::query("SELECT u.key_id AS k, MIN(k.name) AS name, MIN(k.owner_id) AS owner, COUNT(*) AS n, CAST(COALESCE(SUM(u.prompt_tokens), 0) AS BIGINT) AS pt, \
                 CAST(COALESCE(SUM(u.completion_tokens), 0) AS BIGINT) AS ct, CAST(COALESCE(SUM(u.credits), 0) AS BIGINT) AS cr \
                 FROM usage u JOIN api_keys k ON k.id = u.key_id WHERE u.account_id = $1 AND u.created_at >= $2 GROUP BY u.key_id ORDER BY u.key_id")
                .bind(org).bind(since_ms).fetch_all(p).await?;
            rows.iter().map(|r| Ok(KeyUsage {
                name: r.try_get("name")?,
                owner: r.try_get("owner")?,
                usage: UsageAgg {
                    key: r.try_get("k")?,
                    requests: r.try_get("n")?,
                    prompt_tokens: r.try_get("pt")?,
                    completion_tokens: r.try_get("ct")?,
                    credits: r.try_get("cr")?,
                },
            })).collect()
        })
    }

    /// What the wallet's requests since `since_ms` saved (of one member's keys only when
    /// `member` names one).
    pub async fn savings(
        &self,
        account_id: &str,
        member: Option<&str>,
        since_ms: i64,
    ) -> Result<Savings> {
        let sql = format!(
            "SELECT CAST(COALESCE(SUM(CASE WHEN cache_hit = 0 THEN saved_credits ELSE 0 END), 0) AS BIGINT) AS reads, \
             CAST(COALESCE(SUM(CASE WHEN cache_hit <> 0 THEN saved_credits ELSE 0 END), 0) AS BIGINT) AS hits_saved, \
             CAST(COALESCE(SUM(CASE WHEN cache_hit <> 0 THEN 1 ELSE 0 END), 0) AS BIGINT) AS hits \
             FROM usage WHERE account_id = $1 AND created_at >= $2{}",
            of_member(member, 3)
        );
        on_pool!(self, p => {
            let mut q = sqlx::query(&sql).bind(account_id).bind(since_ms);
            if let Some(m) = member {
                q = q.bind(m);
            }
            let r = q.fetch_one(p).await?;
            Ok(Savings {
                cache_reads: r.try_get("reads")?,
                response_cache: r.try_get("hits_saved")?,
                response_cache_hits: r.try_get("hits")?,
            })
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
