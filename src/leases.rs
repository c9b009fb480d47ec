//! Credit leases: the ledger off the request path.
//!
//! Holding and settling every request in the database serialises an account's requests on its
//! row (one commit each way, ~0.3–0.6 ms; README, Performance). Instead, an instance reserves a
//! slice of the account's balance as one row in `holds` (a *lease*, `lease_holds` requests'
//! worth of holds) and places and settles holds against it in memory. A background round every
//! `lease_sync_ms` writes the settlements it metered as a batch of usage rows, takes their
//! charges out of the lease's row, renews the lease's expiry and tops it up; a lease unused for
//! `lease_idle_secs` (or at shutdown) is returned to the balance.
//!
//! What does not change:
//! - The balance never goes below zero: a lease is moved out of the balance by a conditional
//!   statement, and holds against it never exceed what it has left.
//! - A lease takes at most a quarter of the balance, so an account near zero holds every request
//!   in the database as before and is never refused while this instance still leases its money
//!   (a lease that cannot be topped up is returned before the request falls back).
//! - A crashed instance's lease expires and the reaper refunds it like any hold; what it lost are
//!   the usage rows of at most one sync interval, whose requests then go uncharged (never twice).
//! - Reads of the balance and usage on this instance (`/api/v1/me`, `/api/v1/usage`, the admin
//!   view) first write this instance's pending rows, so they are exact here; another instance
//!   sees the lease's unspent part as held until it is returned.

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, Instant};

use tokio::sync::OwnedMutexGuard;
use tollgate_filters::credits::HoldPlan;

use crate::store::{LeaseRound, Ledger, Settlement, StoreError};

/// A lease is never sized below this many micro-credits per hold (free models cost nothing per
/// hold but still need a usage row per request).
const MIN_HOLD_FOR_SIZING: i64 = 1_000;
/// After the balance refused a lease, the account holds in the database for this long before
/// this instance asks again.
const REFUSED_FOR: Duration = Duration::from_secs(5);
/// A lease's share of the balance: moved only while the balance stays at least this many times
/// the amount moved.
const BALANCE_MULTIPLE: i64 = 4;
/// A round is due early once this many settlements wait.
const BATCH_WAKE: usize = 256;

pub struct Leases {
    accounts: Mutex<HashMap<String, Entry>>,
    factor: i64,
    idle: Duration,
    ttl: Duration,
    renew: Duration,
    pub sync_every: Duration,
    instance: String,
    seq: AtomicU64,
    /// Wakes the background round early (a large batch is waiting).
    pub wake: tokio::sync::Notify,
}

struct Entry {
    /// Serialises database rounds for this account (background, inline top-ups and reads).
    lock: Arc<tokio::sync::Mutex<()>>,
    lease: Option<Lease>,
    refused_until: Option<Instant>,
}

struct Lease {
    id: Arc<str>,
    /// Not held by any request: what new holds may take.
    available: i64,
    target: i64,
    inflight: u32,
    /// Settled, not yet written: each with the balance its response reported.
    pending: Vec<(Settlement, i64)>,
    /// The account's balance in the database (outside every lease) at the last round.
    db_balance: i64,
    last_used: Instant,
    last_synced: Instant,
    /// Being returned (or drained until its holds in flight settle): no new holds.
    closing: bool,
}

/// A hold placed against this instance's lease.
#[derive(Debug, Clone)]
pub struct LeaseHold {
    pub lease_id: Arc<str>,
    pub held: i64,
    /// The balance as this instance sees it after the hold.
    pub balance: i64,
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum Round {
    /// Write pending rows and renew.
    Flush,
    /// Also move this much more into the lease.
    TopUp(i64),
    /// Write pending rows and return the rest.
    Release,
}

fn locked<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
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
}

