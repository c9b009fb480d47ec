//! Credit arithmetic in integer micro-credits (1 credit = 1,000,000 µcr). Floats exist only at
//! the edges: config rates and JSON numbers.
//!
//! Rates are µcr per 1K tokens, so a token costs `rate / 1000` µcr, which may be fractional;
//! totals are rounded up once per request, never per token, so a request is never charged more
//! than a thousandth of a micro-credit above its exact price.

use crate::json::raw;
use crate::openai::request::ChatRequest;
use crate::Usage;

pub const MICROS_PER_CREDIT: i64 = 1_000_000;

/// A model's prices in µcr per 1K tokens. Cache rates, when set, price the cache parts of the
/// prompt (Anthropic's prompt caching, OpenAI's cached input); without them those tokens cost
/// the input rate. A one-hour cache write costs `cache_write_1h`, else the five-minute
/// `cache_write` rate.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Rates {
    pub input: u64,
    pub output: u64,
    pub cache_read: Option<u64>,
    pub cache_write: Option<u64>,
    pub cache_write_1h: Option<u64>,
}

/// A request's price by part, in thousandths of a µcr: exact, since rates are per 1K tokens.
/// The charge is their sum rounded up once ([`Parts::total`]).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Parts {
    /// The prompt outside the cache.
    pub input: u128,
    pub output: u128,
    pub cache_read: u128,
    /// Cache writes, five-minute and one-hour.
    pub cache_write: u128,
}

impl Parts {
    /// The price in µcr: the parts' sum rounded up to the micro-credit.
    pub fn total(&self) -> i64 {
        let milli = self
            .input
            .saturating_add(self.output)
            .saturating_add(self.cache_read)
            .saturating_add(self.cache_write);
        milli.div_ceil(1000).min(i64::MAX as u128) as i64
    }

    /// Each part at `ppm` millionths of itself: a response cache hit's price, a fraction of
    /// the list price of the reply it repeats.
    pub fn scaled(&self, ppm: u32) -> Parts {
        let at = |p: u128| p.saturating_mul(u128::from(ppm)) / 1_000_000;
        Parts {
            input: at(self.input),
            output: at(self.output),
            cache_read: at(self.cache_read),
            cache_write: at(self.cache_write),
        }
    }
}

/// What a provider's cache reads took off the list price: the read tokens at the input rate
/// less the cache-read rate, in µcr rounded down (nothing without a cache-read rate).
pub fn cache_read_saving(usage: Usage, rates: &Rates) -> i64 {
    let Some(read_rate) = rates.cache_read else {
        return 0;
    };
    let read = usage.cache_read_tokens.min(usage.prompt_tokens) as u128;
    let milli = read * u128::from(rates.input.saturating_sub(read_rate));
    (milli / 1000).min(i64::MAX as u128) as i64
}

/// The price of each part of a request's usage at `rates`. The cache counts are parts of the
/// prompt, capped at what the prompt has (reads first, then writes, one-hour writes among
/// them), so an upstream's inconsistent counts never bill a token twice.
pub fn parts_at(usage: Usage, rates: &Rates) -> Parts {
    let read = usage.cache_read_tokens.min(usage.prompt_tokens);
    let write = usage.cache_write_tokens.min(usage.prompt_tokens - read);
    let write_1h = usage.cache_write_1h_tokens.min(write);
    let plain = usage.prompt_tokens - read - write;
    let at = |tokens: u64, rate: u64| tokens as u128 * rate as u128;
    let write_rate = rates.cache_write.unwrap_or(rates.input);
    Parts {
        input: at(plain, rates.input),
        output: at(usage.completion_tokens, rates.output),
        cache_read: at(read, rates.cache_read.unwrap_or(rates.input)),
        cache_write: at(write - write_1h, write_rate)
            + at(write_1h, rates.cache_write_1h.unwrap_or(write_rate)),
    }
}

/// The price of one request in µcr at `rates`: like [`cost`], with the prompt's cache-read and
/// cache-write tokens at their own rates ([`parts_at`]).
pub fn cost_at(usage: Usage, rates: &Rates) -> i64 {
    parts_at(usage, rates).total()
}

/// The price of one request in µcr: `ceil((p × in + c × out) / 1000)`.
pub fn cost(usage: Usage, input_per_1k: u64, output_per_1k: u64) -> i64 {
    let milli = usage.prompt_tokens as u128 * input_per_1k as u128
        + usage.completion_tokens as u128 * output_per_1k as u128;
    milli.div_ceil(1000).min(i64::MAX as u128) as i64
}

/// µcr as a JSON number of credits.
pub fn to_credits(micros: i64) -> f64 {
    micros as f64 / MICROS_PER_CREDIT as f64
}

