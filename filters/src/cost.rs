//! What a request cost, as its reply tells the client (as OpenRouter does): `usage.cost`, the
//! credits charged (what the balance fell by), and `usage.cost_details`, each part's price at
//! the rates of the model used (`input`, `output`, `cache_read`, `cache_write`), exact before
//! the one rounding up. Written as members to splice into a reply's usage object (a JSON reply
//! is not parsed again: see [`add_to_usage`]), or into the usage object of an event being
//! built.

use serde_json::Value;

use crate::credits::{parts_at, Parts, Rates, MICROS_PER_CREDIT};
use crate::json::splice::{splice_members, Members};
use crate::Usage;

/// A settled request's cost.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Cost {
    /// µcr charged. The parts' sum rounded up, unless the credit hold capped it.
    pub charged: i64,
    pub parts: Parts,
}

impl Cost {
    /// `charged` µcr for `usage` at `rates` (the model that served the request).
    pub fn new(charged: i64, usage: Usage, rates: &Rates) -> Cost {
        Cost {
            charged,
            parts: parts_at(usage, rates),
        }
    }

    /// `"cost":…,"cost_details":{…}`: the members a usage object gets, credits as JSON numbers
    /// written in decimal (no float noise).
    pub fn members(&self) -> String {
        self.members_in(Spelling::Snake)
    }

    /// The members in the wire's spelling.
    pub fn members_in(&self, spelling: Spelling) -> String {
        let p = &self.parts;
        let [details, read, write] = match spelling {
            Spelling::Snake => ["cost_details", "cache_read", "cache_write"],
            Spelling::Camel => ["costDetails", "cacheRead", "cacheWrite"],
        };
        format!(
            r#""cost":{},"{details}":{{"input":{},"output":{},"{read}":{},"{write}":{}}}"#,
            micros_text(self.charged),
            milli_micros_text(p.input),
            milli_micros_text(p.output),
            milli_micros_text(p.cache_read),
            milli_micros_text(p.cache_write),
        )
    }

    /// Adds the members to `usage`, a usage object in a tree (an event being built); anything
    /// else is left alone.
    pub fn add_to(&self, usage: &mut Value) {
        self.add_to_in(usage, Spelling::Snake)
    }

    /// [`Cost::add_to`] in the wire's spelling.
    pub fn add_to_in(&self, usage: &mut Value, spelling: Spelling) {
        let Some(u) = usage.as_object_mut() else {
            return;
        };
        // The members are JSON written here: they parse.
        let members = format!("{{{}}}", self.members_in(spelling));
        if let Ok(Value::Object(m)) = serde_json::from_str(&members) {
            u.extend(m);
        }
    }
}

/// How a wire spells its members: OpenAI's and Anthropic's `snake_case`, Gemini's
/// `camelCase` (its `usageMetadata.costDetails.cacheRead`; Google's SDKs drop members their
/// model does not know, so the cost is read from the raw reply or its header).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Spelling {
    Snake,
    Camel,
}

/// `raw`, a JSON object (a whole reply), with `cost`'s members added at the end of its
/// top-level object member `member` (`usage`; Gemini's `usageMetadata`), the rest copied byte
/// for byte: one scan of the top level and one copy, no tree. `None` when the reply has no such
/// object (it is then sent as it was).
pub fn add_to_usage(raw: &[u8], member: &str, cost: &Cost, spelling: Spelling) -> Option<Vec<u8>> {
    let Members(members) = serde_json::from_slice::<Members<'_>>(raw).ok()?;
    let usage = members
        .iter()
        .rev()
        .find(|(k, _)| k == member)
        .map(|(_, v)| v.get())
        .filter(|v| v.starts_with('{'))?;
    let inner = usage[1..usage.len() - 1].trim();
    let mut text = String::with_capacity(usage.len() + 160);
    text.push_str(&usage[..usage.len() - 1]);
    if !inner.is_empty() {
        text.push(',');
    }
    text.push_str(&cost.members_in(spelling));
    text.push('}');
    let mut out = Vec::with_capacity(raw.len() + 160);
    splice_members(raw, &members, &[(member, text.as_bytes())], &mut out);
    Some(out)
}

/// µcr as credits in decimal: `0.001234`.
fn micros_text(micros: i64) -> String {
    decimal(micros.unsigned_abs() as u128, 6, micros < 0)
}

/// Thousandths of a µcr as credits in decimal (up to nine places).
fn milli_micros_text(milli: u128) -> String {
    decimal(milli, 9, false)
}

