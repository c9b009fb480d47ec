//! What this instance admitted with Redis, kept in memory so a Redis outage loses no count
//! (DESIGN.md, Rules: Faults). Every admission Redis counted for this instance is recorded here
//! with its sorted-set member and score; while Redis is unavailable `fail_open` decides from
//! this log (so the requests Redis admitted before the outage still count) and adds its own
//! admissions as *unsent*; when Redis returns, [`recovery`](super::recovery) writes the unsent
//! ones — or, if Redis lost its data (a restart), every one — into Redis's windows with their
//! original members and scores. ZADD of a member already there is a no-op, so writing twice
//! never counts twice, and a Redis that kept its data is not counted into again.
//!
//! Why a log of members rather than seeding the fallback from Redis's last figures: a figure
//! cannot be written back to a Redis that restarted empty without double counting in one that
//! did not; identical members can. The healthy path pays one short lock and a push of the
//! member Redis already returned (no allocation of its own but a new ident's entry; a
//! reservation's members share their base), and memory holds what Redis holds of this
//! instance's admissions: one 32-byte entry per admission still in its ident's longest window,
//! dropped by [`Shadow::sweep`] off the request path.

use std::collections::{HashMap, VecDeque};
use std::fmt;
use std::sync::atomic::{AtomicU64, AtomicU8, Ordering};
use std::sync::{Arc, Mutex};

use tollgate_filters::ratelimit::{Decision, Window};

/// Where the limiter's decisions are made.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Health {
    /// In Redis.
    Healthy = 0,
    /// Redis failed: the failure mode applies (in this log for `fail_open`) until it is back
    /// and has been given what this instance counted meanwhile.
    Degraded = 1,
    /// The last in-process admissions are being written; checks wait (one round trip), so none
    /// is decided in-process after that write was taken and none in Redis before it lands.
    Handoff = 2,
}

/// One admission: its score (ms) and sorted-set member, as Redis has (or will have) them.
pub type Entry = (i64, Member);

/// A sorted-set member: the script's `base` (`{now}:{request's member}`), or `base:j` for the
/// j-th admission of a reservation. A reservation's members share one `base`, written out only
/// when sent to Redis: the log holds every admission for as long as a window counts it, and a
/// string of its own per admission made Redis-backed instances grow ~130 bytes per request
/// admitted (issue 31), about half of it that string.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Member {
    base: Arc<str>,
    /// 0: the base itself.
    j: u32,
}

impl Member {
    pub fn new(base: impl Into<Arc<str>>) -> Member {
        Member {
            base: base.into(),
            j: 0,
        }
    }

    /// The `j`-th (from 1) admission reserved with `base`.
    pub fn reserved(base: &Arc<str>, j: u32) -> Member {
        Member {
            base: base.clone(),
            j,
        }
    }
}

impl fmt::Display for Member {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.j {
            0 => f.write_str(&self.base),
            j => write!(f, "{}:{j}", self.base),
        }
    }
}

#[derive(Default)]
struct Log {
    /// The window lengths this ident was last checked with: its Redis keys.
    windows: Vec<i64>,
    /// Every admission still in a window, sorted by score.
    entries: VecDeque<Entry>,
    /// Admitted in-process, not yet written to Redis (also in `entries`).
    unsent: Vec<Entry>,
}

type State = HashMap<String, Log>;

/// Admissions of one ident to write to Redis.
pub struct Item {
    pub ident: String,
    pub windows: Vec<i64>,
    pub entries: Vec<Entry>,
}

#[derive(Default)]
pub struct Shadow {
    state: Mutex<State>,
    /// A [`Health`]; read without the lock on every check.
    health: AtomicU8,
    /// Failed Redis calls so far: a handoff that saw one meanwhile does not declare Redis
    /// healthy (it may have restarted again).
    failures: AtomicU64,
    /// Woken when a handoff ends.
    pub handed_off: tokio::sync::Notify,
}

impl Shadow {
    pub fn health(&self) -> Health {
        match self.health.load(Ordering::Acquire) {
            0 => Health::Healthy,
            1 => Health::Degraded,
            _ => Health::Handoff,
        }
    }

