//! Events sent to customers (outbound webhooks): an account or organization registers
//! endpoints and chooses events ([`api`]); what happens on the request path is noticed with
//! one cheap call and checked off it ([`detect`]); each event is written once to the ledger
//! and delivered, signed, in order per endpoint, retried with backoff ([`deliver`]); an
//! endpoint's address is checked against the SSRF rule at registration and again at each
//! delivery ([`target`]).
//!
//! The request path pays an in-memory lookup: each instance keeps the set of wallets that have
//! an enabled endpoint ([`Events::watching`]), refreshed every `poll_interval_ms` and at once
//! when this instance changes an endpoint. Only a watched wallet's charge sends a notice, over
//! a bounded channel that drops (and counts) rather than waits.

pub mod api;
pub mod deliver;
pub mod detect;
pub mod target;

use std::collections::HashSet;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Mutex, RwLock};

use prometheus::{IntCounter, IntCounterVec, Opts, Registry};
use serde_json::{json, Value};
use tokio::sync::mpsc;
use tollgate_filters::budget::Period;
use tollgate_filters::mcp::ServiceState;

use crate::ledger::webhooks::NewEvent;
use crate::ledger::{Ledger, StoreError};

/// What the request path noticed, for [`detect`] to check off it.
#[derive(Debug)]
pub enum Notice {
    /// A charge of a watched wallet counted against a key's budget or a member's cap
    /// (`ident`: the counters' name, `{key}:{start}` or `member:{org}:{account}:{start}`) and
    /// crossed `percents` of it.
    Budget {
        wallet: String,
        ident: String,
        cap: i64,
        period: Period,
        spent: i64,
        percents: Vec<i64>,
    },
    /// A watched wallet was charged: its balance may have fallen below a threshold.
    Balance { wallet: String },
    /// A Stripe event was applied: what it granted is read from the ledger.
    Payment { stripe_event: String },
    /// The operator moved a tool server.
    ToolServer {
        owner: String,
        slug: String,
        from: String,
        to: String,
        at: i64,
    },
}

/// The per-instance side of the events: which wallets are watched, and the channel to
/// [`detect`].
pub struct Events {
    watched: RwLock<HashSet<String>>,
    /// Set when this instance changed an endpoint: the cache is read again at the next poll.
    stale: AtomicBool,
    tx: mpsc::Sender<Notice>,
    rx: Mutex<Option<mpsc::Receiver<Notice>>>,
    pub dropped: IntCounter,
    pub deliveries: IntCounterVec,
}

impl Events {
    pub fn new(capacity: usize, registry: &Registry) -> Events {
        let (tx, rx) = mpsc::channel(capacity.max(1));
        // Static definitions, registered once at start: they cannot fail.
        let dropped = IntCounter::new(
            "tollgate_webhook_notices_dropped_total",
            "Events to customers not checked because the queue off the request path was full",
        )
        .expect("static metric definition");
        let deliveries = IntCounterVec::new(
            Opts::new(
                "tollgate_webhook_deliveries_total",
                "Delivery attempts to customers' endpoints, by outcome: delivered, retried, failed",
            ),
            &["outcome"],
        )
        .expect("static metric definition");
        registry
            .register(Box::new(dropped.clone()))
            .expect("unique metric");
        registry
            .register(Box::new(deliveries.clone()))
            .expect("unique metric");
        Events {
            watched: RwLock::default(),
            stale: AtomicBool::new(true),
            tx,
            rx: Mutex::new(Some(rx)),
            dropped,
            deliveries,
        }
    }

    /// Whether `wallet` has an enabled endpoint (as of the last refresh): the request path's
    /// one question.
    pub fn watching(&self, wallet: &str) -> bool {
        self.watched
            .read()
            .map(|w| !w.is_empty() && w.contains(wallet))
            .unwrap_or(false)
    }

    /// `wallet`, owned, when it is watched (a charge's notices need it after the hold is
    /// gone); `None`, and nothing allocated, for every other wallet.
    pub fn watched_wallet(&self, wallet: &str) -> Option<String> {
        self.watching(wallet).then(|| wallet.to_owned())
    }

