//! Credits on the chat path: the hold before forwarding and the settlement after
//! (DESIGN.md, Rules: Credits).
//!
//! The hold covers the prompt (estimated without the tokenizer) and `max_tokens` for each of
//! `n` completions at the rates of the first candidate; when the balance cannot pay for all of
//! that, `max_tokens` sent upstream is lowered to what it can pay. Each later candidate (after
//! a failover) gets the `max_tokens` the same hold pays for at its own rates, or is skipped when
//! that is not one token per completion ([`Budget`]), so a model the balance can pay is never
//! refused because of a pricier sibling. The settlement charges the actual usage at the rates of
//! the model that served the request.
//!
//! Both go against this instance's credit lease of the account when it has one (in memory, the
//! usage row written in the next batch; [`leases`]), else against the database directly.
//! Inputs are narrow: the stores in a [`Meter`], the request's own facts as arguments; nothing
//! here knows the HTTP request context.
//!
//! # Credit leases: the ledger off the request path
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
//! - One balance: reads of the balance and usage (`/api/v1/me`, `/api/v1/usage`, the admin
//!   view) first write this instance's pending rows, and every instance adds back what each
//!   lease has not spent (its row's amount, reduced by each round's charges), so all show the
//!   same balance, another instance's view stale by at most one round.
//!
//! # Faults
//! - A store that cannot answer fails the hold within `acquire_timeout_ms`: 503 before any
//!   upstream call. A settlement that fails after serving waits in [`unsettled`] and is retried
//!   until it commits.
//! - Through a ledger outage an account with a funded lease keeps being served from it: its
//!   rows wait in the lease (bounded) and go with the first round that commits, exactly once
//!   (a retried batch skips rows already written). The lease stops taking holds when its
//!   row could have expired in the ledger, and a dry lease whose last round failed refuses at
//!   once (503) instead of waiting out the store's timeout.

pub mod charge;
pub mod holds;
pub mod leases;
pub mod legs;
pub mod prompt_only;
pub mod tool;
pub mod unsettled;

use std::sync::Arc;
use std::time::Duration;

use tollgate_filters::credits::{self, size_hold, HoldSize};
use tollgate_filters::route::ModelSpec;
use tollgate_filters::Usage;

use crate::ledger::{Ledger, Settlement, StoreError};
use crate::limits::budgets::Reserved;
use crate::limits::Limiter;
use crate::metrics::Metrics;

/// The stores metering works against.
pub struct Meter<'a> {
    pub ledger: &'a Ledger,
    /// The shared counters: a key's budget is held there beside the balance.
    pub limiter: &'a Limiter,
    pub leases: &'a leases::Leases,
    pub metrics: &'a Metrics,
    /// Settlements that failed after serving, retried until they commit.
    pub unsettled: &'a unsettled::Unsettled,
    /// A hold of its own expires (and the reaper refunds it) after this long.
    pub hold_ttl: Duration,
    /// Events sent to customers: a watched wallet's charge is noticed here.
    pub events: &'a crate::webhooks::Events,
}

/// A placed hold, carried with the request until settlement.
#[derive(Debug, Clone)]
pub struct PlacedHold {
    pub account_id: String,
    pub key_id: String,
    pub held: i64,
    /// The lease the hold was placed against; `None`: a hold row of its own.
    pub lease: Option<Arc<str>>,
}

/// What a placed hold pays for, to size each attempt's `max_tokens` at its model's rates.
#[derive(Debug, Clone, Copy)]
pub struct Budget {
    pub held: i64,
    /// The prompt estimate the hold was sized with.
    pub prompt_tokens: u64,
    /// Completions asked for (`n`).
    pub choices: u64,
}

impl Budget {
    /// The hold a request asking `requested` tokens per completion of `model` needs: the
    /// prompt and every completion at this model's rates.
    pub fn bound(&self, model: &ModelSpec, requested: u64) -> i64 {
        size_hold(
            self.prompt_tokens,
            requested,
            self.choices,
            model.prompt_rate_bound(),
            model.output_micros_per_1k,
        )
        .wanted
    }

    /// The `max_tokens` an attempt at `model` may ask for: `requested` (already capped at the
    /// model's most), lowered to what the hold pays for at this model's rates; `None` when that
    /// is not even one token per completion (skip the model).
    pub fn max_tokens(&self, model: &ModelSpec, requested: u64) -> Option<u64> {
        let size = size_hold(
            self.prompt_tokens,
            requested,
            self.choices,
            model.prompt_rate_bound(),
            model.output_micros_per_1k,
        );
        let t = size.affordable_tokens(self.held, requested);
        (t > 0 && self.held >= size.minimum).then_some(t)
    }
}

