//! In-process counters: the same sliding logs as in Redis, under a mutex. The only store with
//! no Redis, and the fallback of `fail_open` while Redis is down (then per instance). Entries
//! that left their window are dropped by [`LocalCounter::sweep`], run in the background, so the
//! request path never walks the whole map and memory holds only what a window still counts.

use std::collections::{HashMap, VecDeque};
use std::sync::Mutex;

use tollgate_filters::ratelimit::{check_and_count, Decision, Window};

#[derive(Default)]
pub struct LocalCounter {
    logs: Mutex<HashMap<String, HashMap<i64, VecDeque<i64>>>>,
}

impl LocalCounter {
    pub fn check(&self, ident: &str, windows: &[Window], now: i64) -> Decision {
        let Ok(mut map) = self.logs.lock() else {
            return Decision::unlimited();
        };
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

    /// Requests counted in each window at `now`, without counting one.
    pub fn used(&self, ident: &str, windows: &[Window], now: i64) -> Vec<u64> {
        let Ok(map) = self.logs.lock() else {
            return vec![0; windows.len()];
        };
        windows
            .iter()
            .map(|w| {
                map.get(ident)
                    .and_then(|logs| logs.get(&w.window_ms))
                    .map_or(0, |log| {
                        log.iter().filter(|&&t| t > now - w.window_ms).count() as u64
                    })
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
            logs.retain(|&window_ms, log| {
                while log.front().is_some_and(|&t| t <= now - window_ms) {
                    log.pop_front();
                }
                !log.is_empty()
            });
            !logs.is_empty()
        });
        map.len()
    }
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
}
