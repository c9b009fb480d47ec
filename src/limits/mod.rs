//! Rate limits per plan (SPEC.md, Limits; DESIGN.md, Rules: Rate limits): [`admit`] decides
//! whether one request may pass, and with which `X-RateLimit-*` headers.
//!
//! One sliding log per window (hour, day) per account, or per client IP for guests, checked and
//! counted in one atomic step: in-process under a mutex ([`in_process`]), or in Redis by one Lua
//! script ([`in_redis`]), so the limit holds exactly across any number of instances. When Redis
//! fails, `fail_open` serves and counts in-process (per instance) and `fail_closed` answers 503;
//! the Redis connection manager reconnects by itself, so recovery needs no restart.

pub mod in_process;
pub mod in_redis;

use std::net::IpAddr;
use std::time::Duration;

use tollgate_filters::net::guest_key;
use tollgate_filters::ratelimit::{format_reset, Decision, PlanLimits, Window};
use tollgate_filters::{ErrorKind, GatewayError};

use crate::config::{plans, FailureMode, Plans};
use crate::metrics::Metrics;

/// Whose requests are counted.
pub enum Who<'a> {
    Account {
        id: &'a str,
        plan: &'a str,
        /// Per-account overrides of the plan's limits (set by an admin).
        per_hour: Option<i64>,
        per_day: Option<i64>,
    },
    /// No key: the guest plan, per client IPv4 address or IPv6 /64.
    Guest(Option<IpAddr>),
}

/// What [`admit`] decided: the headers every answer to this request carries, and the error
/// when it may not pass.
pub struct Verdict {
    pub headers: Vec<(&'static str, String)>,
    pub refused: Option<GatewayError>,
}

/// Checks and counts one request against its plan's windows. A refused request is not
/// counted.
pub async fn admit(
    limiter: &Limiter,
    plans: &Plans,
    metrics: &Metrics,
    who: &Who<'_>,
    request_id: &str,
) -> Verdict {
    let (ident, plan, windows) = match who {
        Who::Account {
            id,
            plan,
            per_hour,
            per_day,
        } => (
            format!("acct:{id}"),
            *plan,
            plans
                .limits(plan)
                .with_overrides(*per_hour, *per_day)
                .windows(),
        ),
        Who::Guest(ip) => (
            format!("ip:{}", ip.map(guest_key).unwrap_or_default()),
            plans::GUEST,
            plans.limits(plans::GUEST).windows(),
        ),
    };
    let d = match limiter
        .check(&ident, &windows, request_id, plan, metrics)
        .await
    {
        Ok(d) => d,
        Err(e) => {
            return Verdict {
                headers: Vec::new(),
                refused: Some(e),
            }
        }
    };
    let mut headers = Vec::new();
    if d.limit > 0 {
        headers.push(("X-RateLimit-Limit-Requests", d.limit.to_string()));
        headers.push(("X-RateLimit-Remaining-Requests", d.remaining.to_string()));
        headers.push(("X-RateLimit-Reset-Requests", format_reset(d.reset_ms)));
    }
    metrics
        .ratelimit
        .with_label_values(&[plan, if d.admitted { "admitted" } else { "limited" }])
        .inc();
    let refused = (!d.admitted).then(|| {
        GatewayError::new(
            ErrorKind::RateLimited {
                retry_after: d.retry_after_secs(),
            },
            format!(
                "rate limit of the {plan} plan reached ({} requests per window); retry after {} s",
                d.limit,
                d.retry_after_secs()
            ),
        )
    });
    Verdict { headers, refused }
}

/// Counts one `what` attempt (`signup`, `login`) from a client address against `limits`
/// ([abuse] in the config), in the same shared counters as the plans; 429 past them. Every
/// attempt counts, whatever its outcome.
pub async fn admit_address(
    limiter: &Limiter,
    metrics: &Metrics,
    what: &'static str,
    ip: Option<IpAddr>,
    limits: PlanLimits,
    request_id: &str,
) -> Result<(), GatewayError> {
    let ident = format!("{what}:{}", ip.map(guest_key).unwrap_or_default());
    let d = limiter
        .check(&ident, &limits.windows(), request_id, what, metrics)
        .await?;
    metrics
        .ratelimit
        .with_label_values(&[what, if d.admitted { "admitted" } else { "limited" }])
        .inc();
    if d.admitted {
        return Ok(());
    }
    Err(GatewayError::new(
        ErrorKind::RateLimited {
            retry_after: d.retry_after_secs(),
        },
        format!(
            "too many {what} attempts from this address; retry after {} s",
            d.retry_after_secs()
        ),
    ))
}

/// Counts requests against windows: in Redis when configured (with admission leases), else
/// in-process.
pub struct Limiter {
    local: in_process::LocalCounter,
    /// `None`: no `redis_url`, counters in-process only.
    pub redis: Option<in_redis::RedisCounter>,
    mode: FailureMode,
    timeout: Duration,
}

impl Limiter {
    /// `redis`: the key prefix and admission-lease size when a Redis is configured.
    pub fn new(redis: Option<(String, u64)>, mode: FailureMode, timeout: Duration) -> Limiter {
        Limiter {
            local: in_process::LocalCounter::default(),
            redis: redis.map(|(prefix, lease)| in_redis::RedisCounter::new(prefix, lease)),
            mode,
            timeout,
        }
    }

