//! Anthropic's Messages API (https://docs.anthropic.com/en/api/messages) both ways: as a
//! provider behind the OpenAI chat API, and as an API in front. Pure functions; the service
//! does the I/O.
//!
//! - [`request`]: an OpenAI chat request checked and translated into a Messages body; the
//!   inbound Messages request validated and mirrored into OpenAI form (from `inbound.rs` and
//!   `mirror.rs`, checked in `validate.rs`).
//! - [`completion`]: whole replies both ways (Message → chat.completion, and back).
//! - [`stream`]: the three [`crate::translator::StreamTranslator`]s: Anthropic → OpenAI,
//!   Anthropic → Anthropic and OpenAI → Anthropic (the last two in their own files).
//! - [`error`]: Anthropic's error shape for the inbound Messages API.
//! - [`breakpoints`]: prompt-cache marks the gateway adds for a client that set none.
//!
//! The mappings shared by all of them (stop reasons, usage, SSE framing) live here.

mod blocks;
pub mod breakpoints;
pub mod completion;
pub mod error;
mod events;
mod from_openai;
mod inbound;
mod mirror;
mod passthrough;
pub mod request;
pub mod stream;
mod validate;

#[cfg(test)]
mod tests_breakpoints;
#[cfg(test)]
mod tests_completion;
#[cfg(test)]
mod tests_inbound;
#[cfg(test)]
mod tests_request;
#[cfg(test)]
mod tests_stream;
#[cfg(test)]
mod tests_stream_openai;
#[cfg(test)]
mod tests_today;

use serde::de::{Deserialize, Deserializer, MapAccess, Visitor};
use serde_json::value::RawValue;
use serde_json::Value;

use crate::Usage;

/// Anthropic's `stop_reason` as an OpenAI `finish_reason`.
pub fn stop_reason_to_finish(stop: &str) -> &'static str {
    match stop {
        // The prompt filled the context window: as far as the client can tell, a length cut.
        "max_tokens" | "model_context_window_exceeded" => "length",
        "tool_use" => "tool_calls",
        "refusal" => "content_filter",
        // end_turn, stop_sequence, pause_turn and reasons newer than this code.
        _ => "stop",
    }
}

/// An OpenAI `finish_reason` as Anthropic's `stop_reason`.
pub fn finish_to_stop_reason(finish: &str) -> &'static str {
    match finish {
        "length" => "max_tokens",
        "tool_calls" | "function_call" => "tool_use",
        "content_filter" => "refusal",
        _ => "end_turn",
    }
}

/// Reads an Anthropic `usage` object. Anthropic's `input_tokens` excludes the prompt read from
/// or written to its cache, so the three are summed into `prompt_tokens` and the cache counts
/// kept as its parts, to be billed at the cache rates.
pub fn usage_from_anthropic(u: &Value) -> Option<Usage> {
    let o = u.as_object()?;
    let count = |k: &str| o.get(k).and_then(Value::as_u64);
    if count("input_tokens").is_none() && count("output_tokens").is_none() {
        return None;
    }
    let read = count("cache_read_input_tokens").unwrap_or(0);
    let (write, write_1h) = cache_writes(u);
    Some(Usage {
        prompt_tokens: count("input_tokens")
            .unwrap_or(0)
            .saturating_add(write)
            .saturating_add(read),
        completion_tokens: count("output_tokens").unwrap_or(0),
        cache_read_tokens: read,
        cache_write_tokens: write,
        cache_write_1h_tokens: write_1h,
        reasoning_tokens: 0,
    })
}

/// The cache writes of an Anthropic usage object, all and one-hour:
/// `cache_creation_input_tokens`, and `cache_creation.ephemeral_1h_input_tokens` of them
/// (`ephemeral_5m_input_tokens` the rest). `None` counts when the object has neither.
pub(crate) fn cache_writes(u: &Value) -> (u64, u64) {
    let by_ttl = |ttl: &str| {
        u.pointer(&format!("/cache_creation/ephemeral_{ttl}_input_tokens"))
            .and_then(Value::as_u64)
            .unwrap_or(0)
    };
    let (five, hour) = (by_ttl("5m"), by_ttl("1h"));
    let total = u
        .get("cache_creation_input_tokens")
        .and_then(Value::as_u64)
        .unwrap_or(0)
        .max(five.saturating_add(hour));
    (total, hour.min(total))
}