    pub fn failures(&self) -> u64 {
        self.failures.load(Ordering::Acquire)
    }

    /// A Redis call failed (or Redis was found to have restarted): decisions leave Redis until
    /// the recovery has written what it missed.
    pub fn failed(&self) {
        self.failures.fetch_add(1, Ordering::AcqRel);
        self.health.store(Health::Degraded as u8, Ordering::Release);
    }

    /// Records an admission Redis counted (`member` at score `at`).
    pub fn record(&self, ident: &str, windows: &[Window], at: i64, member: Member) {
        let Ok(mut s) = self.state.lock() else {
            return;
        };
        if let Some(log) = log_of(&mut s, ident, windows) {
            insert(log, at, member);
        }
    }

    /// Decides in-process from this log and counts an admission as unsent. `None` when the
    /// limiter is no longer degraded (the caller goes back to Redis), unless `force`: after a
    /// failed Redis call, which makes it degraded again.
    pub fn admit_local(
        &self,
        ident: &str,
        windows: &[Window],
        member: &str,
        now: i64,
        force: bool,
    ) -> Option<Decision> {
        let Ok(mut s) = self.state.lock() else {
            return Some(Decision::unlimited());
        };
        // Under the lock: a handoff takes the unsent under it too, so nothing is added after.
        if force {
            self.health.store(Health::Degraded as u8, Ordering::Release);
        } else if self.health() != Health::Degraded {
            return None;
        }
        let log = log_of(&mut s, ident, windows)?;
        let d = decide(&log.entries, windows, now);
        if d.admitted {
            // The member Redis's script would have made.
            let member = Member::new(format!("{now}:{member}"));
            log.unsent.push((now, member.clone()));
            insert(log, now, member);
        }
        Some(d)
    }

    /// Admissions counted in each window at `now`.
    pub fn used(&self, ident: &str, windows: &[Window], now: i64) -> Vec<u64> {
        let s = self.state.lock().ok();
        let log = s.as_ref().and_then(|s| s.get(ident));
        windows
            .iter()
            .map(|w| {
                log.map_or(0, |l| {
                    let start = l.entries.partition_point(|e| e.0 <= now - w.window_ms);
                    (l.entries.len() - start) as u64
                })
            })
            .collect()
    }

    pub fn forget(&self, ident: &str) {
        if let Ok(mut s) = self.state.lock() {
            s.remove(ident);
        }
    }

    /// Drops admissions that left every window, then idents with nothing left; returns how
    /// many idents remain.
    pub fn sweep(&self, now: i64) -> usize {
        let Ok(mut s) = self.state.lock() else {
            return 0;
        };
        s.retain(|_, l| {
            let span = l.windows.iter().copied().max().unwrap_or(0);
            while l.entries.front().is_some_and(|e| e.0 <= now - span) {
                l.entries.pop_front();
            }
            // Unsent through a whole window of outage: Redis would not count them any more.
            l.unsent.retain(|e| e.0 > now - span);
            !(l.entries.is_empty() && l.unsent.is_empty())
        });
        s.len()
    }

    /// What to write to Redis while degraded: a copy of every admission still in a window when
    /// Redis lost its data (`all`), else the unsent ones, taken (given back by
    /// [`Shadow::put_back`] if their write fails).
    pub fn take(&self, all: bool, now: i64) -> Vec<Item> {
        let Ok(mut s) = self.state.lock() else {
            return Vec::new();
        };
        take_locked(&mut s, all, now)
    }

    /// Unsent admissions whose write failed, to be written next time.
    pub fn put_back(&self, items: Vec<Item>) {
        let Ok(mut s) = self.state.lock() else {
            return;
        };
        for it in items {
            if let Some(l) = s.get_mut(&it.ident) {
                l.unsent.extend(it.entries);
            }
        }
    }

    /// Starts the handoff if no Redis call failed since `failures`: from now on no check
    /// decides in-process, and the unsent admissions left are returned to be written.
    pub fn begin_handoff(&self, failures: u64, now: i64) -> Option<Vec<Item>> {
        let Ok(mut s) = self.state.lock() else {
            return None;
        };
        if self.failures() != failures || self.health() != Health::Degraded {
            return None;
        }
        self.health.store(Health::Handoff as u8, Ordering::Release);
        Some(take_locked(&mut s, false, now))
    }