/// What placing a hold decided.
#[derive(Debug)]
pub enum Hold {
    Placed {
        hold: PlacedHold,
        budget: Budget,
        /// The balance to show (`X-Credits-Remaining`) after the hold.
        balance: i64,
        /// What the hold holds against its key's budget and its member's cap too.
        reserved: Vec<Reserved>,
    },
    /// Not even the prompt and one output token are affordable (402); the balance when known.
    Refused { balance: Option<i64> },
    /// The key's budget (or its member's cap) cannot pay the prompt and one output token
    /// (402): which, and what is left of it.
    OverBudget {
        left: i64,
        which: crate::limits::budgets::Which,
    },
}

/// Places a hold of `size` for `(request id, account, key)`: against this instance's lease
/// of the account when it can pay, else as a hold row of its own.
pub(super) async fn place(
    meter: &Meter<'_>,
    (request_id, account_id, key_id): (&str, &str, &str),
    size: &HoldSize,
    prompt: u64,
) -> Result<Hold, StoreError> {
    // No service without a durable charge: while the settlements already owed cannot be
    // written, no new request is served on credit.
    if meter.unsettled.full() {
        return Err(StoreError(
            "too many settlements wait for the ledger".into(),
        ));
    }
    let placed = |held: i64, lease: Option<Arc<str>>, balance: i64, at: &str| {
        meter.metrics.credit_holds.with_label_values(&[at]).inc();
        Hold::Placed {
            hold: PlacedHold {
                account_id: account_id.to_owned(),
                key_id: key_id.to_owned(),
                held,
                lease,
            },
            budget: Budget {
                held,
                prompt_tokens: prompt,
                choices: size.choices,
            },
            balance,
            reserved: Vec::new(),
        }
    };
    let undo = leases::Undo(meter.unsettled, meter.metrics);
    if let Some(l) = meter
        .leases
        .hold(meter.ledger, &undo, account_id, size)
        .await?
    {
        return Ok(placed(l.held, Some(l.lease_id), l.balance, "lease"));
    }
    let expires = crate::clock::now_ms() + meter.hold_ttl.as_millis() as i64;
    // Not sent at all while the ledger is known down: nothing to cancel then.
    crate::ledger::breaker::check()?;
    let held = meter
        .ledger
        .hold(request_id, account_id, size, expires)
        .await
        .inspect_err(|_| {
            // It may have committed (a store can report a failed commit that went through):
            // refunded once the ledger answers, not when the reaper finds it expired.
            meter.unsettled.cancel(request_id, meter.metrics);
        })?;
    let leased = leased(meter, account_id).await;
    match held {
        Some((held, balance)) => Ok(placed(held, None, balance + leased, "database")),
        None => {
            let account = meter.ledger.account(account_id).await?;
            Ok(Hold::Refused {
                balance: account.map(|a| a.balance + leased),
            })
        }
    }
}

/// What the account's credit leases have not spent, shown as part of its balance (DESIGN.md,
/// Rules: One balance). Without leases on, there are none to read. Only for what is shown:
/// a read that fails shows this instance's own lease's part.
async fn leased(meter: &Meter<'_>, account_id: &str) -> i64 {
    if !meter.leases.enabled() {
        return 0;
    }
    match meter.ledger.leased(account_id).await {
        Ok(n) => n,
        Err(_) => meter.leases.available(account_id),
    }
}

/// What the request turned out to be, for its usage row.
pub struct Served<'a> {
    pub request_id: &'a str,
    pub model_requested: &'a str,
    pub model_used: Option<&'a str>,
    pub provider: Option<&'a str>,
    pub usage: Usage,
    /// Rates of the model used; `None`: nothing was served, no charge.
    pub rates: Option<credits::Rates>,
    pub status: u16,
    pub latency_ms: i64,
    /// What the hold decided for candidates after the first, if anything.
    pub hold_note: Option<&'a str>,
    /// A resumed stream's legs: charged each at its model's rates instead of `usage` at
    /// `rates` (`usage` is then their sum).
    pub legs: Option<&'a legs::Legs>,
    /// A response cache hit, charged this many millionths of the list price of the reply it
    /// repeats (`usage` at `rates`).
    pub hit: Option<u32>,
}

impl Served<'_> {
    /// What the request costs before the hold's cap: each leg at its rates for a resumed
    /// stream, a cache hit's fraction of its list price, else the usage at the rates of the
    /// model used (nothing when none served).
    pub fn cost(&self) -> i64 {
        match (self.legs, &self.rates, self.hit) {
            (Some(l), _, _) => l.cost(),
            (None, Some(rates), Some(ppm)) => credits::parts_at(self.usage.saturated(), rates)
                .scaled(ppm)
                .total(),
            (None, Some(rates), None) => credits::cost_at(self.usage.saturated(), rates),
            (None, None, _) => 0,
        }
    }
}

/// What a settlement wrote.
#[derive(Debug, Clone, Copy)]
pub struct Written {
    pub charged: i64,
    /// The balance to show after it.
    pub balance: i64,
    /// Metered against this instance's credit lease: its usage row is committed with the next
    /// lease round (`false`: committed to the ledger already).
    pub in_lease: bool,
}

