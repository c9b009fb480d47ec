//! Rate limits per plan (SPEC.md, Limits; DESIGN.md, Rules: Rate limits): [`admit`] decides
//! whether one request may pass, and with which `X-RateLimit-*` headers.
//!
//! One sliding log per window (hour, day) per account, or per client IP for guests, checked and
//! counted in one atomic step: in-process under a mutex ([`in_process`]), or in Redis by one Lua
//! script ([`in_redis`]), so the limit holds exactly across any number of instances. When Redis
//! fails, `fail_open` serves and counts in-process (per instance, on top of what Redis admitted
//! for this instance: [`shadow`]) and `fail_closed` answers 503, until the background
//! [`recovery`] has written what this instance admitted meanwhile into Redis's windows; the
//! Redis connection manager reconnects by itself, so recovery needs no restart.

pub mod budgets;
pub mod in_flight;
pub mod in_process;
pub mod in_redis;
pub mod recovery;
pub mod shadow;
pub mod store;
pub mod tokens;

use std::net::IpAddr;
use std::time::Duration;

use tokio::time::{timeout_at, Instant};

use tollgate_filters::net::guest_key;
use tollgate_filters::ratelimit::{format_reset, Decision, PlanLimits, Window};
use tollgate_filters::{ErrorKind, GatewayError};

use crate::config::{plans, FailureMode, Plans};
use crate::metrics::Metrics;
use shadow::Health;

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
            ["acct:", id].concat(),
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

/// Counts requests against windows: in Redis when configured (with reserved admissions), else
/// in-process.
pub struct Limiter {
    local: in_process::LocalCounter,
    /// `None`: no `redis_url`, counters in-process only.
    pub redis: Option<in_redis::RedisCounter>,
    mode: FailureMode,
    timeout: Duration,
    /// Key budgets, tokens per minute and requests in flight (issue 29): counters of their
    /// own, in the same Redis.
    pub budgets: budgets::Budgets,
    pub tokens: tokens::Tokens,
    pub in_flight: in_flight::InFlight,
}

impl Limiter {
    /// `redis`: the key prefix and reservation size when a Redis is configured.
    pub fn new(
        redis: Option<(String, u64)>,
        mode: FailureMode,
        timeout: Duration,
        in_flight_ttl: Duration,
    ) -> Limiter {
        Limiter {
            local: in_process::LocalCounter::default(),
            redis: redis.map(|(prefix, size)| in_redis::RedisCounter::new(prefix, size)),
            mode,
            timeout,
            budgets: budgets::Budgets::default(),
            tokens: tokens::Tokens::default(),
            in_flight: in_flight::InFlight::new(in_flight_ttl),
        }
    }

    /// The store of the key budgets, tokens per minute and requests in flight.
    pub fn counters(&self) -> store::Counters<'_> {
        store::Counters {
            redis: self.redis.as_ref(),
            timeout: self.timeout,
        }
    }

    /// Whether a limit whose store does not answer lets the request through.
    pub fn fails_open(&self) -> bool {
        self.mode == FailureMode::FailOpen
    }

    /// Checks and counts one request for `ident` (e.g. `acct:usr_…` or `ip:1.2.3.4`), from
    /// this instance's reservation when it has one. `Err` only in `fail_closed` mode with
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

    /// As [`Limiter::check`], always in the shared store and never from or into a
    /// reservation: for counters whose every unit matters (a password guess).
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
        reserve: bool,
    ) -> Result<Decision, GatewayError> {
        if windows.is_empty() {
            return Ok(Decision::unlimited());
        }
        let Some(redis) = &self.redis else {
            return Ok(self.local.check(ident, windows, crate::clock::now_ms()));
        };
        if reserve {
            if let Some(d) = redis.take_reserved(ident, windows) {
                metrics.ratelimit_leased.with_label_values(&[plan]).inc();
                return Ok(d);
            }
        }
        let closed = self.mode == FailureMode::FailClosed;
        let deadline = Instant::now() + self.timeout;
        // Healthy: one atomic load on top of the Redis call.
        let failure = loop {
            match redis.shadow.health() {
                Health::Healthy => {
                    let Some(conn) = redis.conn() else {
                        break "not connected".to_string();
                    };
                    let check = redis.check(conn, ident, windows, member, reserve);
                    match timeout_at(deadline, check).await {
                        Ok(Ok(d)) => return Ok(d),
                        Ok(Err(e)) => break e.to_string(),
                        Err(_) => break format!("no answer within {:?}", self.timeout),
                    }
                }
                // Redis failed earlier and the recovery has not caught up: the failure mode,
                // without another call to Redis (the background recovery makes those).
                Health::Degraded => {
                    let mode = self.mode.as_str();
                    let errors = metrics.ratelimit_store_errors.with_label_values(&[mode]);
                    if closed {
                        errors.inc();
                        return Err(unavailable());
                    }
                    let now = crate::clock::now_ms();
                    if let Some(d) = redis.shadow.admit_local(ident, windows, member, now, false) {
                        errors.inc();
                        return Ok(d);
                    }
                }
                // The last in-process admissions are being written: wait for them (one round
                // trip), then decide in Redis.
                Health::Handoff => {
                    let notified = redis.shadow.handed_off.notified();
                    tokio::pin!(notified);
                    notified.as_mut().enable();
                    if redis.shadow.health() == Health::Handoff
                        && timeout_at(deadline, notified).await.is_err()
                    {
                        break format!("not back within {:?}", self.timeout);
                    }
                }
            }
        };
        // Also a check that failed while the connection is being made again ("Reconnecting
        // failed"): the failure mode decides it, and fail_open counts it for the recovery.
        redis.shadow.failed();
        let mode = self.mode.as_str();
        metrics
            .ratelimit_store_errors
            .with_label_values(&[mode])
            .inc();
        tracing::warn!(mode, "rate-limit store unavailable: {failure}");
        if closed {
            return Err(unavailable());
        }
        let now = crate::clock::now_ms();
        Ok(redis
            .shadow
            .admit_local(ident, windows, member, now, true)
            .unwrap_or_else(Decision::unlimited))
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
        if let Some(redis) = &self.redis {
            redis.shadow.forget(ident);
        }
        self.local.forget(ident);
    }

    /// How many requests each window has counted for `ident`, without counting one (the
    /// dashboard's "requests left"). From Redis when configured and answering, else in-process.
    pub async fn used(&self, ident: &str, windows: &[Window]) -> Vec<u64> {
        let now = crate::clock::now_ms();
        if let Some(redis) = &self.redis {
            if let Some(conn) = redis
                .conn()
                .filter(|_| redis.shadow.health() == Health::Healthy)
            {
                let q = redis.used(conn, ident, windows, now);
                if let Ok(Ok(v)) = tokio::time::timeout(self.timeout, q).await {
                    return v;
                }
            }
            return redis.shadow.used(ident, windows, now);
        }
        self.local.used(ident, windows, now)
    }

    /// Background: drops in-process entries (and this instance's record of its Redis
    /// admissions) that left their windows; returns the idents left.
    pub fn sweep_local(&self) -> usize {
        let now = crate::clock::now_ms();
        let shadowed = self.redis.as_ref().map_or(0, |r| r.shadow.sweep(now));
        self.local.sweep(now) + shadowed
    }
}

fn unavailable() -> GatewayError {
    GatewayError::new(
        ErrorKind::ServiceUnavailable,
        "rate limiting is unavailable; retry with backoff",
    )
}