impl Leases {
    pub fn new(holds: u64, sync_ms: u64, idle_secs: f64, ttl_secs: f64) -> Leases {
        // A crashed instance's lease comes back after this; the instance renews it long before.
        let ttl = Duration::from_secs_f64(ttl_secs.clamp(0.1, 30.0));
        Leases {
            accounts: Mutex::new(HashMap::new()),
            factor: holds as i64,
            idle: Duration::from_secs_f64(idle_secs.max(0.01)),
            // Renewed well before it could expire.
            renew: (ttl / 4).min(Duration::from_secs(1)),
            ttl,
            sync_every: Duration::from_millis(sync_ms.max(1)),
            instance: crate::auth::random_id(10).unwrap_or_else(|_| "instance".into()),
            seq: AtomicU64::new(0),
            wake: tokio::sync::Notify::new(),
        }
    }

    pub fn enabled(&self) -> bool {
        self.factor > 0
    }

    fn expires_at(&self) -> i64 {
        crate::now_ms() + self.ttl.as_millis() as i64
    }

    /// Takes a full hold from the account's lease, if it has one that can pay for it.
    fn take(map: &mut HashMap<String, Entry>, account: &str, wanted: i64) -> Option<LeaseHold> {
        let l = map.get_mut(account)?.lease.as_mut()?;
        if l.closing || l.available < wanted {
            return None;
        }
        l.available -= wanted;
        l.inflight += 1;
        l.last_used = Instant::now();
        Some(LeaseHold {
            lease_id: l.id.clone(),
            held: wanted,
            balance: l.db_balance + l.available,
        })
    }

    /// Places the hold against this instance's lease of the account's credits, taking or topping
    /// up the lease first when needed. `Ok(None)`: the account's balance is too low to lease
    /// (or leases are off); hold in the database instead.
    pub async fn hold(
        &self,
        ledger: &Ledger,
        account: &str,
        hp: &HoldPlan,
    ) -> Result<Option<LeaseHold>, StoreError> {
        if !self.enabled() {
            return Ok(None);
        }
        let wanted = hp.wanted.max(0);
        let lock = {
            let mut map = locked(&self.accounts);
            if let Some(h) = Self::take(&mut map, account, wanted) {
                return Ok(Some(h));
            }
            let e = map.entry(account.to_owned()).or_insert_with(Entry::new);
            if e.lease.is_none() && e.refused_until.is_some_and(|t| Instant::now() < t) {
                return Ok(None);
            }
            e.lock.clone()
        };
        let _round = lock.lock().await;
        let target = wanted.max(MIN_HOLD_FOR_SIZING).saturating_mul(self.factor);
        let lease_id = {
            let mut map = locked(&self.accounts);
            // Another request may have taken or topped up the lease while this one waited.
            if let Some(h) = Self::take(&mut map, account, wanted) {
                return Ok(Some(h));
            }
            let e = map.entry(account.to_owned()).or_insert_with(Entry::new);
            if e.lease.is_none() && e.refused_until.is_some_and(|t| Instant::now() < t) {
                return Ok(None);
            }
            if e.lease.as_ref().is_some_and(|l| l.closing) {
                return Ok(None);
            }
            if let Some(l) = e.lease.as_mut() {
                l.target = l.target.max(target);
            }
            e.lease.as_ref().map(|l| l.id.clone())
        };
        match lease_id {
            Some(_) => {
                let (need, top) = {
                    let map = locked(&self.accounts);
                    let l = map.get(account).and_then(|e| e.lease.as_ref());
                    let available = l.map_or(0, |l| l.available);
                    let top = l.map_or(target, |l| l.target) - available;
                    (wanted - available, top)
                };
                let synced = self
                    .round(ledger, account, Round::TopUp(top.max(need)))
                    .await?;
                if !synced {
                    // The balance cannot refill the lease: give back what is left so that the
                    // database hold below can use it, and hold there for a while.
                    self.round(ledger, account, Round::Release).await?;
                    let mut map = locked(&self.accounts);
                    if let Some(e) = map.get_mut(account) {
                        e.refused_until = Some(Instant::now() + REFUSED_FOR);
                    }
                    return Ok(None);
                }
            }
            None => {
                let id: Arc<str> = format!(
                    "lease_{}_{}",
                    self.instance,
                    self.seq.fetch_add(1, Ordering::Relaxed)
                )
                .into();
                let plan = HoldPlan {
                    prompt_cost: 0,
                    wanted: target,
                    minimum: target.saturating_mul(BALANCE_MULTIPLE),
                    output_per_1k: 0,
                };
                let got = ledger.hold(&id, account, &plan, self.expires_at()).await?;
                let mut map = locked(&self.accounts);
                let e = map.entry(account.to_owned()).or_insert_with(Entry::new);
                match got {
                    Some((held, balance)) => {
                        let now = Instant::now();
                        e.refused_until = None;
                        e.lease = Some(Lease {
                            id,
                            available: held,
                            target,
                            inflight: 0,
                            pending: Vec::new(),
                            db_balance: balance,
                            last_used: now,
                            last_synced: now,
                            closing: false,
                        });
                    }
                    None => {
                        e.refused_until = Some(Instant::now() + REFUSED_FOR);
                        return Ok(None);
                    }
                }
            }
        }
        let mut map = locked(&self.accounts);
        Ok(Self::take(&mut map, account, wanted))
    }

