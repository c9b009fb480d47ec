//! Placing a keyed request's hold: a chat request's sized for its first candidate
//! ([`hold`]), within the key's budget when it has one ([`place`]: the budget is reserved
//! first, in the shared counters of `limits/budgets.rs`, so the hold takes no more than is
//! left of it), and the 402 of a key whose budget is spent ([`over_budget`]).

use tollgate_filters::budget::Period;
use tollgate_filters::credits::{format_credits, HoldSize};

use tollgate_filters::credits::{self, size_hold};
use tollgate_filters::openai::request::ChatRequest;
use tollgate_filters::route::ModelSpec;

use super::{Hold, Meter};
use crate::ledger::StoreError;
use crate::limits::budgets::{self, Reservation};

/// What a request asks of the hold.
pub struct HoldRequest<'a> {
    pub request_id: &'a str,
    pub account_id: &'a str,
    pub key_id: &'a str,
    /// The client's `max_tokens`, if any.
    pub max_tokens: Option<u64>,
    /// Completions asked for (`n`); each is held for `max_tokens`.
    pub choices: u64,
    /// The request and its body's size as received, for the prompt estimate.
    pub body: &'a ChatRequest<'a>,
    pub body_bytes: usize,
    /// The key's budget (µcr per period), when it has one.
    pub budget: Option<(i64, Period)>,
}

/// Places the hold for a keyed request, sized for its first candidate at that model's rates.
pub async fn hold(
    meter: &Meter<'_>,
    req: &HoldRequest<'_>,
    first: &ModelSpec,
) -> Result<Hold, StoreError> {
    let max_tokens = req
        .max_tokens
        .unwrap_or(first.max_output_tokens)
        .min(first.max_output_tokens);
    let prompt = credits::estimate_prompt_tokens(req.body, req.body_bytes);
    let size = size_hold(
        prompt,
        max_tokens,
        req.choices,
        first.prompt_rate_bound(),
        first.output_micros_per_1k,
    );
    let who = (req.request_id, req.account_id, req.key_id);
    place(meter, who, size, prompt, req.budget).await
}

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
    let mut reserved = match budgets
        .reserve(&meter.limiter.counters(), meter.ledger, &ask)
        .await
    {
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
                    .resize(&meter.limiter.counters(), &mut reserved, hold.held)
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
            budgets.settle(&meter.limiter.counters(), reserved, 0).await;
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