/// Settles a hold: the actual cost of the model used (nothing when no model produced output),
/// one usage row. A cost above the hold (a prompt above its estimate) is charged from the
/// balance as far as it goes, unless `capped` (a key's budget, which the hold stayed within,
/// is a limit on money: charged the hold); what it could not charge is counted, never dropped
/// silently. `None` when the ledger failed: the settlement then waits in [`unsettled`] and is
/// retried until it commits.
pub async fn settle(
    meter: &Meter<'_>,
    hold: PlacedHold,
    served: &Served<'_>,
    capped: bool,
) -> Option<Written> {
    let cost = served.cost();
    let model = served.model_used.unwrap_or_default();
    if cost > hold.held {
        meter
            .metrics
            .usage_over_hold
            .with_label_values(&[model])
            .inc();
    }
    let owed = if capped { cost.min(hold.held) } else { cost };
    // No model reads or writes four billion tokens in one request; a count above that (only a
    // hostile upstream sends one) is stored as that, so that usage sums cannot overflow.
    let count = |n: u64| i64::from(u32::try_from(n).unwrap_or(u32::MAX));
    let s = Settlement {
        hold_id: served.request_id.to_owned(),
        request_id: served.request_id.to_owned(),
        account_id: hold.account_id.clone(),
        key_id: Some(hold.key_id.clone()),
        model_requested: served.model_requested.to_owned(),
        model_used: served.model_used.map(str::to_owned),
        provider: served.provider.map(str::to_owned),
        prompt_tokens: count(served.usage.prompt_tokens),
        completion_tokens: count(served.usage.completion_tokens),
        cost: owed,
        status: i64::from(if served.status == 0 {
            200
        } else {
            served.status
        }),
        latency_ms: served.latency_ms,
        now_ms: crate::clock::now_ms(),
        hold_note: served.hold_note.map(str::to_owned),
        tool: None,
        saving: saving(served, cost),
    };
    let written = write(meter, hold, s).await;
    if let Some(w) = written.filter(|w| w.charged < cost) {
        uncharged(meter, served.request_id, model, cost, w.charged);
    }
    written
}

/// What a request saved against list price: a cache hit its list price less its `cost`, any
/// other what its provider's cache reads took off (a resumed stream's legs: nothing counted).
fn saving(served: &Served<'_>, cost: i64) -> crate::ledger::Saving {
    let (Some(rates), None) = (&served.rates, served.legs) else {
        return crate::ledger::Saving::default();
    };
    let usage = served.usage.saturated();
    match served.hit {
        Some(_) => crate::ledger::Saving {
            cache_hit: true,
            credits: (credits::cost_at(usage, rates) - cost).max(0),
        },
        None => crate::ledger::Saving {
            cache_hit: false,
            credits: credits::cache_read_saving(usage, rates),
        },
    }
}

/// Served usage the balance could not pay: counted and logged with its request.
fn uncharged(meter: &Meter<'_>, request_id: &str, model: &str, cost: i64, charged: i64) {
    let short = cost - charged;
    meter
        .metrics
        .credits_uncharged
        .with_label_values(&[model])
        .inc_by(u64::try_from(short).unwrap_or(0));
    tracing::warn!(
        request_id,
        model,
        cost,
        charged,
        uncharged = short,
        "the balance could not pay all of a request's usage; the rest is uncharged"
    );
}

/// Writes a settlement: into the hold's lease (its usage row goes with the next round), or to
/// the database. `None` when the ledger failed: the
/// settlement is queued and retried until it commits (a hold the reaper refunds meanwhile
/// counts as 0 there, so the charge comes from the balance: never twice, never dropped).
pub(super) async fn write(meter: &Meter<'_>, hold: PlacedHold, s: Settlement) -> Option<Written> {
    let s = match &hold.lease {
        Some(lease) => match meter.leases.settle(lease, hold.held, s) {
            Ok((charged, balance)) => {
                return Some(Written {
                    charged,
                    balance,
                    in_lease: true,
                })
            }
            // The lease is gone (refunded by the reaper): its money is back in the balance,
            // so charge the balance directly.
            Err(s) => *s,
        },
        None => s,
    };
    // Boxed: under a lease this is rare, and the statement's future unboxed would make every
    // request's future ~1.7 KB larger, copied at each call level.
    Box::pin(write_direct(meter, s)).await
}

/// A settlement written to the database, not to a lease.
async fn write_direct(meter: &Meter<'_>, s: Settlement) -> Option<Written> {
    match meter.ledger.settle(&s).await {
        Ok(done) => Some(Written {
            charged: done.charged,
            balance: done.balance + leased(meter, &s.account_id).await,
            in_lease: false,
        }),
        Err(e) => {
            tracing::error!(request_id = %s.request_id, "settlement failed: {e}");
            meter.unsettled.push(s, meter.metrics);
            None
        }
    }
}
