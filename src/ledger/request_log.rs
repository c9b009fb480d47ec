//! The request log's table: records written in batches (one multi-row insert), listed by
//! wallet and time a page at a time, read one by one, their payloads nulled and the records
//! deleted past their retention; and payload logging as a wallet's setting.

use sqlx::Row;
use tollgate_filters::request_query::{Cursor, Status};

use super::store::{on_pool, Ledger, Result};

/// One record as stored.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct LogRow {
    pub request_id: String,
    /// Milliseconds.
    pub created_at: i64,
    /// The wallet: a person's account or an organization.
    pub account_id: String,
    pub key_id: String,
    /// The member who owns an organization key.
    pub member_id: Option<String>,
    pub door: String,
    pub route: String,
    pub model_requested: Option<String>,
    pub model_used: Option<String>,
    pub provider: Option<String>,
    pub status: i64,
    pub prompt_tokens: Option<i64>,
    pub completion_tokens: Option<i64>,
    /// µcr.
    pub cost_micros: Option<i64>,
    pub latency_ms: i64,
    pub ttft_ms: Option<i64>,
    /// The upstream legs, a JSON array.
    pub legs: String,
    pub error: Option<String>,
    pub request_body: Option<String>,
    pub response_body: Option<String>,
    pub request_truncated: Option<bool>,
    pub response_truncated: Option<bool>,
}

/// Which records a listing reads, newest first.
#[derive(Debug, Clone, Default)]
pub struct LogFilter<'a> {
    pub account_id: &'a str,
    /// Only this member's organization keys.
    pub member_id: Option<&'a str>,
    pub key_id: Option<&'a str>,
    /// Asked for or served.
    pub model: Option<&'a str>,
    pub status: Option<Status>,
    pub since_ms: Option<i64>,
    pub until_ms: Option<i64>,
    /// After this record (the previous page's last).
    pub after: Option<&'a Cursor>,
    pub limit: i64,
    /// The bodies too (an export, one record).
    pub payloads: bool,
}

const COLUMNS: &str = "request_id, created_at, account_id, key_id, member_id, door, route, model_requested, model_used, provider, status, prompt_tokens, completion_tokens, cost_micros, latency_ms, ttft_ms, legs, error, request_truncated, response_truncated";

fn row_of<R: Row>(r: &R, payloads: bool) -> std::result::Result<LogRow, sqlx::Error>
where
    for<'c> &'c str: sqlx::ColumnIndex<R>,
    for<'q> i64: sqlx::Decode<'q, R::Database> + sqlx::Type<R::Database>,
    for<'q> String: sqlx::Decode<'q, R::Database> + sqlx::Type<R::Database>,
    for<'q> Option<i64>: sqlx::Decode<'q, R::Database> + sqlx::Type<R::Database>,
    for<'q> Option<String>: sqlx::Decode<'q, R::Database> + sqlx::Type<R::Database>,
{
    let flag = |v: Option<i64>| v.map(|v| v != 0);
    Ok(LogRow {
        request_id: r.try_get("request_id")?,
        created_at: r.try_get("created_at")?,
        account_id: r.try_get("account_id")?,
        key_id: r.try_get("key_id")?,
        member_id: r.try_get("member_id")?,
        door: r.try_get("door")?,
        route: r.try_get("route")?,
        model_requested: r.try_get("model_requested")?,
        model_used: r.try_get("model_used")?,
        provider: r.try_get("provider")?,
        status: r.try_get("status")?,
        prompt_tokens: r.try_get("prompt_tokens")?,
        completion_tokens: r.try_get("completion_tokens")?,
        cost_micros: r.try_get("cost_micros")?,
        latency_ms: r.try_get("latency_ms")?,
        ttft_ms: r.try_get("ttft_ms")?,
        legs: r.try_get("legs")?,
        error: r.try_get("error")?,
        request_body: if payloads {
            r.try_get("request_body")?
        } else {
            None
        },
        response_body: if payloads {
            r.try_get("response_body")?
        } else {
            None
        },
        request_truncated: flag(r.try_get("request_truncated")?),
        response_truncated: flag(r.try_get("response_truncated")?),
    })
}

impl Ledger {
    /// Writes `rows` in one statement; a record already written (the same request id) is
    /// left as it was.
    pub async fn insert_request_log(&self, rows: &[LogRow]) -> Result<()> {
        if rows.is_empty() {
            return Ok(());
        }
        on_pool!(self, p => {
            let mut q = sqlx::QueryBuilder::new(format!("INSERT INTO request_log ({COLUMNS}, request_body, response_body) "));
            q.push_values(rows, |mut b, r| {
                b.push_bind(&r.request_id).push_bind(r.created_at).push_bind(&r.account_id)
                    .push_bind(&r.key_id).push_bind(&r.member_id).push_bind(&r.door).push_bind(&r.route)
                    .push_bind(&r.model_requested).push_bind(&r.model_used).push_bind(&r.provider)
                    .push_bind(r.status).push_bind(r.prompt_tokens).push_bind(r.completion_tokens)
                    .push_bind(r.cost_micros).push_bind(r.latency_ms).push_bind(r.ttft_ms)
                    .push_bind(&r.legs).push_bind(&r.error)
                    .push_bind(r.request_truncated.map(i64::from))
                    .push_bind(r.response_truncated.map(i64::from))
                    .push_bind(&r.request_body).push_bind(&r.response_body);
            });
            q.push(" ON CONFLICT (request_id) DO NOTHING");
            q.build().execute(p).await?;
            Ok(())
        })
    }

