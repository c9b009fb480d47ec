//! The rounds of credit leases that are not a request's own: the background round over every
//! lease, and the reads that write this instance's pending rows first (`me`, usage, admin).

use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Instant;

use tokio::sync::OwnedMutexGuard;

use super::lease::Round;
use super::{locked, Leases};
use crate::ledger::{Ledger, StoreError};

impl Leases {
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
                    let lease = e.lease.as_ref()?;
                    let kind = lease.due(now, self.idle, self.renew)?;
                    // An idle lease is not returned while the ledger is known down: the return
                    // could not commit, and a lease on its way out takes no more holds, so an
                    // account whose requests were slowed by the outage would lose the lease
                    // that was to carry it through.
                    if kind == Round::Release && !lease.closing && crate::ledger::breaker::is_open()
                    {
                        return None;
                    }
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

    /// Writes every lease's pending rows now: a developer's earnings come from other accounts'
    /// calls, so a read of them must not wait for the next round.
    pub async fn flush_all(&self, ledger: &Ledger) -> Result<(), StoreError> {
        let accounts: Vec<String> = locked(&self.accounts)
            .iter()
            .filter(|(_, e)| e.lease.as_ref().is_some_and(|l| !l.pending.is_empty()))
            .map(|(a, _)| a.clone())
            .collect();
        for a in accounts {
            drop(self.round_now(ledger, &a, Round::Flush).await?);
        }
        Ok(())
    }

    /// Settlements metered against this instance's leases and not yet written.
    pub fn pending_rows(&self) -> usize {
        locked(&self.accounts)
            .values()
            .filter_map(|e| e.lease.as_ref())
            .map(|l| l.pending.len())
            .sum()
    }

    /// What this instance's lease of the account has not yet held (0 without a lease).
    pub fn available(&self, account: &str) -> i64 {
        locked(&self.accounts)
            .get(account)
            .and_then(|e| e.lease.as_ref())
            .map_or(0, |l| l.available)
    }
}

/// Shutdown: the last rounds return every lease.
impl Leases {
    /// Shutdown begins: no new leases or holds on them; every lease is returned by the next
    /// round after its holds in flight have settled (their usage rows written first).
    pub fn close_all(&self) {
        self.shutting_down.store(true, Ordering::SeqCst);
        for e in locked(&self.accounts).values_mut() {
            if let Some(l) = e.lease.as_mut() {
                l.closing = true;
            }
        }
    }

    /// Whether this instance still holds any lease.
    pub fn is_empty(&self) -> bool {
        locked(&self.accounts).values().all(|e| e.lease.is_none())
    }
}