/// OpenAI's `usage` object for `u`, with the cached part in `prompt_tokens_details` as
/// OpenAI reports it.
pub(crate) fn openai_usage_json(u: Usage) -> Value {
    let mut v = u.to_json();
    if u.cache_read_tokens > 0 {
        v["prompt_tokens_details"] = serde_json::json!({ "cached_tokens": u.cache_read_tokens });
    }
    v
}

/// One named SSE event as Anthropic writes them: `event: <name>\ndata: <json>\n\n`.
pub(crate) fn named_event(name: &str, data: &Value) -> Vec<u8> {
    let mut out = Vec::with_capacity(64 + name.len());
    out.extend_from_slice(b"event: ");
    out.extend_from_slice(name.as_bytes());
    out.extend_from_slice(b"\ndata: ");
    // Writing a Value into a Vec cannot fail.
    let _ = serde_json::to_writer(&mut out, data);
    out.extend_from_slice(b"\n\n");
    out
}

/// A JSON object's top-level members in order, values kept as their raw text.
struct Members(Vec<(String, Box<RawValue>)>);

impl<'de> Deserialize<'de> for Members {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct Visit;
        impl<'de> Visitor<'de> for Visit {
            type Value = Members;
            fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
                f.write_str("a JSON object")
            }
            fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Members, A::Error> {
                let mut out = Vec::with_capacity(8);
                while let Some(entry) = map.next_entry::<String, Box<RawValue>>()? {
                    out.push(entry);
                }
                Ok(Members(out))
            }
        }
        d.deserialize_map(Visit)
    }
}

/// The JSON object `raw` with member `key` set to the JSON text `value` (added when absent);
/// every other member keeps its order and exact text. `None` when `raw` is not an object.
/// Used where a reply passes through to an Anthropic client with only `model` changed, so
/// fields this code does not know survive exactly.
pub(crate) fn with_member(raw: &str, key: &str, value: &str) -> Option<String> {
    let Members(members) = serde_json::from_str(raw).ok()?;
    let mut out = String::with_capacity(raw.len() + value.len() + 16);
    out.push('{');
    let mut replaced = false;
    for (k, v) in &members {
        if out.len() > 1 {
            out.push(',');
        }
        out.push_str(&Value::String(k.clone()).to_string());
        out.push(':');
        if k == key {
            replaced = true;
            out.push_str(value);
        } else {
            out.push_str(v.get());
        }
    }
    if !replaced {
        if out.len() > 1 {
            out.push(',');
        }
        out.push_str(&Value::String(key.to_owned()).to_string());
        out.push(':');
        out.push_str(value);
    }
    out.push('}');
    Some(out)
}