    /// A page of a wallet's records, newest first.
    pub async fn list_request_log(&self, f: &LogFilter<'_>) -> Result<Vec<LogRow>> {
        let bodies = if f.payloads {
            ", request_body, response_body"
        } else {
            ""
        };
        on_pool!(self, p => {
            let mut q = sqlx::QueryBuilder::new(format!("SELECT {COLUMNS}{bodies} FROM request_log WHERE account_id = "));
            q.push_bind(f.account_id);
            if let Some(m) = f.member_id {
                q.push(" AND member_id = ").push_bind(m);
            }
            if let Some(k) = f.key_id {
                q.push(" AND key_id = ").push_bind(k);
            }
            if let Some(m) = f.model {
                q.push(" AND (model_requested = ").push_bind(m).push(" OR model_used = ").push_bind(m).push(")");
            }
            match f.status {
                Some(Status::Code(c)) => { q.push(" AND status = ").push_bind(c); }
                Some(Status::Error) => { q.push(" AND status >= 400"); }
                Some(Status::Ok) => { q.push(" AND status < 400"); }
                None => {}
            }
            if let Some(s) = f.since_ms {
                q.push(" AND created_at >= ").push_bind(s);
            }
            if let Some(u) = f.until_ms {
                q.push(" AND created_at < ").push_bind(u);
            }
            if let Some(c) = f.after {
                q.push(" AND (created_at < ").push_bind(c.created_at)
                    .push(" OR (created_at = ").push_bind(c.created_at)
                    .push(" AND request_id < ").push_bind(&c.request_id).push("))");
            }
            q.push(" ORDER BY created_at DESC, request_id DESC LIMIT ").push_bind(f.limit);
            let rows = q.build().fetch_all(p).await?;
            rows.iter().map(|r| Ok(row_of(r, f.payloads)?)).collect()
        })
    }

    /// One record with its payloads.
    pub async fn request_log_record(&self, request_id: &str) -> Result<Option<LogRow>> {
        let sql = format!(
            "SELECT {COLUMNS}, request_body, response_body FROM request_log WHERE request_id = $1"
        );
        on_pool!(self, p => {
            let row = sqlx::query(&sql).bind(request_id).fetch_optional(p).await?;
            match row {
                Some(r) => Ok(Some(row_of(&r, true)?)),
                None => Ok(None),
            }
        })
    }

    /// Nulls the payloads of records started before `payloads_before_ms` and deletes the
    /// records started before `records_before_ms`, at most `batch` of each; returns how many
    /// of each.
    pub async fn expire_request_log(
        &self,
        payloads_before_ms: i64,
        records_before_ms: i64,
        batch: i64,
    ) -> Result<(u64, u64)> {
        on_pool!(self, p => {
            let nulled = sqlx::query("UPDATE request_log SET request_body = NULL, response_body = NULL, request_truncated = NULL, response_truncated = NULL WHERE request_id IN \
                 (SELECT request_id FROM request_log WHERE (request_body IS NOT NULL OR response_body IS NOT NULL) AND created_at < $1 LIMIT $2)")
                .bind(payloads_before_ms).bind(batch).execute(p).await?.rows_affected();
            let deleted = sqlx::query("DELETE FROM request_log WHERE request_id IN \
                 (SELECT request_id FROM request_log WHERE created_at < $1 LIMIT $2)")
                .bind(records_before_ms).bind(batch).execute(p).await?.rows_affected();
            Ok((nulled, deleted))
        })
    }

    /// Whether payload logging is on for a wallet (an account or an organization).
    pub async fn log_payloads(&self, account_id: &str) -> Result<bool> {
        on_pool!(self, p => {
            let row = sqlx::query("SELECT log_payloads FROM accounts WHERE user_id = $1")
                .bind(account_id).fetch_optional(p).await?;
            match row {
                Some(r) => Ok(r.try_get::<i64, _>("log_payloads")? != 0),
                None => Ok(false),
            }
        })
    }

    /// Turns a wallet's payload logging on or off; `false`: there is no such account.
    pub async fn set_log_payloads(&self, account_id: &str, on: bool) -> Result<bool> {
        on_pool!(self, p => {
            let changed = sqlx::query("UPDATE accounts SET log_payloads = $1 WHERE user_id = $2")
                .bind(i64::from(on)).bind(account_id).execute(p).await?.rows_affected();
            Ok(changed > 0)
        })
    }
}
