//! Rate limits per plan (SPEC.md, Limits; DESIGN.md, Rules: Rate limits).
//!
//! One sliding log per window (hour, day) per account, or per client IP for guests, checked and
//! counted in one atomic step: in-process under a mutex, or in Redis by one Lua script (one
//! round trip), so the limit holds exactly across any number of instances. When Redis fails,
//! `fail_open` serves and counts in-process (per instance) and `fail_closed` answers 503; the
//! Redis connection manager reconnects by itself, so recovery needs no restart.

use std::collections::{HashMap, VecDeque};
use std::sync::Mutex;
use std::time::Duration;

use redis::aio::ConnectionManager;
use tollgate_filters::ratelimit::{check_and_count, Decision, Window, DAY_MS, HOUR_MS};
use tollgate_filters::{ErrorKind, GatewayError};

use crate::config::PlanConfig;

/// The same algorithm as `tollgate_filters::ratelimit::check_and_count`, on sorted sets scored
/// by Redis's own clock (instances' clocks may disagree; Redis has one). It can also reserve
/// admissions for an admission lease (see [`Limiter`]).
const SCRIPT: &str = r#"
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local member = now .. ':' .. ARGV[1]
-- ARGV[#ARGV]: admissions this instance asks to reserve beyond this request (a lease),
-- granted only while every window keeps at least LEASE_SHARE times that much room.
local want = tonumber(ARGV[#ARGV])
local share = tonumber(ARGV[#ARGV - 1])
local retry = 0
local rep_limit, rep_rem, rep_reset = -1, -1, 0
for i = 1, #KEYS do
  local win = tonumber(ARGV[2 * i])
  local limit = tonumber(ARGV[2 * i + 1])
  redis.call('ZREMRANGEBYSCORE', KEYS[i], '-inf', now - win)
  local count = redis.call('ZCARD', KEYS[i])
  local reset = win
  local first = redis.call('ZRANGE', KEYS[i], 0, 0, 'WITHSCORES')
  if #first > 0 then reset = tonumber(first[2]) + win - now end
  if limit - count < share * (want + 1) then want = 0 end
  if count >= limit then
    local nth = redis.call('ZRANGE', KEYS[i], count - limit, count - limit, 'WITHSCORES')
    local at = now
    if #nth > 0 then at = tonumber(nth[2]) end
    if at + win - now > retry then retry = at + win - now end
    if rep_rem ~= 0 then rep_limit, rep_rem, rep_reset = limit, 0, reset end
  else
    local rem = limit - count - 1
    if rep_rem < 0 or rem < rep_rem then rep_limit, rep_rem, rep_reset = limit, rem, reset end
  end
end
if retry ~= 0 then want = 0 end
if retry == 0 then
  local args = {now, member}
  -- Leased admissions are scored at the end of the lease's lifetime (ARGV[#ARGV - 2] ms), the
  -- latest moment one can be used: each leaves its window no earlier than the request it admits
  -- would, so leasing can only admit fewer, never more.
  local leased_at = now + tonumber(ARGV[#ARGV - 2])
  for j = 1, want do
    args[#args + 1] = leased_at
    args[#args + 1] = member .. ':' .. j
  end
  for i = 1, #KEYS do
    redis.call('ZADD', KEYS[i], unpack(args))
    redis.call('PEXPIRE', KEYS[i], tonumber(ARGV[2 * i]))
  end
  if rep_rem > 0 then rep_rem = math.max(rep_rem - want, 0) end
end
return {retry == 0 and 1 or 0, rep_limit, rep_rem, rep_reset, retry, want, member}
"#;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FailureMode {
    FailOpen,
    FailClosed,
}

impl FailureMode {
    pub fn parse(s: &str) -> Option<FailureMode> {
        match s {
            "fail_open" => Some(FailureMode::FailOpen),
            "fail_closed" => Some(FailureMode::FailClosed),
            _ => None,
        }
    }
}

/// Built-in plan limits, used when `[plans.<name>]` does not set them (SPEC.md's table; smb is
/// our choice: five times pro per hour, no daily cap).
fn default_limits(plan: &str) -> (Option<u64>, Option<u64>) {
    match plan {
        "guest" => (Some(30), Some(30)),
        "free" => (Some(120), Some(500)),
        "pro" => (Some(7_200), None),
        "smb" => (Some(36_000), None),
        // Business is custom per account; without numbers it is unlimited.
        "business" => (None, None),
        // An unknown plan name gets the free limits rather than none.
        _ => (Some(120), Some(500)),
    }
}

/// The windows of a plan, with per-account overrides winning over the plan's numbers.
pub fn windows(
    plans: &std::collections::BTreeMap<String, PlanConfig>,
    plan: &str,
    per_hour: Option<i64>,
    per_day: Option<i64>,
) -> Vec<Window> {
    let (mut hour, mut day) = default_limits(plan);
    if let Some(p) = plans.get(plan) {
        if p.requests_per_hour.is_some() || p.requests_per_day.is_some() {
            hour = p.requests_per_hour;
            day = p.requests_per_day;
        }
    }
    if let Some(h) = per_hour.filter(|h| *h > 0) {
        hour = Some(h as u64);
    }
    if let Some(d) = per_day.filter(|d| *d > 0) {
        day = Some(d as u64);
    }
    let mut out = Vec::with_capacity(2);
    if let Some(limit) = hour {
        out.push(Window {
            window_ms: HOUR_MS,
            limit,
        });
    }
    if let Some(limit) = day {
        out.push(Window {
            window_ms: DAY_MS,
            limit,
        });
    }
    out
}

/// A lease takes at most this share of a window's remaining room (the rest is admitted one
/// request at a time, exactly).
const LEASE_SHARE: u64 = 4;
/// Leased admissions are used within this time of being counted, or given back. They are scored
/// at the end of it, so they leave their window no earlier than the requests they admit.
const LEASE_LIFETIME: std::time::Duration = std::time::Duration::from_secs(1);

/// Admissions reserved in Redis for one ident on this instance.
struct AdmitLease {
    windows: Vec<Window>,
    /// Reserved, unused sorted-set members, one per admission.
    members: Vec<String>,
    limit: u64,
    remaining: u64,
    reset_ms: i64,
    granted: std::time::Instant,
}

/// Marks an ident as having a lease request in flight, until dropped (also when the Redis call
/// is cancelled by its timeout).
struct LeaseRequest {
    set: std::sync::Arc<Mutex<std::collections::HashSet<String>>>,
    ident: String,
}

impl LeaseRequest {
    fn begin(
        set: &std::sync::Arc<Mutex<std::collections::HashSet<String>>>,
        ident: &str,
    ) -> Option<LeaseRequest> {
        let mut s = set.lock().ok()?;
        s.insert(ident.to_owned()).then(|| LeaseRequest {
            set: set.clone(),
            ident: ident.to_owned(),
        })
    }
}

impl Drop for LeaseRequest {
    fn drop(&mut self) {
        if let Ok(mut s) = self.set.lock() {
            s.remove(&self.ident);
        }
    }
}

/// Counts requests against windows. With Redis, an ident far from its limits gets *admission
/// leases*: the check that admits a request also reserves `lease_size` more admissions (counted
/// in Redis at once, so every instance sees them) that this instance then hands out without a
/// round trip, for up to a second; unused ones are removed again. A lease is granted only while
/// every window keeps at least four times its size free, so near a limit every request is
/// checked in Redis and the limit holds exactly across instances; it is never exceeded. While
/// leased, `X-RateLimit-Remaining-Requests` counts down from Redis's figure at the lease.
pub struct Limiter {
    local: Mutex<HashMap<String, HashMap<i64, VecDeque<i64>>>>,
    leases: Mutex<HashMap<String, AdmitLease>>,
    /// Idents with a lease request in flight: concurrent misses are checked one by one instead
    /// of each reserving a lease of their own (a burst would otherwise reserve many).
    leasing: std::sync::Arc<Mutex<std::collections::HashSet<String>>>,
    pub lease_size: u64,
    /// Set by the counter service once Redis answers (and only when `redis_url` is set).
    pub redis: tokio::sync::OnceCell<ConnectionManager>,
    pub redis_configured: bool,
    pub mode: FailureMode,
    pub timeout: Duration,
    pub prefix: String,
    script: redis::Script,
}

impl Limiter {
    pub fn new(
        redis_configured: bool,
        mode: FailureMode,
        timeout: Duration,
        prefix: String,
        lease_size: u64,
    ) -> Limiter {
        Limiter {
            local: Mutex::new(HashMap::new()),
            leases: Mutex::new(HashMap::new()),
            leasing: Default::default(),
            lease_size,
            redis: tokio::sync::OnceCell::new(),
            redis_configured,
            mode,
            timeout,
            prefix,
            script: redis::Script::new(SCRIPT),
        }
    }

    /// Checks and counts one request for `ident` (e.g. `acct:usr_…` or `ip:1.2.3.4`).
    /// `Err` only in `fail_closed` mode with Redis unavailable.
    pub async fn check(
        &self,
        ident: &str,
        windows: &[Window],
        member: &str,
        plan: &str,
        metrics: &crate::metrics::Metrics,
    ) -> Result<Decision, GatewayError> {
        if windows.is_empty() {
            return Ok(Decision::unlimited());
        }
        if self.redis_configured {
            if let Some(d) = self.take_leased(ident, windows) {
                metrics.ratelimit_leased.with_label_values(&[plan]).inc();
                return Ok(d);
            }
            let failure = match self.redis.get() {
                Some(conn) => match tokio::time::timeout(
                    self.timeout,
                    self.check_redis(conn.clone(), ident, windows, member),
                )
                .await
                {
                    Ok(Ok(d)) => return Ok(d),
                    Ok(Err(e)) => e.to_string(),
                    Err(_) => format!("no answer within {:?}", self.timeout),
                },
                None => "not connected".to_string(),
            };
            let mode = match self.mode {
                FailureMode::FailOpen => "fail_open",
                FailureMode::FailClosed => "fail_closed",
            };
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
        Ok(self.check_local(ident, windows))
    }

    fn check_local(&self, ident: &str, windows: &[Window]) -> Decision {
        let now = crate::now_ms();
        let Ok(mut map) = self.local.lock() else {
            return Decision::unlimited();
        };
        if map.len() > 200_000 {
            // Drop idents whose every entry has aged out of the longest window.
            map.retain(|_, logs| {
                logs.values()
                    .any(|l| l.back().is_some_and(|&t| t > now - DAY_MS))
            });
        }
        // One log per window length, as in Redis: a changed limit applies to what was counted.
        let logs = map.entry(ident.to_owned()).or_default();
        let mut taken: Vec<VecDeque<i64>> = windows
            .iter()
            .map(|w| logs.remove(&w.window_ms).unwrap_or_default())
            .collect();
        let mut refs: Vec<&mut VecDeque<i64>> = taken.iter_mut().collect();
        let d = check_and_count(&mut refs, windows, now);
        for (w, log) in windows.iter().zip(taken) {
            logs.insert(w.window_ms, log);
        }
        d
    }

    /// One admission from this instance's lease for the ident, if it has a live one for these
    /// windows.
    fn take_leased(&self, ident: &str, windows: &[Window]) -> Option<Decision> {
        if self.lease_size == 0 {
            return None;
        }
        let mut map = self.leases.lock().ok()?;
        let l = map.get_mut(ident)?;
        if l.windows != windows || l.granted.elapsed() >= LEASE_LIFETIME {
            return None;
        }
        l.members.pop()?;
        l.remaining = l.remaining.saturating_sub(1);
        let elapsed = l.granted.elapsed().as_millis() as i64;
        Some(Decision {
            admitted: true,
            limit: l.limit,
            remaining: l.remaining,
            reset_ms: (l.reset_ms - elapsed).max(0),
            retry_ms: 0,
        })
    }

    /// Removes the unused admissions of expired (or superseded) leases from Redis. `only`:
    /// just this ident's lease, if it is no longer usable for `windows`.
    async fn return_leases(&self, conn: &mut ConnectionManager, only: Option<(&str, &[Window])>) {
        let stale: Vec<(String, AdmitLease)> = {
            let Ok(mut map) = self.leases.lock() else {
                return;
            };
            let dead =
                |l: &AdmitLease| l.granted.elapsed() >= LEASE_LIFETIME || l.members.is_empty();
            let keys: Vec<String> = match only {
                Some((ident, windows)) => map
                    .get(ident)
                    .filter(|l| dead(l) || l.windows != windows)
                    .map(|_| vec![ident.to_owned()])
                    .unwrap_or_default(),
                None => map
                    .iter()
                    .filter(|(_, l)| dead(l))
                    .map(|(k, _)| k.clone())
                    .collect(),
            };
            keys.into_iter()
                .filter_map(|k| map.remove(&k).map(|l| (k, l)))
                .collect()
        };
        for (ident, l) in stale {
            if l.members.is_empty() {
                continue;
            }
            let mut pipe = redis::pipe();
            for w in &l.windows {
                pipe.zrem(self.key(&ident, w), &l.members).ignore();
            }
            if let Err(e) = pipe.query_async::<()>(conn).await {
                // They stay counted until they age out of the window: this instance admits
                // fewer, never more.
                tracing::warn!(ident = %ident, "could not return leased admissions: {e}");
            }
        }
    }

    /// Background: returns expired leases' unused admissions (an instance that goes quiet must
    /// not keep them counted).
    pub async fn sweep(&self) {
        if let Some(conn) = self.redis.get() {
            let mut conn = conn.clone();
            self.return_leases(&mut conn, None).await;
        }
    }

    fn key(&self, ident: &str, w: &Window) -> String {
        // One log per window length: a changed limit (plan change, override) applies to the
        // requests already counted. The hash tag keeps an ident's keys in one slot on Redis
        // Cluster.
        format!("{}:rl:{{{ident}}}:{}", self.prefix, w.window_ms)
    }

    async fn check_redis(
        &self,
        mut conn: ConnectionManager,
        ident: &str,
        windows: &[Window],
        member: &str,
    ) -> redis::RedisResult<Decision> {
        if self.lease_size > 0 {
            self.return_leases(&mut conn, Some((ident, windows))).await;
        }
        let mut inv = self.script.prepare_invoke();
        for w in windows {
            inv.key(self.key(ident, w));
        }
        inv.arg(member);
        for w in windows {
            inv.arg(w.window_ms).arg(w.limit);
        }
        // No live lease could admit this request: ask for a new one along with it, unless
        // another request of this ident is already asking.
        let asking = (self.lease_size > 0)
            .then(|| LeaseRequest::begin(&self.leasing, ident))
            .flatten();
        let want = if asking.is_some() { self.lease_size } else { 0 };
        inv.arg(LEASE_LIFETIME.as_millis() as u64)
            .arg(LEASE_SHARE)
            .arg(want);
        type Reply = (i64, i64, i64, i64, i64, u64, String);
        let (admitted, limit, remaining, reset_ms, retry_ms, leased, base): Reply =
            inv.invoke_async(&mut conn).await?;
        if leased > 0 {
            let members = (1..=leased).map(|j| format!("{base}:{j}"));
            if let Ok(mut map) = self.leases.lock() {
                match map.get_mut(ident).filter(|l| l.windows == windows) {
                    // Two requests leased at once: keep both sets under the older lifetime
                    // (the newer ones are returned early, never kept late).
                    Some(l) => l.members.extend(members),
                    None => {
                        map.insert(
                            ident.to_owned(),
                            AdmitLease {
                                windows: windows.to_vec(),
                                members: members.collect(),
                                limit: limit.max(0) as u64,
                                remaining: remaining.max(0) as u64,
                                reset_ms,
                                granted: std::time::Instant::now(),
                            },
                        );
                    }
                }
            }
        }
        Ok(Decision {
            admitted: admitted == 1,
            limit: limit.max(0) as u64,
            remaining: remaining.max(0) as u64,
            reset_ms,
            retry_ms,
        })
    }
}

/// `X-RateLimit-Reset-Requests` in OpenAI's style: `1h2m3s`, `45s`, `0.5s`.
pub fn format_reset(ms: i64) -> String {
    let ms = ms.max(0);
    if ms < 1000 {
        return format!("{}s", (ms as f64 / 1000.0 * 10.0).ceil() / 10.0);
    }
    let s = (ms + 999) / 1000;
    match (s / 3600, (s % 3600) / 60, s % 60) {
        (0, 0, s) => format!("{s}s"),
        (0, m, s) => format!("{m}m{s}s"),
        (h, m, s) => format!("{h}h{m}m{s}s"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn plan_windows_and_overrides() {
        let plans = std::collections::BTreeMap::new();
        assert_eq!(
            windows(&plans, "free", None, None),
            vec![
                Window {
                    window_ms: HOUR_MS,
                    limit: 120
                },
                Window {
                    window_ms: DAY_MS,
                    limit: 500
                }
            ]
        );
        assert_eq!(
            windows(&plans, "pro", None, None),
            vec![Window {
                window_ms: HOUR_MS,
                limit: 7200
            }]
        );
        assert!(windows(&plans, "business", None, None).is_empty());
        assert_eq!(
            windows(&plans, "business", Some(50_000), None),
            vec![Window {
                window_ms: HOUR_MS,
                limit: 50_000
            }]
        );
        assert_eq!(windows(&plans, "free", Some(5), None)[0].limit, 5);
        let mut plans = std::collections::BTreeMap::new();
        plans.insert(
            "free".to_string(),
            PlanConfig {
                requests_per_hour: Some(3),
                requests_per_day: None,
                ..PlanConfig::default()
            },
        );
        assert_eq!(
            windows(&plans, "free", None, None),
            vec![Window {
                window_ms: HOUR_MS,
                limit: 3
            }]
        );
    }

    #[test]
    fn reset_format() {
        assert_eq!(format_reset(3_723_000), "1h2m3s");
        assert_eq!(format_reset(45_000), "45s");
        assert_eq!(format_reset(61_000), "1m1s");
        assert_eq!(format_reset(500), "0.5s");
    }
}