    /// Settles a hold placed against a lease, in memory: returns `(charged, balance)`, or gives
    /// the settlement back when that lease is gone (lost to the reaper), to be settled in the
    /// database directly.
    pub fn settle(
        &self,
        lease_id: &Arc<str>,
        held: i64,
        mut s: Settlement,
    ) -> Result<(i64, i64), Box<Settlement>> {
        let mut map = locked(&self.accounts);
        let Some(l) = map
            .get_mut(&s.account_id)
            .and_then(|e| e.lease.as_mut())
            .filter(|l| &l.id == lease_id)
        else {
            return Err(Box::new(s));
        };
        // As in the database: the charge never exceeds what the hold and the rest can pay.
        let charged = s.cost.max(0).min(l.available + held);
        l.available += held - charged;
        l.inflight = l.inflight.saturating_sub(1);
        l.last_used = Instant::now();
        let balance = l.db_balance + l.available;
        s.cost = charged;
        l.pending.push((s, balance));
        if l.pending.len() >= BATCH_WAKE {
            self.wake.notify_one();
        }
        Ok((charged, balance))
    }

    /// One database round for the account; the caller holds the account's round lock.
    /// Returns false when a top-up was refused by the balance (or there is no lease).
    async fn round(&self, ledger: &Ledger, account: &str, kind: Round) -> Result<bool, StoreError> {
        let (lease_id, rows, release, give_back) = {
            let mut map = locked(&self.accounts);
            let Some(l) = map.get_mut(account).and_then(|e| e.lease.as_mut()) else {
                return Ok(false);
            };
            // Returning with holds in flight gives back the unheld part now and drains the
            // rest: the lease takes no new holds and goes once they have settled.
            let release = kind == Round::Release && l.inflight == 0;
            let mut give_back = 0;
            if kind == Round::Release {
                l.closing = true;
                if !release {
                    give_back = std::mem::take(&mut l.available);
                }
            }
            (
                l.id.clone(),
                std::mem::take(&mut l.pending),
                release,
                give_back,
            )
        };
        let topup = match kind {
            Round::TopUp(t) if !release => t.max(0),
            _ => 0,
        };
        let r = LeaseRound {
            lease_id: &lease_id,
            account_id: account,
            rows: &rows,
            topup,
            topup_min_balance: topup.saturating_mul(BALANCE_MULTIPLE),
            release,
            give_back,
            expires_at: self.expires_at(),
        };
        let result = ledger.lease_sync(&r).await;
        let mut map = locked(&self.accounts);
        let Some(e) = map.get_mut(account) else {
            return Ok(false);
        };
        let Some(l) = e.lease.as_mut().filter(|l| l.id == lease_id) else {
            return Ok(false);
        };
        match result {
            Ok(done) => {
                if done.lost {
                    tracing::error!(
                        lease = %lease_id,
                        "credit lease was refunded by the reaper while in use (instance stalled past hold_ttl_secs); its batch was charged to the balance"
                    );
                    e.lease = None;
                    return Ok(false);
                }
                if done.released {
                    e.lease = None;
                    return Ok(true);
                }
                l.db_balance = done.balance;
                l.available += done.topped_up;
                l.last_synced = Instant::now();
                Ok(topup == 0 || done.topped_up > 0)
            }
            Err(err) => {
                // A failed return stays `closing`; the background round tries it again.
                l.available += give_back;
                let mut back = rows;
                back.append(&mut l.pending);
                l.pending = back;
                Err(err)
            }
        }
    }