    /// Ends the handoff: healthy when its write landed and nothing failed since `failures`,
    /// else degraded again (the write's admissions put back). Wakes the waiting checks.
    pub fn end_handoff(&self, failures: u64, failed_write: Option<Vec<Item>>) -> bool {
        let ok = failed_write.is_none();
        if let Some(items) = failed_write {
            self.put_back(items);
        }
        let healthy = ok
            && self.failures() == failures
            && self
                .health
                .compare_exchange(
                    Health::Handoff as u8,
                    Health::Healthy as u8,
                    Ordering::AcqRel,
                    Ordering::Acquire,
                )
                .is_ok();
        if !healthy {
            let _ = self.health.compare_exchange(
                Health::Handoff as u8,
                Health::Degraded as u8,
                Ordering::AcqRel,
                Ordering::Acquire,
            );
        }
        self.handed_off.notify_waiters();
        healthy
    }
}

fn take_locked(s: &mut State, all: bool, now: i64) -> Vec<Item> {
    let mut items = Vec::new();
    for (ident, l) in s.iter_mut() {
        let entries: Vec<Entry> = if all {
            // The unsent stay for the handoff (written twice, counted once).
            let span = l.windows.iter().copied().max().unwrap_or(0);
            let start = l.entries.partition_point(|e| e.0 <= now - span);
            l.entries.range(start..).cloned().collect()
        } else {
            std::mem::take(&mut l.unsent)
        };
        if !entries.is_empty() {
            items.push(Item {
                ident: ident.clone(),
                windows: l.windows.clone(),
                entries,
            });
        }
    }
    items
}

/// The ident's log, made on its first admission (the only allocation of the healthy path).
fn log_of<'a>(s: &'a mut State, ident: &str, windows: &[Window]) -> Option<&'a mut Log> {
    if !s.contains_key(ident) {
        s.insert(ident.to_owned(), Log::default());
    }
    let log = s.get_mut(ident)?;
    if !log.windows.iter().eq(windows.iter().map(|w| &w.window_ms)) {
        log.windows = windows.iter().map(|w| w.window_ms).collect();
    }
    Some(log)
}

/// Keeps `entries` sorted by score: admissions arrive almost in order (reserved ones are scored
/// at the end of their reservation), so this is nearly always a push at the back.
fn insert(log: &mut Log, at: i64, member: Member) {
    let i = log.entries.partition_point(|e| e.0 <= at);
    log.entries.insert(i, (at, member));
}

/// `tollgate_filters::ratelimit::check_and_count` without the counting, on one sorted log
/// counted in every window (as Redis counts each admission in all of an ident's keys).
pub fn decide(entries: &VecDeque<Entry>, windows: &[Window], now: i64) -> Decision {
    let mut report: Option<(u64, u64, i64)> = None; // (limit, remaining after, reset)
    let mut retry = 0i64;
    for w in windows {
        let start = entries.partition_point(|e| e.0 <= now - w.window_ms);
        let count = (entries.len() - start) as u64;
        let reset = entries
            .get(start)
            .map_or(w.window_ms, |e| e.0 + w.window_ms - now);
        if count >= w.limit {
            let t = entries
                .get(start + (count - w.limit) as usize)
                .map_or(now, |e| e.0);
            retry = retry.max(t + w.window_ms - now);
            if report.is_none_or(|(_, rem, _)| rem > 0) {
                report = Some((w.limit, 0, reset));
            }
        } else {
            let rem = w.limit - count - 1;
            if report.is_none_or(|(_, best, _)| rem < best) {
                report = Some((w.limit, rem, reset));
            }
        }
    }
    match report {
        Some((limit, remaining, reset_ms)) => Decision {
            admitted: retry == 0,
            limit,
            remaining,
            reset_ms,
            retry_ms: retry,
        },
        None => Decision::unlimited(),
    }
}

#[cfg(test)]
#[path = "shadow_tests.rs"]
mod tests;
