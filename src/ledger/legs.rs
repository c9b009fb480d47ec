//! A resumed stream's legs (docs/api.md, "Streams that survive a cut"): one `usage_legs` row per
//! provider that served part of the answer, under its request's id. The request's one usage
//! row carries the charge (the legs' sum) and moves the money; these rows are its breakdown,
//! written once it is settled.

use sqlx::Row;

use super::store::{on_pool, Ledger, Result};

/// One leg's row.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LegRow {
    pub request_id: String,
    /// 1 for the provider that started the stream, 2 for the first continuation, …
    pub leg: i64,
    pub account_id: String,
    pub model_used: String,
    pub provider: String,
    pub prompt_tokens: i64,
    pub completion_tokens: i64,
    /// µcr charged for this leg.
    pub credits: i64,
    pub created_at: i64,
}

impl Ledger {
    /// Writes the legs of a request; a leg already written is left as it is (a retry writes
    /// nothing twice).
    pub async fn write_legs(&self, rows: &[LegRow]) -> Result<()> {
        on_pool!(self, p => {
            let mut tx = p.begin().await?;
            for r in rows {
                sqlx::query("INSERT INTO usage_legs (request_id, leg, account_id, model_used, provider, prompt_tokens, completion_tokens, credits, created_at) VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9) ON CONFLICT (request_id, leg) DO NOTHING")
                    .bind(&r.request_id).bind(r.leg as i32).bind(&r.account_id).bind(&r.model_used).bind(&r.provider)
                    .bind(r.prompt_tokens).bind(r.completion_tokens).bind(r.credits).bind(r.created_at)
                    .execute(&mut *tx).await?;
            }
            tx.commit().await?;
            Ok(())
        })
    }

    /// The legs of a request, in order (none for a request served by one provider).
    pub async fn usage_legs(&self, request_id: &str) -> Result<Vec<LegRow>> {
        on_pool!(self, p => {
            let rows = sqlx::query("SELECT request_id, leg, account_id, model_used, provider, prompt_tokens, completion_tokens, credits, created_at FROM usage_legs WHERE request_id = $1 ORDER BY leg")
                .bind(request_id).fetch_all(p).await?;
            rows.iter()
                .map(|r| {
                    Ok(LegRow {
                        request_id: r.try_get("request_id")?,
                        leg: i64::from(r.try_get::<i32, _>("leg")?),
                        account_id: r.try_get("account_id")?,
                        model_used: r.try_get("model_used")?,
                        provider: r.try_get("provider")?,
                        prompt_tokens: r.try_get("prompt_tokens")?,
                        completion_tokens: r.try_get("completion_tokens")?,
                        credits: r.try_get("credits")?,
                        created_at: r.try_get("created_at")?,
                    })
                })
                .collect::<std::result::Result<_, sqlx::Error>>()
                .map_err(Into::into)
        })
    }
}