/// µcr as a decimal string of credits without float noise (`99.9875`), for headers.
pub fn format_credits(micros: i64) -> String {
    let sign = if micros < 0 { "-" } else { "" };
    let m = micros.unsigned_abs();
    let whole = m / MICROS_PER_CREDIT as u64;
    let frac = m % MICROS_PER_CREDIT as u64;
    if frac == 0 {
        return format!("{sign}{whole}");
    }
    // Six digits with the trailing zeros dropped, written into the one string (this runs
    // once per metered request, for X-Credits-Remaining).
    let (mut frac, mut digits) = (frac, 6);
    while frac % 10 == 0 {
        frac /= 10;
        digits -= 1;
    }
    format!("{sign}{whole}.{frac:0digits$}")
}

/// Credits from a JSON number to µcr; `None` for NaN, infinities or more than 10^12 credits.
pub fn from_credits(c: f64) -> Option<i64> {
    (c.is_finite() && c.abs() <= 1e12).then(|| (c * MICROS_PER_CREDIT as f64).round() as i64)
}

/// How much to hold before forwarding a request: what the client wants, and the least that
/// still serves it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct HoldSize {
    /// The most the prompt can cost.
    pub prompt_cost: i64,
    /// The cost of the full `max_tokens` the client allowed.
    pub wanted: i64,
    /// The least hold that still buys one output token.
    pub minimum: i64,
    /// µcr per 1K output tokens used to convert a hold back into tokens.
    pub output_per_1k: u64,
    /// Completions asked for (`n`): every one may run to `max_tokens`.
    pub choices: u64,
}

/// Sizes the hold from an estimated prompt size, `max_tokens` for each of `choices`
/// completions (`n`), and the highest rates among the route's candidates (the model that ends
/// up serving the request may be any of them).
pub fn size_hold(
    prompt_tokens: u64,
    max_tokens: u64,
    choices: u64,
    input_per_1k: u64,
    output_per_1k: u64,
) -> HoldSize {
    let choices = choices.max(1);
    let prompt_cost = cost(
        Usage {
            prompt_tokens,
            completion_tokens: 0,
            ..Usage::default()
        },
        input_per_1k,
        0,
    );
    let out = |n: u64| {
        cost(
            Usage {
                prompt_tokens: 0,
                completion_tokens: n,
                ..Usage::default()
            },
            0,
            output_per_1k,
        )
    };
    HoldSize {
        prompt_cost,
        wanted: prompt_cost.saturating_add(out(max_tokens.saturating_mul(choices))),
        minimum: prompt_cost.saturating_add(out(choices)),
        output_per_1k,
        choices,
    }
}

impl HoldSize {
    /// How many output tokens per completion a granted hold pays for (at least 1 when
    /// `held >= minimum`).
    pub fn affordable_tokens(&self, held: i64, max_tokens: u64) -> u64 {
        if self.output_per_1k == 0 {
            return max_tokens;
        }
        let left = (held - self.prompt_cost).max(0) as u128;
        let tokens = left * 1000 / self.output_per_1k as u128 / self.choices.max(1) as u128;
        (tokens.min(max_tokens as u128)) as u64
    }
}

/// Tokens allowed for each image part in the prompt estimate: above what OpenAI's models
/// charge for the largest high-detail image (85 + 170 per 512-pixel tile, at most 8 tiles after
/// scaling: 1,445).
pub const IMAGE_PART_TOKENS: u64 = 1_500;

/// A cheap upper-leaning estimate of a prompt's tokens for the hold, without running the
/// tokenizer on the hot path: one token per 3 bytes of the whole request body (English text
/// averages about 4, CJK about 3; `tools`, `response_format` and the JSON around them count
/// too), except that an image part counts [`IMAGE_PART_TOKENS`] instead of its URL's bytes (a
/// base64 data URL is far longer than the image costs). Settlement uses the real count.
pub fn estimate_prompt_tokens(req: &ChatRequest<'_>, body_bytes: usize) -> u64 {
    let (mut images, mut image_bytes) = (0u64, 0usize);
    // Only array contents can hold images; string contents are not looked into.
    let parts = req
        .messages
        .iter()
        .filter_map(|m| m.content.filter(|c| raw::kind(c) == raw::Kind::Array))
        .filter_map(raw::array);
    for p in parts.flatten().filter_map(raw::object) {
        if raw::get(&p, "type").and_then(raw::as_str).as_deref() == Some("image_url") {
            images += 1;
            let url = raw::get(&p, "image_url")
                .and_then(raw::object)
                .and_then(|i| raw::get(&i, "url").and_then(raw::as_str).map(|u| u.len()));
            image_bytes += url.unwrap_or(0);
        }
    }
    let text = body_bytes.saturating_sub(image_bytes) as u64;
    text.div_ceil(3)
        .saturating_add(IMAGE_PART_TOKENS.saturating_mul(images))
}

#[cfg(test)]
mod tests;