/// The raw text of member `key` of the JSON object `raw`.
pub(crate) fn member_text(raw: &str, key: &str) -> Option<String> {
    let Members(members) = serde_json::from_str(raw).ok()?;
    members
        .into_iter()
        .find(|(k, _)| k == key)
        .map(|(_, v)| v.get().to_owned())
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn stop_reasons_map_both_ways() {
        for (stop, finish) in [
            ("end_turn", "stop"),
            ("stop_sequence", "stop"),
            ("max_tokens", "length"),
            ("tool_use", "tool_calls"),
            ("pause_turn", "stop"),
            ("refusal", "content_filter"),
            ("something_new", "stop"),
        ] {
            assert_eq!(stop_reason_to_finish(stop), finish, "{stop}");
        }
        for (finish, stop) in [
            ("stop", "end_turn"),
            ("length", "max_tokens"),
            ("tool_calls", "tool_use"),
            ("function_call", "tool_use"),
            ("content_filter", "refusal"),
            ("weird", "end_turn"),
        ] {
            assert_eq!(finish_to_stop_reason(finish), stop, "{finish}");
        }
    }

    #[test]
    fn usage_sums_cache_parts_into_prompt() {
        let u = usage_from_anthropic(&json!({
            "input_tokens": 21, "cache_creation_input_tokens": 188086,
            "cache_read_input_tokens": 1000, "output_tokens": 393
        }))
        .unwrap();
        assert_eq!(u.prompt_tokens, 21 + 188086 + 1000);
        assert_eq!(u.completion_tokens, 393);
        assert_eq!(u.cache_read_tokens, 1000);
        assert_eq!(u.cache_write_tokens, 188086);
        let u = usage_from_anthropic(&json!({"input_tokens": 5, "output_tokens": 2,
            "cache_creation_input_tokens": null}))
        .unwrap();
        assert_eq!((u.prompt_tokens, u.cache_write_tokens), (5, 0));
        let u = usage_from_anthropic(&json!({"output_tokens": 7})).unwrap();
        assert_eq!((u.prompt_tokens, u.completion_tokens), (0, 7));
        let u = usage_from_anthropic(&json!({"input_tokens": u64::MAX,
            "cache_read_input_tokens": 9, "output_tokens": 1}))
        .unwrap();
        assert_eq!(u.prompt_tokens, u64::MAX);
        assert_eq!(
            usage_from_anthropic(&json!({"cache_read_input_tokens": 3})),
            None
        );
        assert_eq!(usage_from_anthropic(&json!(null)), None);
        assert_eq!(usage_from_anthropic(&json!([1])), None);
    }

    #[test]
    fn one_hour_cache_writes_are_read_from_the_breakdown() {
        let u = usage_from_anthropic(&json!({
            "input_tokens": 10, "cache_creation_input_tokens": 300, "cache_read_input_tokens": 5,
            "cache_creation": {"ephemeral_5m_input_tokens": 100, "ephemeral_1h_input_tokens": 200},
            "output_tokens": 4
        }))
        .unwrap();
        assert_eq!(u.prompt_tokens, 10 + 300 + 5);
        assert_eq!((u.cache_write_tokens, u.cache_write_1h_tokens), (300, 200));
        // The breakdown alone, or a total below it: the breakdown's sum.
        let u = usage_from_anthropic(&json!({"input_tokens": 1, "output_tokens": 1,
            "cache_creation": {"ephemeral_1h_input_tokens": 50}}))
        .unwrap();
        assert_eq!(
            (
                u.prompt_tokens,
                u.cache_write_tokens,
                u.cache_write_1h_tokens
            ),
            (51, 50, 50)
        );
        // A stream: message_start's counts with the breakdown, message_delta's output.
        let mut t = events::UsageTrack::default();
        t.take(
            &json!({"input_tokens": 3, "cache_creation_input_tokens": 40,
            "cache_creation": {"ephemeral_5m_input_tokens": 10, "ephemeral_1h_input_tokens": 30}}),
            false,
        );
        t.take(&json!({"output_tokens": 8}), true);
        let u = t.get().unwrap();
        assert_eq!(
            (
                u.prompt_tokens,
                u.cache_write_tokens,
                u.cache_write_1h_tokens,
                u.completion_tokens
            ),
            (43, 40, 30, 8)
        );
    }

    #[test]
    fn with_member_keeps_other_members_exactly() {
        let raw = r#"{"id":"m", "x":1.50e0 ,"model":"up","z":{"a":[1, 2]}}"#;
        let out = with_member(raw, "model", r#""ours""#).unwrap();
        assert_eq!(
            out,
            r#"{"id":"m","x":1.50e0,"model":"ours","z":{"a":[1, 2]}}"#
        );
        assert_eq!(with_member("{}", "model", "1").unwrap(), r#"{"model":1}"#);
        assert!(with_member("[1]", "model", "1").is_none());
        assert_eq!(member_text(raw, "z").unwrap(), r#"{"a":[1, 2]}"#);
    }
}
