//! Rate-limit windows: a plan's limits as windows, a sliding log per window checked and counted
//! atomically across every window of a plan (hourly and daily), and the reset time as the
//! `X-RateLimit-Reset-Requests` header writes it.
//!
//! A sliding log admits at most `limit` requests in *any* window-long interval, exactly, so
//! there is no burst of twice the limit at a fixed window's edge (the fixed-window flaw) and no
//! estimate (the sliding-window-counter's). `retry_after` is exact too: the time until the
//! oldest counted request leaves the window. The Redis backend runs the same algorithm in one
//! Lua script; this is the in-process one and the reference for both.

use std::collections::VecDeque;

/// One window of a plan: at most `limit` requests per `window_ms`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Window {
    pub window_ms: i64,
    pub limit: u64,
}

pub const HOUR_MS: i64 = 3_600_000;
pub const DAY_MS: i64 = 86_400_000;

/// The request limits of a billing plan, per hour and per day; `None` is no limit for that
/// window. Which numbers a plan name has is the config's business; this is what they mean.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct PlanLimits {
    pub per_hour: Option<u64>,
    pub per_day: Option<u64>,
}

impl PlanLimits {
    /// These limits with an account's overrides applied: a positive override wins over the
    /// plan's number; zero, a negative number or `None` leaves it.
    pub fn with_overrides(self, per_hour: Option<i64>, per_day: Option<i64>) -> PlanLimits {
        let positive = |o: Option<i64>| o.filter(|n| *n > 0).map(|n| n as u64);
        PlanLimits {
            per_hour: positive(per_hour).or(self.per_hour),
            per_day: positive(per_day).or(self.per_day),
        }
    }

    /// The windows to check: the hour's, then the day's, each only when it is set.
    pub fn windows(&self) -> Vec<Window> {
        let mut out = Vec::with_capacity(2);
        if let Some(limit) = self.per_hour {
            out.push(Window {
                window_ms: HOUR_MS,
                limit,
            });
        }
        if let Some(limit) = self.per_day {
            out.push(Window {
                window_ms: DAY_MS,
                limit,
            });
        }
        out
    }
}

/// The outcome of one check, with what the `X-RateLimit-*` headers report: the window with the
/// fewest requests left.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Decision {
    pub admitted: bool,
    pub limit: u64,
    pub remaining: u64,
    /// Milliseconds until the reported window frees a slot.
    pub reset_ms: i64,
    /// Milliseconds until a request would be admitted (0 when admitted).
    pub retry_ms: i64,
}

impl Decision {
    pub fn unlimited() -> Decision {
        Decision {
            admitted: true,
            limit: 0,
            remaining: 0,
            reset_ms: 0,
            retry_ms: 0,
        }
    }

    /// Whole seconds until admission, at least 1.
    pub fn retry_after_secs(&self) -> u64 {
        ((self.retry_ms.max(1) + 999) / 1000) as u64
    }
}

/// The requests one window counts: their timestamps (ms), oldest first, each millisecond held
/// once with how many requests it counted, in one word: a request alone in its millisecond costs
/// the 8 bytes a plain log of timestamps did, and a busy ident costs 8 bytes per millisecond it
/// was busy, not per request (a plain log held an hour of a key at 30 K requests/s in 860 MB,
/// and grew the gateway's memory with every request admitted: issue 31).
#[derive(Debug, Clone, Default)]
pub struct SlidingLog {
    /// `count << TIME_BITS | ms`.
    runs: VecDeque<u64>,
    count: u64,
}

/// Milliseconds since 1970 fit 44 bits until the year 2527; the other 20 count the requests of
/// one millisecond (a millisecond with more takes a second word).
const TIME_BITS: u32 = 44;
const TIME_MASK: u64 = (1 << TIME_BITS) - 1;
const RUN_MAX: u64 = (1 << (64 - TIME_BITS)) - 1;

fn at(run: u64) -> i64 {
    (run & TIME_MASK) as i64
}

fn n(run: u64) -> u64 {
    run >> TIME_BITS
}

impl SlidingLog {
    /// Requests counted.
    pub fn len(&self) -> u64 {
        self.count
    }

    pub fn is_empty(&self) -> bool {
        self.count == 0
    }

    /// Counts a request at `t` (ms since 1970; a time outside 44 bits is held at the nearest end).
    pub fn push(&mut self, t: i64) {
        let t = t.clamp(0, TIME_MASK as i64);
        match self.runs.back_mut() {
            Some(last) if at(*last) == t && n(*last) < RUN_MAX => *last += 1 << TIME_BITS,
            _ => self.runs.push_back(1 << TIME_BITS | t as u64),
        }
        self.count += 1;
    }

