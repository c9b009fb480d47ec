//! One credit lease's arithmetic, in memory and free of I/O: what a hold may take, what a
//! settlement charges, what a finished round changes, and which round is due. `leases.rs`
//! keeps one of these per account and does the database rounds.

use std::sync::Arc;
use std::time::{Duration, Instant};

use crate::ledger::{LeaseSynced, Settlement};

/// A lease holding this many settlements its rounds could not write takes no more holds:
/// through a long ledger outage the queue stays bounded, and new requests get 503.
pub const MAX_PENDING_ROWS: usize = 50_000;

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
    /// What the account's other leases (other instances) had not spent at the last round: part
    /// of the balance shown (DESIGN.md, Rules: One balance), not of what this lease may move.
    pub others: i64,
    /// The last round failed (the ledger does not answer): a hold that finds the lease dry
    /// is refused at once instead of trying a round of its own.
    pub failing: bool,
    /// The lease's row expires in the ledger after this (renewed by every round that
    /// commits); past it the reaper may have refunded it, so it takes no more holds.
    pub valid_until: Instant,
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
    /// `valid_until`: when the lease's row expires in the ledger.
    pub fn new(
        id: Arc<str>,
        (held, target, balance): (i64, i64, i64),
        now: Instant,
        valid_until: Instant,
    ) -> Lease {
        Lease {
            id,
            available: held,
            target,
            inflight: 0,
            pending: Vec::new(),
            db_balance: balance,
            others: 0,
            failing: false,
            valid_until,
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

    /// Takes a full hold of `wanted`, if the lease is open, unexpired, not holding too many
    /// unwritten rows, and can pay for all of it.
    pub fn take(&mut self, wanted: i64, now: Instant) -> Option<LeaseHold> {
        if self.closing
            || self.available < wanted
            || now >= self.valid_until
            || self.pending.len() >= MAX_PENDING_ROWS
        {
            return None;
        }
        self.available -= wanted;
        self.inflight += 1;
        self.last_used = now;
        Some(LeaseHold {
            lease_id: self.id.clone(),
            held: wanted,
            balance: self.shown_balance(),
        })
    }

    /// The account's balance as shown to its holder: the ledger's, plus what every lease
    /// (this one's unheld part, the others' unspent part at the last round) has not spent.
    pub fn shown_balance(&self) -> i64 {
        self.db_balance + self.others + self.available
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

    /// Whether the hold of `held` and the lease's unheld rest can pay `cost`.
    pub fn covers(&self, held: i64, cost: i64) -> bool {
        cost <= self.available.saturating_add(held)
    }

    /// Ends a hold of `held` without a charge here (its settlement goes to the database): the
    /// held money is the lease's again.
    pub fn drop_hold(&mut self, held: i64, now: Instant) {
        self.available += held;
        self.inflight = self.inflight.saturating_sub(1);
        self.last_used = now;
    }

    /// Settles a hold of `held`: as in the database, the charge never exceeds what the hold
    /// and the unheld rest can pay. Queues the usage row; returns `(charged, balance)`.
    pub fn settle(&mut self, held: i64, mut s: Settlement, now: Instant) -> (i64, i64) {
        let charged = s.cost.max(0).min(self.available + held);
        self.available += held - charged;
        self.inflight = self.inflight.saturating_sub(1);
        self.last_used = now;
        let balance = self.shown_balance();
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
        self.failing = true;
        self.available += start.give_back;
        let mut back = start.rows;
        back.append(&mut self.pending);
        self.pending = back;
    }

    /// A round that committed (and neither lost nor released the lease); `valid_until`: the
    /// expiry it wrote.
    pub fn round_done(&mut self, done: &LeaseSynced, now: Instant, valid_until: Instant) {
        self.db_balance = done.balance;
        self.others = done.others;
        self.available += done.topped_up;
        self.last_synced = now;
        self.failing = false;
        self.valid_until = valid_until;
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
