//! Settlements that failed after their request was served (DESIGN.md, Rules: Faults): kept in
//! memory and retried until they commit, never dropped. The answer already went out, so the
//! charge is owed; leaving the hold to expire (what this replaced) refunded it and served the
//! request for free.
//!
//! Holds whose write reported an error wait here too, to be cancelled: a store can commit and
//! still report a failure (SQLite when its checkpoint fails on a full disk, Postgres when the
//! acknowledgement of a commit is lost), and such a hold would keep the account's money until
//! the reaper found it expired, minutes later. Cancelling a hold that was never written
//! changes nothing.
//!
//! A retry is exactly-once: the usage row's request id is unique, and a settlement whose row is
//! already there (a commit whose acknowledgement was lost) is not written again. Only the
//! background retry pass takes from the queue, one settlement at a time, so no two retries of
//! one settlement ever race. Past `max` waiting, new metered requests are refused (503) until
//! the queue drains: no service without a durable charge.

use std::collections::VecDeque;
use std::sync::Mutex;

use tollgate_filters::credits::to_credits;

use crate::ledger::{Ledger, Settlement, StoreError};
use crate::metrics::Metrics;

pub struct Unsettled {
    queue: Mutex<VecDeque<Owed>>,
    max: usize,
}

/// What the ledger still has to be told.
#[derive(Debug, Clone)]
pub enum Owed {
    /// A settlement of a request that was served.
    Settle(Box<Settlement>),
    /// A hold (or a credit lease's row) whose write reported an error: refund it if it exists.
    Cancel(String),
}

impl Unsettled {
    pub fn new(max: usize) -> Unsettled {
        Unsettled {
            queue: Mutex::new(VecDeque::new()),
            max: max.max(1),
        }
    }

    fn locked(&self) -> std::sync::MutexGuard<'_, VecDeque<Owed>> {
        // Settlements are only pushed and popped whole: a panic elsewhere cannot leave the
        // queue half-changed, so keep using it.
        self.queue.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Queues a settlement whose write failed; the next retry pass writes it.
    pub fn push(&self, s: Settlement, metrics: &Metrics) {
        tracing::warn!(
            request_id = %s.request_id,
            account_id = %s.account_id,
            cost_micros = s.cost,
            "settlement failed after serving; queued, will be charged when the ledger answers"
        );
        self.push_owed(Owed::Settle(Box::new(s)), metrics);
    }

    /// Queues the cancellation of a hold whose write reported an error (it may have committed).
    pub fn cancel(&self, hold_id: &str, metrics: &Metrics) {
        self.push_owed(Owed::Cancel(hold_id.to_owned()), metrics);
    }

    fn push_owed(&self, owed: Owed, metrics: &Metrics) {
        let mut q = self.locked();
        q.push_back(owed);
        set_gauge(metrics, q.len());
    }

    pub fn len(&self) -> usize {
        self.locked().len()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Whether new metered requests must wait: the queue is at its bound.
    pub fn full(&self) -> bool {
        self.len() >= self.max
    }

    /// One pass: each waiting settlement once, oldest first. Stops at the first store error
    /// (the store is still down; the rest wait for the next pass). Returns how many were
    /// written (or found written). Cancellation-safe: an entry leaves the queue only after
    /// its write committed (only this pass takes from the front; pushes go to the back), so a
    /// pass cut short at shutdown loses nothing.
    pub async fn retry(&self, ledger: &Ledger, metrics: &Metrics) -> Result<usize, StoreError> {
        let mut done = 0;
        loop {
            let Some(owed) = self.locked().front().cloned() else {
                break;
            };
            let written = match &owed {
                Owed::Cancel(id) => ledger.cancel_hold(id).await.map(|refunded| {
                    if refunded {
                        tracing::warn!(hold = %id, "refunded a hold whose write had reported an error");
                    }
                }),
                Owed::Settle(s) => ledger.settle_once(s).await.map(|written| {
                    let result = match written {
                        Some(w) => {
                            tracing::info!(
                                request_id = %s.request_id,
                                account_id = %s.account_id,
                                charged_micros = w.charged,
                                "queued settlement committed: charged"
                            );
                            "committed"
                        }
                        None => "already",
                    };
                    metrics.settlement_retries.with_label_values(&[result]).inc();
                }),
            };
            if let Err(e) = written {
                metrics
                    .settlement_retries
                    .with_label_values(&["failed"])
                    .inc();
                return Err(e);
            }
            let mut q = self.locked();
            q.pop_front();
            set_gauge(metrics, q.len());
            done += 1;
        }
        Ok(done)
    }

    /// At shutdown, after the last retry: every settlement still waiting is logged with its
    /// amounts, so an operator can charge it by hand (the process is going; memory goes too).
    pub fn log_unwritten(&self) {
        for owed in self.locked().iter() {
            let s = match owed {
                Owed::Settle(s) => s,
                Owed::Cancel(id) => {
                    tracing::error!(hold = %id, "hold NOT cancelled at shutdown: the reaper refunds it when it expires");
                    continue;
                }
            };
            tracing::error!(
                request_id = %s.request_id,
                account_id = %s.account_id,
                key_id = s.key_id.as_deref().unwrap_or(""),
                model_used = s.model_used.as_deref().unwrap_or(""),
                prompt_tokens = s.prompt_tokens,
                completion_tokens = s.completion_tokens,
                cost_credits = to_credits(s.cost),
                "settlement NOT written at shutdown: the ledger did not answer; charge it by hand"
            );
        }
    }
}

fn set_gauge(metrics: &Metrics, n: usize) {
    metrics
        .ledger_queued
        .with_label_values(&["settlements"])
        .set(n as i64);
}

#[cfg(test)]
mod tests {
    use super::*;

    fn settlement(id: &str) -> Settlement {
        Settlement {
            hold_id: id.into(),
            request_id: id.into(),
            account_id: "usr".into(),
            key_id: None,
            model_requested: "m".into(),
            model_used: None,
            provider: None,
            prompt_tokens: 0,
            completion_tokens: 0,
            cost: 5,
            status: 200,
            latency_ms: 0,
            now_ms: 0,
            hold_note: None,
            saving: Default::default(),
            tool: None,
        }
    }

    #[test]
    fn the_queue_is_bounded_and_counted() {
        let metrics = Metrics::new();
        let q = Unsettled::new(2);
        assert!(q.is_empty() && !q.full());
        q.push(settlement("a"), &metrics);
        q.cancel("h", &metrics);
        assert!(q.full(), "at its bound: new metered requests are refused");
        let gauge = metrics
            .ledger_queued
            .with_label_values(&["settlements"])
            .get();
        assert_eq!((q.len(), gauge), (2, 2));
        // Past the bound nothing owed is dropped: a request already served still queues.
        q.push(settlement("b"), &metrics);
        assert_eq!(q.len(), 3);
    }
}