    /// The background round over every lease: write pending rows, top up leases below half
    /// their target, renew expiries, return idle leases, forget old refusals.
    pub async fn tick(&self, ledger: &Ledger) {
        let now = Instant::now();
        let work: Vec<(String, Arc<tokio::sync::Mutex<()>>, Round)> = {
            let mut map = locked(&self.accounts);
            map.retain(|_, e| {
                e.lease.is_some()
                    || e.refused_until.is_some_and(|t| now < t)
                    || Arc::strong_count(&e.lock) > 1
            });
            map.iter()
                .filter_map(|(account, e)| {
                    let l = e.lease.as_ref()?;
                    let renew =
                        !l.pending.is_empty() || now.duration_since(l.last_synced) >= self.renew;
                    let kind = if l.closing {
                        if l.inflight == 0 {
                            Round::Release
                        } else if renew {
                            Round::Flush
                        } else {
                            return None;
                        }
                    } else if l.inflight == 0 && now.duration_since(l.last_used) >= self.idle {
                        Round::Release
                    } else if l.available < l.target / 2 {
                        Round::TopUp(l.target - l.available)
                    } else if renew {
                        Round::Flush
                    } else {
                        return None;
                    };
                    Some((account.clone(), e.lock.clone(), kind))
                })
                .collect()
        };
        for (account, lock, kind) in work {
            // A request topping up inline, or a read, is already doing this account's round.
            let Ok(_round) = lock.try_lock() else {
                continue;
            };
            if let Err(e) = self.round(ledger, &account, kind).await {
                tracing::error!(account = %account, "credit lease round failed, will retry: {e}");
            }
        }
    }

    /// Writes this instance's pending rows for the account and keeps further rounds out while
    /// the returned guard lives, so that a read of the balance plus [`Leases::available`] is
    /// consistent.
    pub async fn flush(
        &self,
        ledger: &Ledger,
        account: &str,
    ) -> Result<Option<OwnedMutexGuard<()>>, StoreError> {
        self.round_now(ledger, account, Round::Flush).await
    }

    /// Writes pending rows and returns the account's lease to its balance (an admin adjustment
    /// must see all of it). Holds in flight keep their lease until they settle.
    pub async fn release(
        &self,
        ledger: &Ledger,
        account: &str,
    ) -> Result<Option<OwnedMutexGuard<()>>, StoreError> {
        self.round_now(ledger, account, Round::Release).await
    }

    async fn round_now(
        &self,
        ledger: &Ledger,
        account: &str,
        kind: Round,
    ) -> Result<Option<OwnedMutexGuard<()>>, StoreError> {
        let Some(lock) = locked(&self.accounts).get(account).map(|e| e.lock.clone()) else {
            return Ok(None);
        };
        let guard = lock.lock_owned().await;
        self.round(ledger, account, kind).await?;
        Ok(Some(guard))
    }

    /// What this instance's lease of the account has not yet held (0 without a lease).
    pub fn available(&self, account: &str) -> i64 {
        locked(&self.accounts)
            .get(account)
            .and_then(|e| e.lease.as_ref())
            .map_or(0, |l| l.available)
    }

    /// Returns every lease (shutdown). Leases with holds in flight are flushed and left to
    /// expire if they cannot be returned before the process ends.
    pub async fn release_all(&self, ledger: &Ledger) {
        let accounts: Vec<(String, Arc<tokio::sync::Mutex<()>>)> = locked(&self.accounts)
            .iter()
            .filter(|(_, e)| e.lease.is_some())
            .map(|(a, e)| (a.clone(), e.lock.clone()))
            .collect();
        for (account, lock) in accounts {
            let _round = lock.lock().await;
            if let Err(e) = self.round(ledger, &account, Round::Release).await {
                tracing::error!(account = %account, "could not return a credit lease at shutdown; it expires after hold_ttl_secs: {e}");
            }
        }
    }
}
