//! Credit leases, one per account this instance meters (the why and the guarantees are in
//! the `metering` module doc): taking, topping up, settling against and returning them.

pub mod lease;
mod rounds;
#[cfg(test)]
mod tests;

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, Instant};

use tollgate_filters::credits::HoldSize;

use crate::ledger::{LeaseRound, Ledger, Settlement, StoreError};
use lease::{Lease, LeaseHold, Round};

/// Where the opening of a lease that reported an error is queued to be cancelled.
pub struct Undo<'a>(
    pub &'a super::unsettled::Unsettled,
    pub &'a crate::metrics::Metrics,
);

/// A lease is never sized below this many micro-credits per hold (free models cost nothing per
/// hold but still need a usage row per request).
const MIN_HOLD_FOR_SIZING: i64 = 1_000;
/// After the balance refused a lease, the account holds in the database for this long before
/// this instance asks again.
const REFUSED_FOR: Duration = Duration::from_secs(5);
/// A lease's share of the balance: moved only while the balance stays at least this many times
/// the amount moved.
const BALANCE_MULTIPLE: i64 = 4;
/// A round is due early once this many settlements wait. At 256 a busy account's rounds came
/// every ~8 ms at 32 K requests/s, each a commit that rewrites the same partly filled B-tree pages
/// and several statement round trips; at 1,024 the `lease_sync_ms` timer sets the pace up to
/// ~50 K/s (interleaved A/B: tools/call 40.1 -> 38.3 us of CPU a call, chat 40.1 -> 37.4).
const BATCH_WAKE: usize = 1024;

pub struct Leases {
    pub(super) accounts: Mutex<HashMap<String, Entry>>,
    factor: i64,
    pub(super) idle: Duration,
    ttl: Duration,
    pub(super) renew: Duration,
    pub sync_every: Duration,
    instance: String,
    seq: AtomicU64,
    /// Wakes the background round early (a large batch is waiting).
    pub wake: tokio::sync::Notify,
    /// Set at shutdown: no lease is taken any more.
    shutting_down: AtomicBool,
}

pub(super) struct Entry {
    /// Serialises database rounds for this account (background, inline top-ups and reads).
    pub(super) lock: Arc<tokio::sync::Mutex<()>>,
    pub(super) lease: Option<Lease>,
    pub(super) refused_until: Option<Instant>,
}

pub(super) fn locked<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    // A panic while holding this lock cannot leave the map half-updated in a way that matters
    // more than refusing all metering would, so keep going with the data.
    m.lock().unwrap_or_else(|p| p.into_inner())
}

impl Entry {
    fn new() -> Entry {
        Entry {
            lock: Arc::new(tokio::sync::Mutex::new(())),
            lease: None,
            refused_until: None,
        }
    }

    fn refused(&self) -> bool {
        self.lease.is_none() && self.refused_until.is_some_and(|t| Instant::now() < t)
    }
}

impl Leases {
    /// `holds`: requests' worth of holds per lease (0: leases off); `instance`: this process's
    /// id, part of every lease id.
    pub fn new(
        holds: u64,
        sync_every: Duration,
        idle: Duration,
        ttl: Duration,
        instance: String,
    ) -> Leases {
        // A crashed instance's lease comes back after this; the instance renews it long before.
        let ttl = ttl.clamp(Duration::from_millis(100), Duration::from_secs(30));
        Leases {
            accounts: Mutex::new(HashMap::new()),
            factor: holds as i64,
            idle: idle.max(Duration::from_millis(10)),
            // Renewed well before it could expire.
            renew: (ttl / 4).min(Duration::from_secs(1)),
            ttl,
            sync_every: sync_every.max(Duration::from_millis(1)),
            instance,
            seq: AtomicU64::new(0),
            wake: tokio::sync::Notify::new(),
            shutting_down: AtomicBool::new(false),
        }
    }

    pub fn enabled(&self) -> bool {
        self.factor > 0
    }

    fn expires_at(&self) -> i64 {
        crate::clock::now_ms() + self.ttl.as_millis() as i64
    }

    /// Takes a full hold from the account's lease, if it has one that can pay for it.
    fn take(map: &mut HashMap<String, Entry>, account: &str, wanted: i64) -> Option<LeaseHold> {
        map.get_mut(account)?
            .lease
            .as_mut()?
            .take(wanted, Instant::now())
    }