    /// A watched wallet's charge was counted against a budget (`subject`: the counters' name,
    /// the cap, the period), which has `spent` now: the percentages it crossed are noticed.
    pub fn budget_counted(
        &self,
        wallet: &str,
        (ident, cap, period): (String, i64, Period),
        spent: i64,
        charged: i64,
    ) {
        let percents = tollgate_filters::webhook::crossed(spent - charged, spent, cap);
        if !percents.is_empty() {
            self.notify(Notice::Budget {
                wallet: wallet.to_owned(),
                ident,
                cap,
                period,
                spent,
                percents,
            });
        }
    }

    /// A watched wallet was charged: its balance is checked against its thresholds.
    pub fn charged(&self, wallet: &str) {
        self.notify(Notice::Balance {
            wallet: wallet.to_owned(),
        });
    }

    /// A Stripe event was applied to `account`: what it granted is sent when it is watched.
    pub fn payment_applied(&self, account: &str, stripe_event: &str) {
        if self.watching(account) {
            self.notify(Notice::Payment {
                stripe_event: stripe_event.to_owned(),
            });
        }
    }

    /// The operator moved tool server `slug` of developer `owner` at `at` (ms).
    pub fn tool_server_moved(
        &self,
        owner: &str,
        slug: &str,
        (from, to): (ServiceState, ServiceState),
        at: i64,
    ) {
        if self.watching(owner) {
            self.notify(Notice::ToolServer {
                owner: owner.to_owned(),
                slug: slug.to_owned(),
                from: from.as_str().to_owned(),
                to: to.as_str().to_owned(),
                at,
            });
        }
    }

    /// Hands `n` to the checks off the request path; dropped and counted when they are
    /// behind.
    pub fn notify(&self, n: Notice) {
        if self.tx.try_send(n).is_err() {
            self.dropped.inc();
        }
    }

    /// The receiving end, taken once by the background service.
    pub fn take_receiver(&self) -> Option<mpsc::Receiver<Notice>> {
        self.rx.lock().ok()?.take()
    }

    /// This instance changed an endpoint: read the watched wallets again soon.
    pub fn changed(&self, wallet: &str) {
        if let Ok(mut w) = self.watched.write() {
            w.insert(wallet.to_owned());
        }
        self.stale.store(true, Ordering::Relaxed);
    }

    /// The watched wallets, as of the last refresh.
    pub fn watched(&self) -> Vec<String> {
        self.watched
            .read()
            .map(|w| w.iter().cloned().collect())
            .unwrap_or_default()
    }

    /// Reads the watched wallets from the ledger.
    pub async fn refresh(&self, ledger: &Ledger) -> Result<(), StoreError> {
        self.stale.store(false, Ordering::Relaxed);
        let set: HashSet<String> = ledger.watched_wallets().await?.into_iter().collect();
        if let Ok(mut w) = self.watched.write() {
            *w = set;
        }
        Ok(())
    }
}

/// A new event id, `evt_` and random characters.
pub fn event_id() -> Result<String, StoreError> {
    crate::auth::random_id(24)
        .map(|r| format!("evt_{r}"))
        .map_err(|e| StoreError(e.to_string()))
}

/// Writes one event for `wallet` (once by `dedupe`), with a delivery to each of its enabled
/// endpoints that chose `event_type`, or to `only` that endpoint. Nothing is written when no
/// endpoint wants it. The event's id when this call wrote it.
pub async fn emit(
    ledger: &Ledger,
    wallet: &str,
    event_type: &str,
    dedupe: &str,
    data: Value,
    only: Option<&str>,
) -> Result<Option<String>, StoreError> {
    let endpoints = ledger.endpoints(wallet).await?;
    let chosen: Vec<&crate::ledger::webhooks::Endpoint> = endpoints
        .iter()
        .filter(|e| match only {
            Some(id) => e.id == id,
            None => e.enabled && e.wants(event_type),
        })
        .collect();
    let Some(first) = chosen.first() else {
        return Ok(None);
    };
    let id = event_id()?;
    let now = crate::clock::now_ms();
    let owner = if first.is_org {
        "organization_id"
    } else {
        "account_id"
    };
    let mut body = json!({"id": id, "type": event_type, "created": now / 1000});
    body[owner] = wallet.into();
    body["data"] = data;
    let ev = NewEvent {
        id,
        wallet_id: wallet.to_owned(),
        event_type: event_type.to_owned(),
        dedupe: dedupe.to_owned(),
        payload: body.to_string(),
        created_at: now,
    };
    let ids: Vec<String> = chosen.iter().map(|e| e.id.clone()).collect();
    Ok(ledger.write_event(&ev, &ids).await?.then_some(ev.id))
}
