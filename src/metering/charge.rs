//! One request's charge, owned from the hold to the settlement (DESIGN.md, Rules: Credits): the
//! placed hold with what it pays for, grown before a failover to a pricier candidate, and the
//! decisions it made for the usage row; settled once, by value, so it cannot be settled twice.
//! A model request keeps it in its context's one metered slot; the pipeline settles it, and the
//! proxy, after the handler, settles what a dropped future left. A tool call's is its call's
//! own, settled by [`Charge::settle_tool`]; both settle the key's budget in one place.

use tollgate_filters::route::ModelSpec;

use super::tool::{self, ToolCall};
use super::{settle, Budget, Meter, PlacedHold, Served, Written};
use crate::ledger::StoreError;
use crate::limits::budgets::Reserved;
use crate::limits::tokens::Counted;

#[derive(Debug)]
pub struct Charge {
    hold: PlacedHold,
    budget: Budget,
    /// What the hold holds against its key's budget and its member's cap (the same amount,
    /// or less).
    reserved: Vec<Reserved>,
    /// The tokens counted against tokens-per-minute limits at admission (an estimate).
    tokens: Option<Counted>,
    /// What the hold decided for candidates after the first (topped up, lowered, skipped),
    /// `; `-joined, for the usage row.
    note: Option<String>,
}

impl Charge {
    pub fn new(hold: PlacedHold, budget: Budget) -> Charge {
        Charge {
            hold,
            budget,
            reserved: Vec::new(),
            tokens: None,
            note: None,
        }
    }

    /// The charge also holds `reserved` of its key's budget and member's cap, settled with it.
    pub fn within(mut self, reserved: Vec<Reserved>) -> Charge {
        self.reserved = reserved;
        self
    }

    /// The charge's tokens were counted against tokens per minute: corrected at settlement.
    pub fn counting(mut self, tokens: Option<Counted>) -> Charge {
        self.tokens = tokens;
        self
    }

    /// Tops the hold up by `by`, its reservation of the key's budget grown first: true when
    /// the hold grew (noted as `note` says). When the budget would not grow nothing moves; when
    /// the hold did not grow, neither does what it holds of the budget.
    async fn grow(
        &mut self,
        meter: &Meter<'_>,
        request_id: &str,
        by: i64,
        note: impl FnOnce() -> String,
    ) -> bool {
        if !self.grow_reserved(meter, self.budget.held + by).await {
            return false;
        }
        match top_up(meter, &mut self.hold, request_id, by).await {
            Ok(true) => {
                self.budget.held = self.hold.held;
                self.note(note());
                return true;
            }
            Ok(false) => {}
            Err(e) => tracing::warn!(request_id, "could not top the hold up: {e}"),
        }
        let held = self.hold.held;
        for r in self.reserved.iter_mut().filter(|r| r.amount > held) {
            meter
                .limiter
                .budgets
                .resize(&meter.limiter.counters(), r, held)
                .await;
        }
        false
    }

    /// The `max_tokens` an attempt at `model` sends (always sent, so that nothing but the hold
    /// bounds what the provider may bill): `requested` (already capped at the model's most),
    /// when the hold pays for it at this model's rates. A later candidate whose bound is higher
    /// first has the hold topped up to that bound; failing that, `max_tokens` is lowered to
    /// what the hold pays for, and `None` skips a model the hold cannot buy one token per
    /// completion of. Each such decision is noted for the usage row.
    pub async fn size_attempt(
        &mut self,
        meter: &Meter<'_>,
        request_id: &str,
        model: &ModelSpec,
        requested: u64,
        later: bool,
    ) -> Option<u64> {
        let bound = self.budget.bound(model, requested);
        if later
            && bound > self.budget.held
            && self
                .grow(meter, request_id, bound - self.budget.held, || {
                    format!("{}: hold topped up", model.id)
                })
                .await
        {
            return Some(requested);
        }
        let t = self.budget.max_tokens(model, requested);
        match t {
            Some(t) if t < requested => {
                self.note(format!("{}: max_tokens lowered to {t}", model.id));
            }
            None => self.note(format!(
                "{}: skipped, the hold cannot pay one token",
                model.id
            )),
            Some(_) => {}
        }
        t
    }

    /// The `max_tokens` a resumed stream's continuation at `model` sends: `requested`, when
    /// what the hold has left after the legs so far (`spent`) pays for it, the continuation's
    /// prompt being the request's and the partial answer (`partial_tokens`); the hold is
    /// topped up first when it falls short, and `None` skips a model the hold cannot buy one
    /// token of (the resume is then not made on it). Noted for the usage row.
    pub async fn size_continuation(
        &mut self,
        meter: &Meter<'_>,
        request_id: &str,
        model: &ModelSpec,
        requested: u64,
        (spent, partial_tokens): (i64, u64),
    ) -> Option<u64> {
        let (prompt_tokens, choices) = (
            self.budget.prompt_tokens.saturating_add(partial_tokens),
            self.budget.choices,
        );
        let left = move |held: i64| Budget {
            held: held - spent,
            prompt_tokens,
            choices,
        };
        let bound = left(self.budget.held).bound(model, requested);
        let short = bound - left(self.budget.held).held;
        if short > 0
            && self
                .grow(meter, request_id, short, || {
                    format!("{}: hold topped up for the continuation", model.id)
                })
                .await
        {
            return Some(requested);
        }
        let t = left(self.budget.held).max_tokens(model, requested);
        match t {
            Some(t) if t < requested => self.note(format!(
                "{}: continuation max_tokens lowered to {t}",
                model.id
            )),
            None => self.note(format!(
                "{}: no continuation, the hold cannot pay one token",
                model.id
            )),
            Some(_) => {}
        }
        t
    }

