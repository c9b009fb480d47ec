//! One credit lease's arithmetic, in memory and free of I/O: what a hold may take, what a
//! settlement charges, what a finished round changes, and which round is due. `leases.rs`
//! keeps one of these per account and does the database rounds.

use std::sync::Arc;
use std::time::{Duration, Instant};

use crate::ledger::{LeaseSynced, Settlement};

/// A hold placed against this instance's lease.
#[derive(Debug, Clone)]
pub struct LeaseHold {
    pub lease_id: Arc<str>,
    pub held: i64,
    /// The balance as this instance sees it after the hold.
    pub balance: i64,
}

/// The database round a lease needs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Round {
    /// Write pending rows and renew.
    Flush,
    /// Also move this much more into the lease.
    TopUp(i64),
    /// Write pending rows and return the rest.
    Release,
}

#[derive(Debug)]
pub struct Lease {
    pub id: Arc<str>,
    /// Not held by any request: what new holds may take.
    pub available: i64,
    pub target: i64,
    pub inflight: u32,
    /// Settled, not yet written: each with the balance its response reported.
    pub pending: Vec<(Settlement, i64)>,
    /// The account's balance in the database (outside every lease) at the last round.
    pub db_balance: i64,
    pub last_used: Instant,
    pub last_synced: Instant,
    /// Being returned (or drained until its holds in flight settle): no new holds.
    pub closing: bool,
}

/// What a round takes out of the lease before it goes to the database.
#[derive(Debug)]
pub struct RoundStart {
    pub rows: Vec<(Settlement, i64)>,
    /// The lease's row is deleted and its rest returned (no holds in flight).
    pub release: bool,
    /// Returned to the balance now while holds in flight keep the lease (draining).
    pub give_back: i64,
}

impl Lease {
    pub fn new(id: Arc<str>, held: i64, target: i64, balance: i64, now: Instant) -> Lease {
        Lease {
            id,
            available: held,
            target,
            inflight: 0,
            pending: Vec::new(),
            db_balance: balance,
            last_used: now,
            last_synced: now,
            closing: false,
        }
    }

    /// A hold found the lease dry between rounds, so the lease is too small for the account's
    /// spend rate (a tool call keeps its whole hold until the round that charges it: at 20 K
    /// calls/s a 256-call lease ran dry in every 20 ms round, and the top-up ran inline, on the
    /// request path, with the other holds waiting). The target doubles, up to `cap`, and is
    /// never below `base` (the size this hold alone asks for).
    pub fn enlarge(&mut self, base: i64, cap: i64) {
        let doubled = self.target.saturating_mul(2).min(cap);
        self.target = self.target.max(base).max(doubled);
    }

    /// Takes a full hold of `wanted`, if the lease is open and can pay for all of it.
    pub fn take(&mut self, wanted: i64, now: Instant) -> Option<LeaseHold> {
        if self.closing || self.available < wanted {
            return None;
        }
        self.available -= wanted;
        self.inflight += 1;
        self.last_used = now;
        Some(LeaseHold {
            lease_id: self.id.clone(),
            held: wanted,
            balance: self.db_balance + self.available,
        })
    }

    /// Adds `extra` to a hold in flight (a failover to a pricier model), if the lease is open
    /// and has that much unheld.
    pub fn grow(&mut self, extra: i64) -> bool {
        if self.closing || extra < 0 || self.available < extra {
            return false;
        }
        self.available -= extra;
        true
    }

    /// Settles a hold of `held`: as in the database, the charge never exceeds what the hold
    /// and the unheld rest can pay. Queues the usage row; returns `(charged, balance)`.
    pub fn settle(&mut self, held: i64, mut s: Settlement, now: Instant) -> (i64, i64) {
        let charged = s.cost.max(0).min(self.available + held);
        self.available += held - charged;
        self.inflight = self.inflight.saturating_sub(1);
        self.last_used = now;
        let balance = self.db_balance + self.available;
        s.cost = charged;
        self.pending.push((s, balance));
        (charged, balance)
    }

    /// Starts a round: takes the pending rows; a release with holds in flight gives back the
    /// unheld part now and drains the rest (the lease takes no new holds and goes once they
    /// have settled).
    pub fn start_round(&mut self, kind: Round) -> RoundStart {
        let release = kind == Round::Release && self.inflight == 0;
        let mut give_back = 0;
        if kind == Round::Release {
            self.closing = true;
            if !release {
                give_back = std::mem::take(&mut self.available);
            }
        }
        RoundStart {
            rows: std::mem::take(&mut self.pending),
            release,
            give_back,
        }
    }

    /// A round that failed: its rows and give-back return to the lease for the next try.
    pub fn round_failed(&mut self, start: RoundStart) {
        self.available += start.give_back;
        let mut back = start.rows;
        back.append(&mut self.pending);
        self.pending = back;
    }

    /// A round that committed (and neither lost nor released the lease).
    pub fn round_done(&mut self, done: &LeaseSynced, now: Instant) {
        self.db_balance = done.balance;
        self.available += done.topped_up;
        self.last_synced = now;
    }