/// `n / 10^places` in decimal, trailing zeros dropped.
fn decimal(n: u128, places: u32, negative: bool) -> String {
    let scale = 10u128.pow(places);
    let (whole, mut frac) = (n / scale, n % scale);
    let sign = if negative && n != 0 { "-" } else { "" };
    if frac == 0 {
        return format!("{sign}{whole}");
    }
    let mut digits = places as usize;
    while frac % 10 == 0 {
        frac /= 10;
        digits -= 1;
    }
    format!("{sign}{whole}.{frac:0digits$}")
}

// Credits are µcr / 1e6; the text above relies on that.
const _: () = assert!(MICROS_PER_CREDIT == 1_000_000);

#[cfg(test)]
mod tests {
    use super::*;

    fn sample() -> Cost {
        let rates = Rates {
            input: 3_000_000,
            output: 15_000_000,
            cache_read: Some(300_000),
            cache_write: Some(3_750_000),
            cache_write_1h: None,
        };
        let usage = Usage {
            prompt_tokens: 13 + 7,
            completion_tokens: 9,
            cache_read_tokens: 7,
            ..Usage::default()
        };
        Cost::new(crate::credits::cost_at(usage, &rates), usage, &rates)
    }

    #[test]
    fn the_members_are_credits_in_decimal() {
        let c = sample();
        assert_eq!(c.charged, 39_000 + 135_000 + 2_100);
        let v: Value = serde_json::from_str(&format!("{{{}}}", c.members())).unwrap();
        assert_eq!(v["cost"], 0.1761);
        assert_eq!(v["cost_details"]["input"], 0.039);
        assert_eq!(v["cost_details"]["output"], 0.135);
        assert_eq!(v["cost_details"]["cache_read"], 0.0021);
        assert_eq!(v["cost_details"]["cache_write"], 0);
        assert!(
            c.members().starts_with(r#""cost":0.1761,"#),
            "{}",
            c.members()
        );
        assert_eq!(decimal(1, 9, false), "0.000000001");
        assert_eq!(decimal(1_500_000, 6, true), "-1.5");
        assert_eq!(decimal(0, 6, true), "0");
    }

    #[test]
    fn the_cost_goes_into_the_usage_object_and_nothing_else_changes() {
        let c = sample();
        let raw = br#"{"id":"x", "usage" : {"prompt_tokens":20,"prompt_tokens_details":{"cached_tokens":7}} ,"z":[1]}"#;
        let out =
            String::from_utf8(add_to_usage(raw, "usage", &c, Spelling::Snake).unwrap()).unwrap();
        assert_eq!(
            out,
            format!(
                r#"{{"id":"x", "usage" : {{"prompt_tokens":20,"prompt_tokens_details":{{"cached_tokens":7}},{}}} ,"z":[1]}}"#,
                c.members()
            )
        );
        // An empty usage object gets no leading comma; a reply without one is left alone.
        let out = add_to_usage(br#"{"usage":{ }}"#, "usage", &c, Spelling::Snake).unwrap();
        let v: Value = serde_json::from_slice(&out).unwrap();
        assert_eq!(v["usage"]["cost"], 0.1761);
        assert!(add_to_usage(br#"{"usage":null}"#, "usage", &c, Spelling::Snake).is_none());
        assert!(add_to_usage(br#"{"data":[]}"#, "usage", &c, Spelling::Snake).is_none());
        assert!(add_to_usage(b"not json", "usage", &c, Spelling::Snake).is_none());
        // A nested `usage` is not the reply's.
        assert!(add_to_usage(br#"{"x":{"usage":{}}}"#, "usage", &c, Spelling::Snake).is_none());
        // Into a tree.
        let mut u = serde_json::json!({"output_tokens": 9});
        c.add_to(&mut u);
        assert_eq!(u["cost"], 0.1761);
        assert_eq!(u["output_tokens"], 9);
        // Gemini's spelling.
        let raw = br#"{"candidates":[],"usageMetadata":{"promptTokenCount":20}}"#;
        let out = add_to_usage(raw, "usageMetadata", &c, Spelling::Camel).unwrap();
        let v: Value = serde_json::from_slice(&out).unwrap();
        assert_eq!(v["usageMetadata"]["cost"], 0.1761);
        assert_eq!(v["usageMetadata"]["costDetails"]["cacheRead"], 0.0021);
        assert_eq!(v["usageMetadata"]["promptTokenCount"], 20);
    }
}
