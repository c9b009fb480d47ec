//! In-process counters: the same sliding logs as in Redis, under a mutex. The only store with
//! no Redis, and the fallback of `fail_open` while Redis is down (then per instance). Entries
//! that left their window are dropped by [`LocalCounter::sweep`], run in the background, so the
//! request path never walks the whole map and memory holds only what a window still counts.

use std::collections::HashMap;
use std::sync::Mutex;

use tollgate_filters::ratelimit::{check_and_count, Decision, SlidingLog, Window};

/// One log per window length, as in Redis: a changed limit applies to what was counted. Kept
/// in the order of the windows last checked (a plan has two), so a request finds its logs
/// without a lookup or an allocation.
type Logs = Vec<(i64, SlidingLog)>;

#[derive(Default)]
pub struct LocalCounter {
    logs: Mutex<HashMap<String, Logs>>,
}

impl LocalCounter {
    pub fn check(&self, ident: &str, windows: &[Window], now: i64) -> Decision {
        let Ok(mut map) = self.logs.lock() else {
            return Decision::unlimited();
        };
        // The ident is copied only the first time it is counted.
        if !map.contains_key(ident) {
            map.insert(ident.to_owned(), Logs::new());
        }
        let Some(logs) = map.get_mut(ident) else {
            return Decision::unlimited();
        };
        let laid_out = logs.len() >= windows.len()
            && logs
                .iter()
                .zip(windows)
                .all(|((ms, _), w)| *ms == w.window_ms);
        if !laid_out {
            arrange(logs, windows);
        }
        let mut refs: Vec<&mut SlidingLog> = logs
            .iter_mut()
            .take(windows.len())
            .map(|(_, log)| log)
            .collect();
        check_and_count(&mut refs, windows, now)
    }

    /// Requests counted in each window at `now`, without counting one.
    pub fn used(&self, ident: &str, windows: &[Window], now: i64) -> Vec<u64> {
        let Ok(map) = self.logs.lock() else {
            return vec![0; windows.len()];
        };
        windows
            .iter()
            .map(|w| {
                map.get(ident)
                    .and_then(|logs| logs.iter().find(|(ms, _)| *ms == w.window_ms))
                    .map_or(0, |(_, log)| log.count_after(now - w.window_ms))
            })
            .collect()
    }

    pub fn forget(&self, ident: &str) {
        if let Ok(mut map) = self.logs.lock() {
            map.remove(ident);
        }
    }

    /// Drops every entry that has left its window, then every log and ident left empty.
    /// Returns how many idents remain.
    pub fn sweep(&self, now: i64) -> usize {
        let Ok(mut map) = self.logs.lock() else {
            return 0;
        };
        map.retain(|_, logs| {
            logs.retain_mut(|(window_ms, log)| {
                log.expire(now - *window_ms);
                !log.is_empty()
            });
            !logs.is_empty()
        });
        map.len()
    }
}

/// Puts the logs of `windows` first, in their order (a log not there yet starts empty); the
/// logs of other window lengths are kept after them until they empty.
fn arrange(logs: &mut Logs, windows: &[Window]) {
    let mut rest = std::mem::take(logs);
    for w in windows {
        let log = match rest.iter().position(|(ms, _)| *ms == w.window_ms) {
            Some(i) => rest.swap_remove(i).1,
            None => SlidingLog::default(),
        };
        logs.push((w.window_ms, log));
    }
    logs.extend(rest);
}

#[cfg(test)]
mod tests {
    use super::*;
    use tollgate_filters::ratelimit::{DAY_MS, HOUR_MS};

    #[test]
    fn the_sweep_drops_what_left_its_window_and_keeps_what_counts() {
        let c = LocalCounter::default();
        let windows = [
            Window {
                window_ms: HOUR_MS,
                limit: 10,
            },
            Window {
                window_ms: DAY_MS,
                limit: 100,
            },
        ];
        let t0 = 1_000_000_000;
        c.check("ip:1", &windows, t0);
        c.check("ip:2", &windows, t0 + HOUR_MS);
        assert_eq!(c.sweep(t0 + HOUR_MS), 2);
        // An hour later ip:1's hourly entry is gone but its daily one still counts.
        assert_eq!(c.sweep(t0 + HOUR_MS + 1), 2);
        assert_eq!(c.check("ip:1", &windows, t0 + HOUR_MS + 1).remaining, 9);
        // A day after their last request both idents are gone.
        assert_eq!(c.sweep(t0 + HOUR_MS + 1 + DAY_MS), 0);
    }

    #[test]
    fn a_log_counts_on_whatever_windows_are_checked_beside_it() {
        let c = LocalCounter::default();
        let hour = Window {
            window_ms: HOUR_MS,
            limit: 10,
        };
        let day = Window {
            window_ms: DAY_MS,
            limit: 100,
        };
        let t0 = 1_000_000_000;
        for i in 0..3 {
            c.check("acct:a", &[hour, day], t0 + i);
        }
        // The day alone (an override lifted the hourly limit), then both again in the other
        // order: each window's log is the one it had, and both went on counting.
        assert_eq!(c.check("acct:a", &[day], t0 + 3).remaining, 96);
        assert_eq!(c.used("acct:a", &[hour, day], t0 + 4), [3, 4]);
        let d = c.check("acct:a", &[day, hour], t0 + 4);
        assert_eq!((d.limit, d.remaining), (10, 6));
        assert_eq!(c.used("acct:a", &[day, hour], t0 + 5), [5, 4]);
        // A refused request is counted in no window.
        for i in 0..6 {
            assert!(c.check("acct:a", &[hour, day], t0 + 5 + i).admitted);
        }
        assert!(!c.check("acct:a", &[hour, day], t0 + 11).admitted);
        assert_eq!(c.used("acct:a", &[hour, day], t0 + 12), [10, 11]);
    }
}
