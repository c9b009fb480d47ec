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
/// prompt (Anthropic's prompt caching); without them those tokens cost the input rate.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Rates {
    pub input: u64,
    pub output: u64,
    pub cache_read: Option<u64>,
    pub cache_write: Option<u64>,
}

/// The price of one request in µcr at `rates`: like [`cost`], with the prompt's cache-read and
/// cache-write tokens at their own rates.
pub fn cost_at(usage: Usage, rates: &Rates) -> i64 {
    let read = usage.cache_read_tokens.min(usage.prompt_tokens);
    let write = usage.cache_write_tokens.min(usage.prompt_tokens - read);
    let plain = usage.prompt_tokens - read - write;
    let milli = plain as u128 * rates.input as u128
        + read as u128 * rates.cache_read.unwrap_or(rates.input) as u128
        + write as u128 * rates.cache_write.unwrap_or(rates.input) as u128
        + usage.completion_tokens as u128 * rates.output as u128;
    milli.div_ceil(1000).min(i64::MAX as u128) as i64
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
mod tests {
    use super::*;

    #[test]
    fn cost_is_exact_then_rounded_up_once() {
        // 1 credit / 1K in, 2 credits / 1K out: 1000 µcr and 2000 µcr per token.
        let u = Usage {
            prompt_tokens: 11,
            completion_tokens: 7,
            ..Usage::default()
        };
        assert_eq!(cost(u, 1_000_000, 2_000_000), 11_000 + 14_000);
        // 0.15 credits / 1K = 150 µcr per token... per 1K: 150_000 µcr/1K = 150 µcr/token.
        assert_eq!(
            cost(
                Usage {
                    prompt_tokens: 3,
                    completion_tokens: 0,
                    ..Usage::default()
                },
                150_000,
                0
            ),
            450
        );
        // Fractional: 1 µcr per 1K tokens, 1 token = 0.001 µcr, rounded up to 1.
        assert_eq!(
            cost(
                Usage {
                    prompt_tokens: 1,
                    completion_tokens: 0,
                    ..Usage::default()
                },
                1,
                0
            ),
            1
        );
        assert_eq!(cost(Usage::default(), 5, 5), 0);
    }

    #[test]
    fn hold_size_and_affordable_tokens() {
        let h = size_hold(10, 100, 1, 1_000_000, 2_000_000);
        assert_eq!(h.prompt_cost, 10_000);
        assert_eq!(h.wanted, 10_000 + 200_000);
        assert_eq!(h.minimum, 12_000);
        assert_eq!(h.affordable_tokens(h.wanted, 100), 100);
        assert_eq!(h.affordable_tokens(50_000, 100), 20);
        assert_eq!(h.affordable_tokens(12_000, 100), 1);
        assert_eq!(h.affordable_tokens(11_999, 100), 0);
        let free = size_hold(10, 100, 1, 0, 0);
        assert_eq!((free.wanted, free.minimum), (0, 0));
        assert_eq!(free.affordable_tokens(0, 100), 100);
    }

    #[test]
    fn every_choice_of_n_is_held_for_max_tokens() {
        let h = size_hold(10, 100, 4, 1_000_000, 2_000_000);
        assert_eq!(h.wanted, 10_000 + 4 * 200_000);
        assert_eq!(h.minimum, 10_000 + 4 * 2_000, "one token for each choice");
        assert_eq!(h.affordable_tokens(h.wanted, 100), 100);
        // Half the output paid for: each of the 4 choices gets half its tokens.
        assert_eq!(h.affordable_tokens(10_000 + 400_000, 100), 50);
        assert_eq!(h.affordable_tokens(h.minimum, 100), 1);
        assert_eq!(h.affordable_tokens(h.minimum - 1, 100), 0);
    }

    #[test]
    fn credits_edges() {
        assert_eq!(from_credits(100.0), Some(100_000_000));
        assert_eq!(from_credits(0.000001), Some(1));
        assert_eq!(from_credits(f64::NAN), None);
        assert_eq!(to_credits(1_500_000), 1.5);
        assert_eq!(format_credits(99_987_500), "99.9875");
        assert_eq!(format_credits(100_000_000), "100");
        assert_eq!(format_credits(1), "0.000001");
        assert_eq!(format_credits(-1_500_000), "-1.5");
        assert_eq!(format_credits(2_100_001), "2.100001");
        assert_eq!(format_credits(0), "0");
        assert_eq!(format_credits(-30), "-0.00003");
    }

    fn estimate(body: serde_json::Value) -> u64 {
        let bytes = serde_json::to_vec(&body).unwrap();
        let req = crate::openai::request::parse_chat_request(&bytes).unwrap();
        estimate_prompt_tokens(&req, bytes.len())
    }

    #[test]
    fn prompt_estimate_leans_high() {
        let m = serde_json::json!([{"role":"user","content":"hello world, how are you today?"}]);
        let est = estimate(serde_json::json!({"model":"m","messages":m}));
        assert!(est >= crate::tokens::count_prompt(&m), "{est}");
    }

    #[test]
    fn tools_and_response_format_count_toward_the_estimate() {
        let m = serde_json::json!([{"role":"user","content":"hi"}]);
        let plain = estimate(serde_json::json!({"model":"m","messages":m}));
        let schema = serde_json::json!({"type":"object","properties":{"city":{"type":"string","description":"x".repeat(3000)}}});
        let tools = estimate(serde_json::json!({"model":"m","messages":m,
            "tools":[{"type":"function","function":{"name":"weather","parameters":schema}}]}));
        assert!(tools >= plain + 1000, "{plain} -> {tools}");
        let format = estimate(serde_json::json!({"model":"m","messages":m,
            "response_format":{"type":"json_schema","json_schema":{"name":"s","schema":schema}}}));
        assert!(format >= plain + 1000, "{plain} -> {format}");
    }

    #[test]
    fn an_image_part_counts_its_allowance_not_its_data_url() {
        let image = |url: &str| {
            serde_json::json!({"model":"m","messages":[{"role":"user","content":[
                {"type":"text","text":"what is this?"},
                {"type":"image_url","image_url":{"url":url}}]}]})
        };
        let small = estimate(image("https://example.com/a.png"));
        let data = format!("data:image/png;base64,{}", "A".repeat(1_000_000));
        let big = estimate(image(&data));
        assert!(
            (IMAGE_PART_TOKENS..IMAGE_PART_TOKENS + 100).contains(&small),
            "{small}"
        );
        assert!(big.abs_diff(small) < 20, "{small} vs {big}");
    }
}
