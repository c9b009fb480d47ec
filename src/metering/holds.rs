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
use crate::limits::budgets::{self, Caps, Reservation, Reserved, Which};

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
    /// The key's budget and its member's cap, where they have one.
    pub caps: Caps<'a>,
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
    place(meter, who, size, prompt, req.caps).await
}

/// [`super::place`] within a keyed request's caps (its key's budget, its member's cap in an
/// organization): each reserved first, so that the hold takes no more than is left of any
/// (concurrent requests on any instance cannot overrun them), then no more than the balance
/// has. A refusal releases what was reserved.
pub async fn place(
    meter: &Meter<'_>,
    who: (&str, &str, &str),
    mut size: HoldSize,
    prompt: u64,
    caps: Caps<'_>,
) -> Result<Hold, StoreError> {
    let asks = caps.asks(who.2);
    if asks.is_empty() {
        return super::place(meter, who, &size, prompt).await;
    }
    let budgets = &meter.limiter.budgets;
    let counters = meter.limiter.counters();
    let expires_at = crate::clock::now_ms() + meter.hold_ttl.as_millis() as i64;
    let mut reserved: Vec<Reserved> = Vec::with_capacity(asks.len());
    for (which, of, cap, period) in asks {
        let ask = budgets::Ask {
            of,
            cap,
            period,
            request_id: who.0,
            want: size.wanted,
            minimum: size.minimum,
            expires_at,
        };
        let refused = match budgets.reserve(&counters, meter.ledger, &ask).await {
            Ok(Reservation::Granted(r)) => {
                size.wanted = r.amount;
                reserved.push(r);
                continue;
            }
            Ok(Reservation::Refused { left }) => Ok(Hold::OverBudget { left, which }),
            Err(e) => Err(StoreError(format!("budget counters: {}", e.0))),
        };
        for r in reserved {
            budgets.settle(&counters, r, 0).await;
        }
        return refused;
    }
    // Every reservation holds what the smallest granted.
    for r in reserved.iter_mut().filter(|r| r.amount > size.wanted) {
        budgets.resize(&counters, r, size.wanted).await;
    }
    match super::place(meter, who, &size, prompt).await {
        Ok(Hold::Placed {
            hold,
            budget,
            balance,
            ..
        }) => {
            for r in reserved.iter_mut().filter(|r| r.amount > hold.held) {
                budgets.resize(&counters, r, hold.held).await;
            }
            Ok(Hold::Placed {
                hold,
                budget,
                balance,
                reserved,
            })
        }
        other => {
            for r in reserved {
                budgets.settle(&counters, r, 0).await;
            }
            other
        }
    }
}

/// The 402 of a request whose key's budget, or its member's cap in the organization, cannot
/// pay its prompt and one output token: the cap, what is left of it and when it starts over.
pub fn over_budget(caps: Caps<'_>, which: Which, left: i64) -> tollgate_filters::GatewayError {
    let (whose, (cap, period)) = match (which, caps.member.and_then(|m| m.cap)) {
        (Which::Member, Some(c)) => ("your member cap in this organization", c),
        _ => (
            "this key's budget",
            caps.key.unwrap_or((0, Period::Lifetime)),
        ),
    };
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
            "{whose} of {} credits{per} cannot pay for this request ({} credits left){resets}",
            format_credits(cap),
            format_credits(left.max(0)),
        ),
    )
}
