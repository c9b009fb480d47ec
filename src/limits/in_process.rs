//! In-process counters: the same sliding logs as in Redis, under a mutex. The only store with
//! no Redis, and the fallback of `fail_open` while Redis is down (then per instance).

use std::collections::{HashMap, VecDeque};
use std::sync::Mutex;

use tollgate_filters::ratelimit::{check_and_count, Decision, Window, DAY_MS};

#[derive(Default)]
pub struct LocalCounter {
    logs: Mutex<HashMap<String, HashMap<i64, VecDeque<i64>>>>,
}

impl LocalCounter {
    pub fn check(&self, ident: &str, windows: &[Window], now: i64) -> Decision {
        let Ok(mut map) = self.logs.lock() else {
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
}
