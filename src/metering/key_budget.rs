//! A keyed hold within the key's budget (issue 29): the budget is reserved first (in the
//! shared counters, `limits/budgets.rs`), so the hold takes no more than is left of it, and
//! the 402 of a key whose budget is spent.

use tollgate_filters::budget::Period;
use tollgate_filters::credits::{format_credits, HoldSize};

use super::{Hold, Meter};
use crate::ledger::StoreError;
use crate::limits::budgets::{self, Reservation};

/// [`super::place`] for a key with a budget (µcr per period): the key's budget first, so that the
/// hold takes no more than is left of it (concurrent requests cannot overrun it), then no
/// more than the balance has.
pub async fn place(
    meter: &Meter<'_>,
    who: (&str, &str, &str),
    mut size: HoldSize,
    prompt: u64,
    budget: Option<(i64, Period)>,
) -> Result<Hold, StoreError> {
    let Some((cap, period)) = budget else {
        return super::place(meter, who, &size, prompt).await;
    };
    let ask = budgets::Ask {
        key_id: who.2,
        cap,
        period,
        request_id: who.0,
        want: size.wanted,
        minimum: size.minimum,
        expires_at: crate::clock::now_ms() + meter.hold_ttl.as_millis() as i64,
    };
    let budgets = &meter.limiter.budgets;
    let mut reserved = match budgets.reserve(meter.limiter, meter.ledger, &ask).await {
        Ok(Reservation::Granted(r)) => r,
        Ok(Reservation::Refused { left }) => return Ok(Hold::OverBudget { left }),
        Err(e) => return Err(StoreError(format!("key budget counters: {}", e.0))),
    };
    size.wanted = reserved.amount;
    match super::place(meter, who, &size, prompt).await {
        Ok(Hold::Placed {
            hold,
            budget,
            balance,
            ..
        }) => {
            if hold.held < reserved.amount {
                budgets
                    .resize(meter.limiter, &mut reserved, hold.held)
                    .await;
            }
            Ok(Hold::Placed {
                hold,
                budget,
                balance,
                reserved: Some(reserved),
            })
        }
        other => {
            budgets.settle(meter.limiter, reserved, 0).await;
            other
        }
    }
}

/// The 402 of a key whose budget cannot pay a request's prompt and one output token: the
/// budget, what is left of it and when it starts over.
pub fn over_budget(budget: Option<(i64, Period)>, left: i64) -> tollgate_filters::GatewayError {
    let (cap, period) = budget.unwrap_or((0, Period::Lifetime));
    let resets = match period.next(crate::clock::now_ms()) {
        Some(at) => format!(
            "; it resets at {}",
            tollgate_filters::time::http_date(at.div_euclid(1000))
        ),
        None => "; it is a lifetime budget and does not reset".into(),
    };
    let per = match period {
        Period::Lifetime => String::new(),
        p => format!(" per {}", p.as_str()),
    };
    tollgate_filters::GatewayError::new(
        tollgate_filters::ErrorKind::InsufficientCredits,
        format!(
            "this key's budget of {} credits{per} cannot pay for this request ({} credits left){resets}",
            format_credits(cap),
            format_credits(left.max(0)),
        ),
    )
}