    /// Places the hold against this instance's lease of the account's credits, taking or topping
    /// up the lease first when needed. `Ok(None)`: the account's balance is too low to lease
    /// (or leases are off); hold in the database instead.
    /// `undo`: where a lease whose opening reported an error is queued to be cancelled.
    pub async fn hold(
        &self,
        ledger: &Ledger,
        undo: &Undo<'_>,
        account: &str,
        size: &HoldSize,
    ) -> Result<Option<LeaseHold>, StoreError> {
        if !self.enabled() || self.shutting_down.load(Ordering::SeqCst) {
            return Ok(None);
        }
        let wanted = size.wanted.max(0);
        let lock = {
            let mut map = locked(&self.accounts);
            if let Some(h) = Self::take(&mut map, account, wanted) {
                return Ok(Some(h));
            }
            let e = map.entry(account.to_owned()).or_insert_with(Entry::new);
            if e.refused() {
                return Ok(None);
            }
            e.lock.clone()
        };
        // Past here the lease needs the ledger: while it is known down, fail now rather than
        // queue behind the round lock for a round that cannot commit.
        crate::ledger::breaker::check()?;
        let _round = lock.lock().await;
        let target = wanted.max(MIN_HOLD_FOR_SIZING).saturating_mul(self.factor);
        let has_lease = {
            let mut map = locked(&self.accounts);
            // Another request may have taken or topped up the lease while this one waited.
            if let Some(h) = Self::take(&mut map, account, wanted) {
                return Ok(Some(h));
            }
            let e = map.entry(account.to_owned()).or_insert_with(Entry::new);
            if e.refused() || e.lease.as_ref().is_some_and(|l| l.closing) {
                return Ok(None);
            }
            if e.lease.as_ref().is_some_and(|l| l.failing) {
                // Its last round could not reach the ledger: a round of this request's own
                // would wait out the store's timeout only to fail too.
                return Err(StoreError(
                    "the ledger does not answer and the credit lease cannot pay".into(),
                ));
            }
            if let Some(l) = e.lease.as_mut() {
                // Up to an eighth of the balance last seen, so that the balance can still
                // allow the top-up (it must stay `BALANCE_MULTIPLE` times what moves).
                l.enlarge(target, l.db_balance / (2 * BALANCE_MULTIPLE));
            }
            e.lease.is_some()
        };
        // Boxed: a round of the request's own is rare, and its statements' futures unboxed
        // would make every request's future ~2.5 KB larger, copied at each call level.
        let placed = if has_lease {
            Box::pin(self.top_up(ledger, account, wanted, target)).await?
        } else {
            Box::pin(self.open(ledger, undo, account, target)).await?
        };
        if !placed {
            return Ok(None);
        }
        let mut map = locked(&self.accounts);
        Ok(Self::take(&mut map, account, wanted))
    }

    /// Tops the account's lease up so it can pay `wanted`; false (and the lease returned, the
    /// account holding in the database for a while) when the balance cannot refill it.
    async fn top_up(
        &self,
        ledger: &Ledger,
        account: &str,
        wanted: i64,
        target: i64,
    ) -> Result<bool, StoreError> {
        let (need, top) = {
            let map = locked(&self.accounts);
            let l = map.get(account).and_then(|e| e.lease.as_ref());
            let available = l.map_or(0, |l| l.available);
            let top = l.map_or(target, |l| l.target) - available;
            (wanted - available, top)
        };
        if self
            .round(ledger, account, Round::TopUp(top.max(need)))
            .await?
        {
            return Ok(true);
        }
        // Give back what is left so that the database hold can use it.
        self.round(ledger, account, Round::Release).await?;
        if let Some(e) = locked(&self.accounts).get_mut(account) {
            e.refused_until = Some(Instant::now() + REFUSED_FOR);
        }
        Ok(false)
    }

    /// Opens a lease of `target` as one hold row, where the balance stays at least
    /// `BALANCE_MULTIPLE` times that; false when it does not.
    async fn open(
        &self,
        ledger: &Ledger,
        undo: &Undo<'_>,
        account: &str,
        target: i64,
    ) -> Result<bool, StoreError> {
        let id: Arc<str> = format!(
            "lease_{}_{}",
            self.instance,
            self.seq.fetch_add(1, Ordering::Relaxed)
        )
        .into();
        let size = HoldSize {
            prompt_cost: 0,
            wanted: target,
            minimum: target.saturating_mul(BALANCE_MULTIPLE),
            output_per_1k: 0,
            choices: 1,
        };
        let valid_until = Instant::now() + self.ttl;
        // Not sent at all while the ledger is known down: nothing to cancel then.
        crate::ledger::breaker::check()?;
        let got = match ledger.hold(&id, account, &size, self.expires_at()).await {
            Ok(got) => got,
            Err(e) => {
                // It may have committed: its row is refunded once the ledger answers.
                undo.0.cancel(&id, undo.1);
                return Err(e);
            }
        };
        // What the account's other leases (other instances) have not spent, for the balance
        // shown until this lease's first round reads it; only shown, so a failed read is 0.
        let others = match got {
            Some((held, _)) => ledger.leased(account).await.map_or(0, |all| all - held),
            None => 0,
        };
        let mut map = locked(&self.accounts);
        let e = map.entry(account.to_owned()).or_insert_with(Entry::new);
        match got {
            Some((held, balance)) => {
                e.refused_until = None;
                let now = Instant::now();
                let mut lease = Lease::new(id, (held, target, balance), now, valid_until);
                lease.others = others;
                e.lease = Some(lease);
                Ok(true)
            }
            None => {
                e.refused_until = Some(Instant::now() + REFUSED_FOR);
                Ok(false)
            }
        }
    }

