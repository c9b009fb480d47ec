//! One request's charge, owned from the hold to the settlement (DESIGN.md, Rules: Credits): the
//! placed hold with what it pays for, grown before a failover to a pricier candidate, and the
//! decisions it made for the usage row; settled once, by value, so it cannot be settled twice.
//! The request keeps it in its context's one metered slot; the pipeline settles it, and the
//! logging hook settles what a dropped future left.

use tollgate_filters::route::ModelSpec;

use super::{settle, top_up, Budget, Meter, PlacedHold, Served, Written};

#[derive(Debug)]
pub struct Charge {
    hold: PlacedHold,
    budget: Budget,
    /// What the hold decided for candidates after the first (topped up, lowered, skipped),
    /// `; `-joined, for the usage row.
    note: Option<String>,
}

impl Charge {
    pub fn new(hold: PlacedHold, budget: Budget) -> Charge {
        Charge {
            hold,
            budget,
            note: None,
        }
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
        if later && bound > self.budget.held {
            match top_up(meter, &mut self.hold, request_id, bound - self.budget.held).await {
                Ok(true) => {
                    self.budget.held = self.hold.held;
                    self.note(format!("{}: hold topped up", model.id));
                    return Some(requested);
                }
                Ok(false) => {}
                Err(e) => tracing::warn!(request_id, "could not top the hold up: {e}"),
            }
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
        let note = self.note;
        served.hold_note = note.as_deref();
        settle(meter, self.hold, &served).await
    }
}