    /// Grows what the charge holds of its key's budget and member's cap to `to` before the
    /// hold grows; false when one has not that much left (then none grew, and the hold stays
    /// as it is).
    async fn grow_reserved(&mut self, meter: &Meter<'_>, to: i64) -> bool {
        let (budgets, counters) = (&meter.limiter.budgets, meter.limiter.counters());
        for i in 0..self.reserved.len() {
            let was = self.reserved[i].amount;
            if budgets.resize(&counters, &mut self.reserved[i], to).await {
                continue;
            }
            for r in &mut self.reserved[..i] {
                budgets.resize(&counters, r, was).await;
            }
            return false;
        }
        true
    }

    fn note(&mut self, what: String) {
        match &mut self.note {
            Some(n) => {
                n.push_str("; ");
                n.push_str(&what);
            }
            None => self.note = Some(what),
        }
    }

    /// Settles the hold to what was served (its usage row carries this charge's notes).
    /// `None` when the ledger failed (the settlement then waits to be retried: see
    /// `unsettled`).
    pub async fn settle(self, meter: &Meter<'_>, mut served: Served<'_>) -> Option<Written> {
        // A resumed stream's usage row tells its legs after the hold's decisions.
        let note = match (self.note, served.legs) {
            (n, None) => n,
            (None, Some(l)) => Some(l.note()),
            (Some(n), Some(l)) => Some(format!("{n}; {}", l.note())),
        };
        served.hold_note = note.as_deref();
        // A key's budget caps the charge at the hold (it is the key's limit on money); else
        // what the settlement charges when it cannot say: the cost, owed and retried until
        // written.
        let capped = !self.reserved.is_empty();
        let owed = match capped {
            true => served.cost().min(self.hold.held),
            false => served.cost(),
        };
        let account = served.legs.map(|_| self.hold.account_id.clone());
        let watched = meter.events.watched_wallet(&self.hold.account_id);
        let written = settle(meter, self.hold, &served, capped).await;
        if let (Some(legs), Some(account)) = (served.legs, account) {
            let rows = legs.rows(served.request_id, &account, crate::clock::now_ms());
            if let Err(e) = meter.ledger.write_legs(&rows).await {
                // The charge is written (or queued) with the usage row; only its breakdown by
                // leg is lost.
                tracing::warn!(request_id = %served.request_id, "could not write the legs of a resumed stream: {e}");
            }
        }
        let used = i64::try_from(served.usage.total()).unwrap_or(i64::MAX);
        let limits = (self.reserved, self.tokens);
        settle_limits(meter, limits, written, (owed, used), watched.as_deref()).await;
        written
    }

    /// Settles a tool call's charge: the call's price and its developer's share when it
    /// `succeeded`, else nothing (`tool::settle`); then its key's budget, as every charge's.
    pub async fn settle_tool(
        self,
        meter: &Meter<'_>,
        call: &ToolCall<'_>,
        succeeded: bool,
        status: u16,
        latency_ms: i64,
    ) -> Option<Written> {
        // What the budget is owed while the settlement waits for the ledger: the price held.
        let owed = match (self.reserved.first(), succeeded) {
            (Some(r), true) => r.amount,
            _ => 0,
        };
        let watched = meter.events.watched_wallet(&self.hold.account_id);
        let written = tool::settle(meter, self.hold, call, succeeded, status, latency_ms).await;
        let limits = (self.reserved, self.tokens);
        settle_limits(meter, limits, written, (owed, 0), watched.as_deref()).await;
        written
    }
}

/// The one settlement of a charge's limits: what it holds of its key's budget and member's
/// cap becomes what was charged (`owed` while the settlement waits for the ledger: it is owed, and counted),
/// and its tokens-per-minute estimate becomes the `used` tokens. A `watched` wallet's
/// charge is noticed for the events sent to customers (budgets crossed, the balance).
async fn settle_limits(
    meter: &Meter<'_>,
    (reserved, tokens): (Vec<Reserved>, Option<Counted>),
    written: Option<Written>,
    (owed, used): (i64, i64),
    watched: Option<&str>,
) {
    let charged = written.map_or(owed, |w| w.charged);
    for r in reserved {
        let subject = watched
            .map(|_| r.subject())
            .map(|(i, c, p)| (i.to_owned(), c, p));
        let spent = meter
            .limiter
            .budgets
            .settle(&meter.limiter.counters(), r, charged)
            .await;
        if let (Some(w), Some(s), Some(spent)) = (watched, subject, spent) {
            meter.events.budget_counted(w, s, spent, charged);
        }
    }
    if let Some(w) = watched {
        meter.events.charged(w);
    }
    if let Some(t) = tokens {
        meter
            .limiter
            .tokens
            .settle(&meter.limiter.counters(), t, used)
            .await;
    }
}

/// Grows a placed hold by `extra` (before a failover to a model whose bound is higher): from
/// its lease, topped up from the balance when short, or in the database. Returns whether it
/// grew; when not, nothing changed.
async fn top_up(
    meter: &Meter<'_>,
    hold: &mut PlacedHold,
    request_id: &str,
    extra: i64,
) -> Result<bool, StoreError> {
    let account = &hold.account_id;
    let grown = match &hold.lease {
        Some(lease) => {
            meter
                .leases
                .grow(meter.ledger, account, lease, extra)
                .await?
        }
        None => {
            let now = crate::clock::now_ms();
            meter
                .ledger
                .top_up_hold(request_id, account, extra, now)
                .await?
        }
    };
    if grown {
        hold.held += extra;
        meter
            .metrics
            .credit_holds
            .with_label_values(&["top_up"])
            .inc();
    }
    Ok(grown)
}
