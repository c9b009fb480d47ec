//! `GET /api/v1/usage`: usage per day and per model over 30 days, and recent requests with
//! the credits each was charged, and what caching saved against list price (`savings`).

use crate::request::Session;
use serde_json::json;
use tollgate_filters::credits::to_credits;
use tollgate_filters::GatewayError;

use crate::auth::caller::Caller;
use crate::ledger::{Savings, UsageAgg};
use crate::request::ctx::RequestCtx;
use crate::request::respond;
use crate::runtime::Shared;

pub async fn usage(
    shared: &Shared,
    session: &mut Session,
    ctx: &mut RequestCtx,
    caller: &Caller,
) -> Result<(), GatewayError> {
    let account_id = caller.account()?;
    // An organization key sees its member's usage of the organization, not the others'.
    let member = match caller {
        Caller::Key(k) => k.org_member.as_ref().map(|m| m.account.as_str()),
        _ => None,
    };
    let ledger = shared.ledger()?;
    drop(shared.leases.flush(ledger, account_id).await?);
    let since = crate::clock::now_ms() - 30 * 86_400_000;
    let agg = |rows: Vec<UsageAgg>, key: &str, by_day: bool| -> Vec<serde_json::Value> {
        rows.into_iter()
            .map(|r| {
                let k: serde_json::Value = if by_day {
                    let day = r.key.parse::<i64>().unwrap_or(0);
                    tollgate_filters::time::format_date(day * 86_400).into()
                } else {
                    r.key.into()
                };
                json!({key: k, "requests": r.requests, "prompt_tokens": r.prompt_tokens,
                       "completion_tokens": r.completion_tokens, "credits": to_credits(r.credits)})
            })
            .collect()
    };
    let by_day = agg(
        ledger.usage_by(account_id, member, since, true).await?,
        "day",
        true,
    );
    let by_model = agg(
        ledger.usage_by(account_id, member, since, false).await?,
        "model",
        false,
    );
    let recent: Vec<_> = ledger
        .recent_usage(account_id, member, 50)
        .await?
        .into_iter()
        .map(|u| {
            json!({"request_id": u.request_id, "model_requested": u.model_requested, "model_used": u.model_used,
                   "provider": u.provider, "prompt_tokens": u.prompt_tokens, "completion_tokens": u.completion_tokens,
                   "credits": to_credits(u.credits), "status": u.status, "latency_ms": u.latency_ms, "created_at": u.created_at / 1000,
                   "hold_note": u.hold_note, "cache_hit": u.cache_hit, "saved": to_credits(u.saved_credits)})
        })
        .collect();
    let savings = savings_json(ledger.savings(account_id, member, since).await?);
    respond::json(
        session,
        ctx,
        200,
        &json!({"by_day": by_day, "by_model": by_model, "recent": recent, "savings": savings}),
        &[],
    )
    .await;
    Ok(())
}

/// What caching saved over the period, in credits: by the provider's prompt cache (cache
/// reads, including those of the gateway's cache breakpoints) and by response cache hits.
pub fn savings_json(s: Savings) -> serde_json::Value {
    json!({"cache_reads": to_credits(s.cache_reads), "response_cache": to_credits(s.response_cache),
           "response_cache_hits": s.response_cache_hits,
           "total": to_credits(s.cache_reads.saturating_add(s.response_cache))})
}
