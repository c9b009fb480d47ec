//! The legs of a resumed stream (docs/api.md, "Streams that survive a cut"): each provider that
//! served part of the answer, with its usage at its own model's rates. The first leg is
//! charged what it delivered (as any cut stream); each continuation its prompt (the
//! conversation and the partial answer) and its output, the prompt left out when
//! `[routing] resume_prompt_paid_by = "gateway"`. Each leg is priced on its own, rounded up
//! to the micro-credit, and the request's one charge is their sum. The request's one usage
//! row carries that charge; each leg is also a `usage_legs` row under its request id (written
//! after the settlement: a breakdown, the money moved by the usage row).

use tollgate_filters::credits::{format_credits, parts_at, Parts, Rates};
use tollgate_filters::Usage;

use crate::ledger::legs::LegRow;

/// One provider's part of a stream.
#[derive(Debug, Clone)]
pub struct Leg {
    pub model: String,
    pub provider: String,
    /// What it used.
    pub usage: Usage,
    /// What of it is charged.
    pub parts: Parts,
}

impl Leg {
    pub fn cost(&self) -> i64 {
        self.parts.total()
    }
}

/// Every leg of a resumed stream, in order.
#[derive(Debug, Clone, Default)]
pub struct Legs {
    pub legs: Vec<Leg>,
    /// What the legs so far delivered: the partial answer the next one continues.
    pub partial: String,
    /// A continuation's prompt is the gateway's cost.
    pub gateway_pays_prompt: bool,
}

impl Legs {
    pub fn new(gateway_pays_prompt: bool) -> Legs {
        Legs {
            gateway_pays_prompt,
            ..Legs::default()
        }
    }

    /// Adds a leg that used `usage` at `rates`; a continuation's prompt is left out of its
    /// charge when the gateway pays for it.
    pub fn push(&mut self, model: &str, provider: &str, usage: Usage, rates: &Rates) {
        let mut billed = usage;
        if !self.legs.is_empty() && self.gateway_pays_prompt {
            billed.prompt_tokens = 0;
            billed.cache_read_tokens = 0;
            billed.cache_write_tokens = 0;
            billed.cache_write_1h_tokens = 0;
        }
        self.legs.push(Leg {
            model: model.to_owned(),
            provider: provider.to_owned(),
            usage,
            parts: parts_at(billed, rates),
        });
    }

    /// The legs' usage summed: what the usage row records and the client's usage reports.
    pub fn usage(&self) -> Usage {
        self.legs.iter().fold(Usage::default(), |a, l| {
            let u = l.usage;
            Usage {
                prompt_tokens: a.prompt_tokens.saturating_add(u.prompt_tokens),
                completion_tokens: a.completion_tokens.saturating_add(u.completion_tokens),
                cache_read_tokens: a.cache_read_tokens.saturating_add(u.cache_read_tokens),
                cache_write_tokens: a.cache_write_tokens.saturating_add(u.cache_write_tokens),
                cache_write_1h_tokens: a
                    .cache_write_1h_tokens
                    .saturating_add(u.cache_write_1h_tokens),
                reasoning_tokens: a.reasoning_tokens.saturating_add(u.reasoning_tokens),
            }
        })
    }

    /// The charge: each leg's price, rounded up on its own, summed.
    pub fn cost(&self) -> i64 {
        self.legs.iter().map(Leg::cost).sum()
    }

    /// The legs' parts summed, for the client's `cost_details`.
    pub fn parts(&self) -> Parts {
        self.legs.iter().fold(Parts::default(), |a, l| Parts {
            input: a.input + l.parts.input,
            output: a.output + l.parts.output,
            cache_read: a.cache_read + l.parts.cache_read,
            cache_write: a.cache_write + l.parts.cache_write,
        })
    }

    /// The legs as `usage_legs` rows of `request_id`, for `account_id`.
    pub fn rows(&self, request_id: &str, account_id: &str, now_ms: i64) -> Vec<LegRow> {
        let count = |n: u64| i64::try_from(n).unwrap_or(i64::MAX);
        self.legs
            .iter()
            .enumerate()
            .map(|(i, l)| LegRow {
                request_id: request_id.to_owned(),
                leg: i as i64 + 1,
                account_id: account_id.to_owned(),
                model_used: l.model.clone(),
                provider: l.provider.clone(),
                prompt_tokens: count(l.usage.prompt_tokens),
                completion_tokens: count(l.usage.completion_tokens),
                credits: l.cost(),
                created_at: now_ms,
            })
            .collect()
    }

    /// The usage row's account of the legs (its `hold_note`): model, provider, tokens and
    /// charge of each.
    pub fn note(&self) -> String {
        let legs: Vec<String> = self
            .legs
            .iter()
            .enumerate()
            .map(|(i, l)| {
                format!(
                    "leg {} {} ({}): {} prompt + {} output tokens, {} credits",
                    i + 1,
                    l.model,
                    l.provider,
                    l.usage.prompt_tokens,
                    l.usage.completion_tokens,
                    format_credits(l.cost())
                )
            })
            .collect();
        format!("resumed: {}", legs.join("; "))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rates(input: u64, output: u64) -> Rates {
        Rates {
            input,
            output,
            ..Rates::default()
        }
    }

    #[test]
    fn each_leg_at_its_rates_and_the_gateway_may_pay_the_resumed_prompt() {
        let u = |p, c| Usage {
            prompt_tokens: p,
            completion_tokens: c,
            ..Usage::default()
        };
        let mut legs = Legs::new(false);
        legs.push("a", "pa", u(10, 3), &rates(1000, 2000));
        legs.push("b", "pb", u(20, 5), &rates(500, 3000));
        assert_eq!(legs.cost(), (10 + 6) + (10 + 15));
        assert_eq!(legs.usage().total(), 38);
        assert!(legs
            .note()
            .contains("leg 2 b (pb): 20 prompt + 5 output tokens"));
        let mut legs = Legs::new(true);
        legs.push("a", "pa", u(10, 3), &rates(1000, 2000));
        legs.push("b", "pb", u(20, 5), &rates(500, 3000));
        assert_eq!(
            legs.cost(),
            16 + 15,
            "the continuation's prompt is not charged"
        );
        assert_eq!(legs.usage().prompt_tokens, 30, "but recorded");
    }
}