    /// The round the background tick should run now, if any: return a closing lease once its
    /// holds settled, return an idle one, top up one below half its target, else renew when
    /// rows wait or the expiry needs pushing.
    pub fn due(&self, now: Instant, idle: Duration, renew_every: Duration) -> Option<Round> {
        let renew = !self.pending.is_empty() || now.duration_since(self.last_synced) >= renew_every;
        if self.closing {
            return if self.inflight == 0 {
                Some(Round::Release)
            } else if renew {
                Some(Round::Flush)
            } else {
                None
            };
        }
        if self.inflight == 0 && now.duration_since(self.last_used) >= idle {
            Some(Round::Release)
        } else if self.available < self.target / 2 {
            Some(Round::TopUp(self.target - self.available))
        } else if renew {
            Some(Round::Flush)
        } else {
            None
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_lease_that_ran_dry_doubles_up_to_its_cap() {
        let mut l = Lease::new("l".into(), 0, 100, 10_000, Instant::now());
        l.enlarge(50, 1_000);
        assert_eq!(l.target, 200);
        l.enlarge(50, 1_000);
        l.enlarge(50, 1_000);
        l.enlarge(50, 1_000);
        assert_eq!(l.target, 1_000);
        // A hold larger than the cap still gets a lease that can pay for it.
        l.enlarge(5_000, 1_000);
        assert_eq!(l.target, 5_000);
        // Never shrinks: a smaller balance only stops the growth.
        l.enlarge(50, 10);
        assert_eq!(l.target, 5_000);
    }

    fn settlement(cost: i64) -> Settlement {
        Settlement {
            hold_id: "req".into(),
            request_id: "req".into(),
            account_id: "usr".into(),
            key_id: None,
            model_requested: "m".into(),
            model_used: Some("m".into()),
            provider: Some("p".into()),
            prompt_tokens: 1,
            completion_tokens: 1,
            cost,
            status: 200,
            latency_ms: 1,
            now_ms: 0,
            hold_note: None,
            tool: None,
        }
    }

    fn lease(held: i64) -> (Lease, Instant) {
        let now = Instant::now();
        (Lease::new("lease_1".into(), held, held, 5_000, now), now)
    }

    #[test]
    fn holds_take_whole_amounts_and_never_more_than_is_left() {
        let (mut l, now) = lease(1_000);
        let h = l.take(600, now).unwrap();
        assert_eq!(
            (h.held, h.balance, l.available, l.inflight),
            (600, 5_400, 400, 1)
        );
        assert!(l.take(401, now).is_none(), "a partial hold is never taken");
        assert!(l.take(400, now).is_some());
        assert_eq!((l.available, l.inflight), (0, 2));
    }

    #[test]
    fn settlement_refunds_the_rest_and_clamps_the_charge() {
        let (mut l, now) = lease(1_000);
        l.take(600, now).unwrap();
        assert_eq!(l.settle(600, settlement(250), now), (250, 5_750));
        assert_eq!((l.available, l.inflight, l.pending.len()), (750, 0, 1));
        assert_eq!(l.pending[0].0.cost, 250);
        // A cost above the hold takes from the unheld rest, never below zero.
        l.take(100, now).unwrap();
        assert_eq!(l.settle(100, settlement(10_000), now), (750, 5_000));
        assert_eq!(l.available, 0);
        // A negative cost (never produced, but not trusted) charges nothing.
        l.available = 10;
        l.take(10, now).unwrap();
        assert_eq!(l.settle(10, settlement(-5), now).0, 0);
    }

    #[test]
    fn a_hold_grows_only_from_what_the_open_lease_has_unheld() {
        let (mut l, now) = lease(100);
        let h = l.take(60, now).unwrap();
        assert!(!l.grow(41));
        assert!(l.grow(40));
        assert_eq!(l.available, 0);
        // The grown hold settles as one: the charge comes out of all 100 it holds.
        assert_eq!(l.settle(h.held + 40, settlement(90), now), (90, 5_010));
        assert_eq!(l.available, 10);
        l.closing = true;
        assert!(!l.grow(1));
    }

    #[test]
    fn a_release_with_holds_in_flight_drains_instead() {
        let (mut l, now) = lease(1_000);
        l.take(300, now).unwrap();
        l.settle(300, settlement(100), now);
        l.take(200, now).unwrap();
        let start = l.start_round(Round::Release);
        assert!(!start.release && l.closing);
        assert_eq!(
            (start.give_back, start.rows.len(), l.available),
            (700, 1, 0)
        );
        assert!(l.take(1, now).is_none(), "a closing lease takes no holds");
        // The round failed: rows and give-back come back for the next try.
        l.round_failed(start);
        assert_eq!((l.available, l.pending.len()), (700, 1));
        l.settle(200, settlement(0), now);
        assert!(
            l.start_round(Round::Release).release,
            "no holds left: released"
        );
    }

    #[test]
    fn a_committed_round_moves_the_top_up_in() {
        let (mut l, now) = lease(100);
        let done = LeaseSynced {
            lost: false,
            charged: 0,
            topped_up: 900,
            released: false,
            balance: 4_100,
        };
        l.round_done(&done, now);
        assert_eq!((l.available, l.db_balance), (1_000, 4_100));
    }

    #[test]
    fn the_due_round_follows_the_lease_state() {
        let idle = Duration::from_secs(2);
        let renew = Duration::from_secs(1);
        let (mut l, t0) = lease(1_000);
        assert_eq!(l.due(t0, idle, renew), None);
        assert_eq!(l.due(t0 + renew, idle, renew), Some(Round::Flush));
        assert_eq!(l.due(t0 + idle, idle, renew), Some(Round::Release));
        l.take(600, t0).unwrap();
        assert_eq!(l.due(t0 + idle, idle, renew), Some(Round::TopUp(600)));
        l.settle(600, settlement(1), t0);
        assert_eq!(l.due(t0, idle, renew), Some(Round::Flush), "rows wait");
        l.take(10, t0).unwrap();
        l.closing = true;
        assert_eq!(l.due(t0, idle, renew), Some(Round::Flush));
        l.pending.clear();
        assert_eq!(l.due(t0, idle, renew), None, "draining, nothing to write");
        l.settle(10, settlement(0), t0);
        assert_eq!(l.due(t0, idle, renew), Some(Round::Release));
    }
}