    /// Grows a hold placed against the account's lease `lease_id` by `extra` (before a failover
    /// to a pricier model), topping the lease up first when its unheld part is short; false
    /// when the lease is gone or the balance cannot pay.
    pub async fn grow(
        &self,
        ledger: &Ledger,
        account: &str,
        lease_id: &Arc<str>,
        extra: i64,
    ) -> Result<bool, StoreError> {
        let grow = |map: &mut HashMap<String, Entry>| {
            map.get_mut(account)
                .and_then(|e| e.lease.as_mut())
                .filter(|l| &l.id == lease_id)
                .is_some_and(|l| l.grow(extra))
        };
        if grow(&mut locked(&self.accounts)) {
            return Ok(true);
        }
        let Some(lock) = locked(&self.accounts).get(account).map(|e| e.lock.clone()) else {
            return Ok(false);
        };
        let _round = lock.lock().await;
        let moved = grow(&mut locked(&self.accounts))
            || (self.round(ledger, account, Round::TopUp(extra)).await?
                && grow(&mut locked(&self.accounts)));
        Ok(moved)
    }

    /// Settles a hold placed against a lease, in memory: returns `(charged, balance)`, or gives
    /// the settlement back, to be settled in the database directly, when that lease is gone
    /// (lost to the reaper) or cannot pay the whole cost (a usage above the hold: the balance
    /// outside the lease pays it, as far as it goes).
    pub fn settle(
        &self,
        lease_id: &Arc<str>,
        held: i64,
        s: Settlement,
    ) -> Result<(i64, i64), Box<Settlement>> {
        let mut map = locked(&self.accounts);
        let Some(l) = map
            .get_mut(&s.account_id)
            .and_then(|e| e.lease.as_mut())
            .filter(|l| &l.id == lease_id)
        else {
            return Err(Box::new(s));
        };
        if !l.covers(held, s.cost) {
            l.drop_hold(held, Instant::now());
            return Err(Box::new(s));
        }
        let done = l.settle(held, s, Instant::now());
        if l.pending.len() >= BATCH_WAKE {
            self.wake.notify_one();
        }
        Ok(done)
    }

    /// One database round for the account; the caller holds the account's round lock.
    /// Returns false when a top-up was refused by the balance (or there is no lease).
    pub(super) async fn round(
        &self,
        ledger: &Ledger,
        account: &str,
        kind: Round,
    ) -> Result<bool, StoreError> {
        let (lease_id, start) = {
            let mut map = locked(&self.accounts);
            let Some(l) = map.get_mut(account).and_then(|e| e.lease.as_mut()) else {
                return Ok(false);
            };
            (l.id.clone(), l.start_round(kind))
        };
        // The expiry this round writes is at least this far away.
        let valid_until = Instant::now() + self.ttl;
        let topup = match kind {
            Round::TopUp(t) if !start.release => t.max(0),
            _ => 0,
        };
        let r = LeaseRound {
            lease_id: &lease_id,
            account_id: account,
            rows: &start.rows,
            topup,
            topup_min_balance: topup.saturating_mul(BALANCE_MULTIPLE),
            release: start.release,
            give_back: start.give_back,
            expires_at: self.expires_at(),
        };
        // Not sent while the ledger is known down (its circuit): the round fails at once.
        let result = match crate::ledger::breaker::check() {
            Ok(()) => ledger.lease_sync(&r).await,
            Err(open) => Err(open.into()),
        };
        let mut map = locked(&self.accounts);
        let Some(e) = map.get_mut(account) else {
            return Ok(false);
        };
        let Some(l) = e.lease.as_mut().filter(|l| l.id == lease_id) else {
            return Ok(false);
        };
        match result {
            Ok(done) if done.lost => {
                tracing::error!(
                    lease = %lease_id,
                    "credit lease was refunded by the reaper while in use (instance stalled past hold_ttl_secs); its batch was charged to the balance"
                );
                e.lease = None;
                Ok(false)
            }
            Ok(done) if done.released => {
                e.lease = None;
                Ok(true)
            }
            Ok(done) => {
                l.round_done(&done, Instant::now(), valid_until);
                Ok(topup == 0 || done.topped_up > 0)
            }
            Err(err) => {
                // A failed return stays `closing`; the background round tries it again.
                l.round_failed(start);
                Err(err)
            }
        }
    }
}