    /// Drops every request counted at or before `t` (they left the window).
    pub fn expire(&mut self, t: i64) {
        while let Some(&run) = self.runs.front() {
            if at(run) > t {
                break;
            }
            self.count -= n(run);
            self.runs.pop_front();
        }
    }

    /// The `i`-th oldest request's time (from 0).
    pub fn nth(&self, i: u64) -> Option<i64> {
        let mut seen = 0u64;
        for &run in &self.runs {
            seen += n(run);
            if i < seen {
                return Some(at(run));
            }
        }
        None
    }

    /// Requests counted after `t`.
    pub fn count_after(&self, t: i64) -> u64 {
        self.runs
            .iter()
            .rev()
            .take_while(|&&run| at(run) > t)
            .map(|&run| n(run))
            .sum()
    }

    /// Words held (a millisecond each): what the log costs in memory.
    pub fn runs(&self) -> usize {
        self.runs.len()
    }
}

/// Checks every window and counts the request in all of them only if all admit it.
/// `logs[i]` holds the requests counted in `windows[i]`.
pub fn check_and_count(logs: &mut [&mut SlidingLog], windows: &[Window], now: i64) -> Decision {
    let mut report: Option<(u64, u64, i64)> = None; // (limit, remaining after, reset)
    let mut retry = 0i64;
    for (log, w) in logs.iter_mut().zip(windows) {
        log.expire(now - w.window_ms);
        let count = log.len();
        let reset = log.nth(0).map_or(w.window_ms, |t| t + w.window_ms - now);
        if count >= w.limit {
            // The request is admitted once enough old entries leave: the (count - limit + 1)-th oldest.
            let t = log.nth(count - w.limit).unwrap_or(now);
            retry = retry.max(t + w.window_ms - now);
            let r = (w.limit, 0, reset);
            if report.is_none_or(|(_, rem, _)| rem > 0) {
                report = Some(r);
            }
        } else {
            let rem = w.limit - count - 1;
            if report.is_none_or(|(_, best, _)| rem < best) {
                report = Some((w.limit, rem, reset));
            }
        }
    }
    let admitted = retry == 0;
    if admitted {
        for log in logs.iter_mut() {
            log.push(now);
        }
    }
    match report {
        Some((limit, remaining, reset_ms)) => Decision {
            admitted,
            limit,
            remaining,
            reset_ms,
            retry_ms: retry,
        },
        None => Decision::unlimited(),
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

    fn w(window_ms: i64, limit: u64) -> Window {
        Window { window_ms, limit }
    }

    #[test]
    fn admits_exactly_the_limit_and_counts_only_admitted() {
        let (mut h, mut d) = (SlidingLog::default(), SlidingLog::default());
        let ws = [w(1000, 3), w(10_000, 5)];
        for i in 0..3 {
            let dec = check_and_count(&mut [&mut h, &mut d], &ws, i);
            assert!(dec.admitted);
            assert_eq!(dec.remaining, 2 - i as u64);
        }
        let dec = check_and_count(&mut [&mut h, &mut d], &ws, 10);
        assert!(!dec.admitted);
        assert_eq!(dec.remaining, 0);
        assert_eq!(
            dec.retry_ms,
            1000 - 10,
            "until the first request leaves the 1 s window"
        );
        assert_eq!(h.len(), 3, "a rejected request is not counted");
        assert_eq!(d.len(), 3);
    }

    #[test]
    fn window_edge_is_exact_not_a_double_burst() {
        let mut h = SlidingLog::default();
        let ws = [w(1000, 2)];
        assert!(check_and_count(&mut [&mut h], &ws, 900).admitted);
        assert!(check_and_count(&mut [&mut h], &ws, 950).admitted);
        // A fixed window would reset at 1000 and admit two more; the sliding log does not.
        let dec = check_and_count(&mut [&mut h], &ws, 1001);
        assert!(!dec.admitted);
        assert_eq!(dec.retry_ms, 900 + 1000 - 1001);
        assert_eq!(dec.retry_after_secs(), 1);
        assert!(check_and_count(&mut [&mut h], &ws, 1900).admitted);
    }

    #[test]
    fn the_tighter_window_is_reported_and_blocks() {
        let (mut h, mut d) = (SlidingLog::default(), SlidingLog::default());
        let ws = [w(HOUR_MS, 30), w(DAY_MS, 2)];
        check_and_count(&mut [&mut h, &mut d], &ws, 0);
        let dec = check_and_count(&mut [&mut h, &mut d], &ws, 1);
        assert!(dec.admitted);
        assert_eq!((dec.limit, dec.remaining), (2, 0));
        let dec = check_and_count(&mut [&mut h, &mut d], &ws, 2);
        assert!(!dec.admitted);
        assert_eq!(dec.retry_ms, DAY_MS - 2);
        assert_eq!(h.len(), 2);
    }

    #[test]
    fn a_busy_millisecond_is_one_entry_and_counts_every_request() {
        let mut h = SlidingLog::default();
        let ws = [w(1000, 100)];
        for i in 0..90 {
            assert!(check_and_count(&mut [&mut h], &ws, 10 + i / 30).admitted);
        }
        assert_eq!((h.len(), h.runs()), (90, 3));
        assert_eq!(
            (h.nth(0), h.nth(29), h.nth(30), h.nth(89), h.nth(90)),
            (Some(10), Some(10), Some(11), Some(12), None)
        );
        assert_eq!(h.count_after(10), 60);
        for _ in 0..10 {
            assert!(check_and_count(&mut [&mut h], &ws, 500).admitted);
        }
        // Full: the first request leaves the window at 10 + 1000, and frees 30 places then.
        let dec = check_and_count(&mut [&mut h], &ws, 600);
        assert!(!dec.admitted);
        assert_eq!(dec.retry_ms, 1010 - 600);
        assert!(check_and_count(&mut [&mut h], &ws, 1010).admitted);
        assert_eq!((h.len(), h.runs()), (71, 4));
        // The whole millisecond leaves at once.
        h.expire(1011);
        assert_eq!((h.len(), h.runs()), (0, 0));
        assert!(h.is_empty());
        // Real times fit; a full millisecond goes on in a second word.
        let t = 1_764_000_000_000;
        let mut busy = SlidingLog::default();
        for _ in 0..=RUN_MAX {
            busy.push(t);
        }
        assert_eq!(
            (busy.len(), busy.runs(), busy.nth(RUN_MAX)),
            (RUN_MAX + 1, 2, Some(t))
        );
        assert_eq!(busy.count_after(t - 1), RUN_MAX + 1);
    }

    #[test]
    fn a_time_outside_44_bits_is_held_at_the_nearest_end_not_mixed_into_the_count() {
        let mut h = SlidingLog::default();
        h.push(-5);
        h.push(i64::MAX);
        h.push(i64::MAX);
        assert_eq!((h.len(), h.runs()), (3, 2));
        assert_eq!(h.nth(0), Some(0));
        assert_eq!(h.nth(1), Some(TIME_MASK as i64));
        assert_eq!(h.count_after(0), 2);
        h.expire(0);
        assert_eq!(h.len(), 2);
    }

    #[test]
    fn plan_windows_and_overrides() {
        let free = PlanLimits {
            per_hour: Some(120),
            per_day: Some(500),
        };
        assert_eq!(free.windows(), vec![w(HOUR_MS, 120), w(DAY_MS, 500)]);
        let pro = PlanLimits {
            per_hour: Some(7_200),
            per_day: None,
        };
        assert_eq!(pro.windows(), vec![w(HOUR_MS, 7_200)]);
        let day_only = PlanLimits {
            per_hour: None,
            per_day: Some(9),
        };
        assert_eq!(day_only.windows(), vec![w(DAY_MS, 9)]);
        let business = PlanLimits::default();
        assert!(business.windows().is_empty());
        assert_eq!(
            business.with_overrides(Some(50_000), None).windows(),
            vec![w(HOUR_MS, 50_000)]
        );
        assert_eq!(free.with_overrides(Some(5), None).windows()[0].limit, 5);
        assert_eq!(
            free.with_overrides(None, Some(7)),
            PlanLimits {
                per_hour: Some(120),
                per_day: Some(7)
            }
        );
        // Zero and negative overrides leave the plan's numbers.
        assert_eq!(free.with_overrides(Some(0), Some(-1)), free);
        assert_eq!(business.with_overrides(Some(-5), Some(0)), business);
    }

    #[test]
    fn reset_format() {
        assert_eq!(format_reset(3_723_000), "1h2m3s");
        assert_eq!(format_reset(45_000), "45s");
        assert_eq!(format_reset(61_000), "1m1s");
        assert_eq!(format_reset(500), "0.5s");
    }
}
