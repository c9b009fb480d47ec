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
/// by Redis's own clock (instances' clocks may disagree; Redis has one).
const SCRIPT: &str = r#"
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local member = now .. ':' .. ARGV[1]
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
if retry == 0 then
  for i = 1, #KEYS do
    redis.call('ZADD', KEYS[i], now, member)
    redis.call('PEXPIRE', KEYS[i], tonumber(ARGV[2 * i]))
  end
end
return {retry == 0 and 1 or 0, rep_limit, rep_rem, rep_reset, retry}
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

pub struct Limiter {
    local: Mutex<HashMap<String, HashMap<i64, VecDeque<i64>>>>,
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
    ) -> Limiter {
        Limiter {
            local: Mutex::new(HashMap::new()),
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
        metrics: &crate::metrics::Metrics,
    ) -> Result<Decision, GatewayError> {
        if windows.is_empty() {
            return Ok(Decision::unlimited());
        }
        if self.redis_configured {
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

    async fn check_redis(
        &self,
        mut conn: ConnectionManager,
        ident: &str,
        windows: &[Window],
        member: &str,
    ) -> redis::RedisResult<Decision> {
        let mut inv = self.script.prepare_invoke();
        for w in windows {
            // One log per window length: a changed limit (plan change, override) applies to
            // the requests already counted. The hash tag keeps an ident's keys in one slot on
            // Redis Cluster.
            inv.key(format!("{}:rl:{{{ident}}}:{}", self.prefix, w.window_ms));
        }
        inv.arg(member);
        for w in windows {
            inv.arg(w.window_ms).arg(w.limit);
        }
        let (admitted, limit, remaining, reset_ms, retry_ms): (i64, i64, i64, i64, i64) =
            inv.invoke_async(&mut conn).await?;
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
    let (h, m, s) = (s / 3600, (s % 3600) / 60, s % 60);
    let mut out = String::new();
    if h > 0 {
        out.push_str(&format!("{h}h"));
    }
    if h > 0 || m > 0 {
        out.push_str(&format!("{m}m"));
    }
    out.push_str(&format!("{s}s"));
    out
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
