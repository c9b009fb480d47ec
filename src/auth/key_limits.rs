//! A keyed request against the limits of its key and of its account's plan beyond the hourly
//! and daily windows (issue 29): requests per minute (the key's, in the same sliding logs as
//! the plans), requests in flight ([`in_flight`](crate::limits::in_flight)) and tokens per minute
//! ([`tokens`](crate::limits::tokens)). Each refusal is 429 with `Retry-After`, naming the limit. A
//! store that does not answer follows `redis_failure_mode` like the plan limits.

use tollgate_filters::ratelimit::Window;
use tollgate_filters::{ErrorKind, GatewayError};

use crate::config::Plans;
use crate::ledger::KeyAuth;
use crate::limits::in_flight::Slot;
use crate::limits::store::Unavailable;
use crate::limits::tokens::Counted;
use crate::limits::Limiter;
use crate::metrics::Metrics;

/// Counts the request against its key's requests per minute and takes its slots in flight
/// (the key's and the plan's). The slot is given back when dropped: the request context
/// keeps it until the request ends.
pub async fn admit_request(
    limiter: &Limiter,
    plans: &Plans,
    metrics: &Metrics,
    key: &KeyAuth,
    request_id: &str,
) -> Result<Option<Slot>, GatewayError> {
    if let Some(rpm) = key.limits.requests_per_minute {
        let ident = format!("key:{}", key.key_id);
        let windows = [Window {
            window_ms: 60_000,
            limit: rpm as u64,
        }];
        let d = limiter
            .check(&ident, &windows, request_id, "key", metrics)
            .await?;
        count(metrics, "key_rpm", d.admitted);
        if !d.admitted {
            return Err(limited(
                d.retry_after_secs(),
                format!("this key's limit of {rpm} requests per minute is reached"),
            ));
        }
    }
    let plan_limit = plans.usage_limits(&key.plan).1;
    if key.limits.concurrent_requests.is_none() && plan_limit.is_none() {
        return Ok(None);
    }
    let key_ident = format!("key:{}", key.key_id);
    let acct_ident = format!("acct:{}", key.account_id);
    let mut limits: Vec<(&str, i64, &str)> = Vec::new();
    if let Some(n) = key.limits.concurrent_requests {
        limits.push((&key_ident, n, "this key's"));
    }
    if let Some(n) = plan_limit {
        limits.push((&acct_ident, n as i64, "the plan's"));
    }
    let pairs: Vec<(&str, i64)> = limits.iter().map(|(i, n, _)| (*i, *n)).collect();
    match limiter
        .in_flight
        .take(&limiter.counters(), &pairs, request_id)
        .await
    {
        Ok(Ok(slot)) => {
            count(metrics, "in_flight", true);
            Ok(Some(slot))
        }
        Ok(Err(i)) => {
            count(metrics, "in_flight", false);
            let (_, n, whose) = limits[i];
            Err(limited(
                1,
                format!("{whose} limit of {n} requests in flight is reached; retry when one ends"),
            ))
        }
        Err(e) => unavailable(limiter, metrics, e).map(|()| None),
    }
}

/// Counts `estimate` tokens (the prompt and the completions asked for) against the key's and
/// the plan's tokens per minute; corrected with the actual usage at settlement.
pub async fn admit_tokens(
    limiter: &Limiter,
    plans: &Plans,
    metrics: &Metrics,
    key: &KeyAuth,
    estimate: u64,
) -> Result<Option<Counted>, GatewayError> {
    let key_ident = format!("key:{}", key.key_id);
    let acct_ident = format!("acct:{}", key.account_id);
    let mut limits: Vec<(&str, i64, &str)> = Vec::new();
    if let Some(n) = key.limits.tokens_per_minute {
        limits.push((&key_ident, n, "this key's"));
    }
    if let Some(n) = plans.usage_limits(&key.plan).0 {
        limits.push((&acct_ident, n as i64, "the plan's"));
    }
    if limits.is_empty() {
        return Ok(None);
    }
    let pairs: Vec<(&str, i64)> = limits.iter().map(|(i, n, _)| (*i, *n)).collect();
    let estimate = i64::try_from(estimate).unwrap_or(i64::MAX);
    match limiter
        .tokens
        .admit(&limiter.counters(), &pairs, estimate)
        .await
    {
        Ok(Ok(c)) => {
            count(metrics, "tpm", true);
            Ok(Some(c))
        }
        Ok(Err(full)) => {
            count(metrics, "tpm", false);
            let (_, n, whose) = limits[full.index];
            Err(limited(
                full.retry_after_secs,
                format!(
                    "{whose} limit of {n} tokens per minute is reached (this request is estimated at {estimate}); retry after {} s",
                    full.retry_after_secs
                ),
            ))
        }
        Err(e) => unavailable(limiter, metrics, e).map(|()| None),
    }
}

fn count(metrics: &Metrics, what: &str, admitted: bool) {
    metrics
        .ratelimit
        .with_label_values(&[what, if admitted { "admitted" } else { "limited" }])
        .inc();
}

fn limited(retry_after: u64, message: String) -> GatewayError {
    GatewayError::new(ErrorKind::RateLimited { retry_after }, message)
}

/// The store did not answer: served uncounted in `fail_open`, 503 in `fail_closed`.
fn unavailable(limiter: &Limiter, metrics: &Metrics, e: Unavailable) -> Result<(), GatewayError> {
    let mode = if limiter.fails_open() {
        "fail_open"
    } else {
        "fail_closed"
    };
    metrics
        .ratelimit_store_errors
        .with_label_values(&[mode])
        .inc();
    tracing::warn!(mode, "key limits store unavailable: {}", e.0);
    if limiter.fails_open() {
        Ok(())
    } else {
        Err(GatewayError::new(
            ErrorKind::ServiceUnavailable,
            "rate limiting is unavailable; retry with backoff",
        ))
    }
}