    /// Checks and counts one request for `ident` (e.g. `acct:usr_…` or `ip:1.2.3.4`), from
    /// this instance's admission lease when it has one. `Err` only in `fail_closed` mode with
    /// Redis unavailable.
    pub async fn check(
        &self,
        ident: &str,
        windows: &[Window],
        member: &str,
        plan: &str,
        metrics: &Metrics,
    ) -> Result<Decision, GatewayError> {
        self.check_with(ident, windows, member, plan, metrics, true)
            .await
    }

    /// As [`Limiter::check`], always in the shared store and never from or into an admission
    /// lease: for counters whose every unit matters (a password guess).
    pub async fn check_exact(
        &self,
        ident: &str,
        windows: &[Window],
        member: &str,
        what: &str,
        metrics: &Metrics,
    ) -> Result<Decision, GatewayError> {
        self.check_with(ident, windows, member, what, metrics, false)
            .await
    }

    async fn check_with(
        &self,
        ident: &str,
        windows: &[Window],
        member: &str,
        plan: &str,
        metrics: &Metrics,
        lease: bool,
    ) -> Result<Decision, GatewayError> {
        if windows.is_empty() {
            return Ok(Decision::unlimited());
        }
        if let Some(redis) = &self.redis {
            if lease {
                if let Some(d) = redis.take_leased(ident, windows) {
                    metrics.ratelimit_leased.with_label_values(&[plan]).inc();
                    return Ok(d);
                }
            }
            let failure = match redis.conn() {
                Some(conn) => {
                    let check = redis.check(conn, ident, windows, member, lease);
                    match tokio::time::timeout(self.timeout, check).await {
                        Ok(Ok(d)) => return Ok(d),
                        Ok(Err(e)) => e.to_string(),
                        Err(_) => format!("no answer within {:?}", self.timeout),
                    }
                }
                None => "not connected".to_string(),
            };
            let mode = self.mode.as_str();
            metrics
                .ratelimit_store_errors
                .with_label_values(&[mode])
                .inc();
            tracing::warn!(mode, "rate-limit store unavailable: {failure}");
            if self.mode == FailureMode::FailClosed {
                return Err(GatewayError::new(
                    ErrorKind::ServiceUnavailable,
                    "rate limiting is unavailable; retry with backoff",
                ));
            }
        }
        Ok(self.local.check(ident, windows, crate::clock::now_ms()))
    }

    /// Forgets everything counted for `ident` in these windows (a login that succeeded clears
    /// the e-mail's failures), in Redis when configured and in-process. Best effort: a store
    /// that fails leaves the count to expire with its window.
    pub async fn forget(&self, ident: &str, windows: &[Window]) {
        if let Some(redis) = &self.redis {
            if let Some(conn) = redis.conn() {
                let forget = redis.forget(conn, ident, windows);
                match tokio::time::timeout(self.timeout, forget).await {
                    Ok(Ok(())) => {}
                    Ok(Err(e)) => tracing::warn!("rate-limit store: could not forget {ident}: {e}"),
                    Err(_) => tracing::warn!("rate-limit store: could not forget {ident} in time"),
                }
            }
        }
        self.local.forget(ident);
    }

    /// How many requests each window has counted for `ident`, without counting one (the
    /// dashboard's "requests left"). From Redis when configured and answering, else in-process.
    pub async fn used(&self, ident: &str, windows: &[Window]) -> Vec<u64> {
        let now = crate::clock::now_ms();
        if let Some(redis) = &self.redis {
            if let Some(conn) = redis.conn() {
                let q = redis.used(conn, ident, windows, now);
                if let Ok(Ok(v)) = tokio::time::timeout(self.timeout, q).await {
                    return v;
                }
            }
        }
        self.local.used(ident, windows, now)
    }

    /// Background: drops in-process entries that left their windows; returns the idents left.
    pub fn sweep_local(&self) -> usize {
        self.local.sweep(crate::clock::now_ms())
    }
}
