//! Reading Anthropic stream events, shared by the three translators of `stream.rs`: an event's
//! data and type, its error object, and the usage a stream reports across `message_start` and
//! `message_delta`.

use serde_json::{json, Value};

use crate::openai::stream::StreamStep;
use crate::Usage;

/// What a stream reports of its usage: `message_start` has the prompt's counts, the final
/// `message_delta` the output's (and, in newer API versions, the prompt's again).
#[derive(Debug, Default)]
pub(super) struct UsageTrack {
    input: u64,
    cache_write: u64,
    cache_write_1h: u64,
    cache_read: u64,
    output: u64,
    /// The final `message_delta` arrived: from then on the counts are the upstream's.
    complete: bool,
}

impl UsageTrack {
    /// Takes the counts an event's usage object has, keeping the others.
    pub(super) fn take(&mut self, usage: &Value, is_final: bool) {
        let slots = [
            ("input_tokens", &mut self.input),
            ("cache_creation_input_tokens", &mut self.cache_write),
            ("cache_read_input_tokens", &mut self.cache_read),
            ("output_tokens", &mut self.output),
        ];
        for (key, slot) in slots {
            if let Some(n) = usage.get(key).and_then(Value::as_u64) {
                *slot = n;
            }
        }
        if usage.get("cache_creation").is_some_and(Value::is_object)
            || usage.get("cache_creation_input_tokens").is_some()
        {
            (self.cache_write, self.cache_write_1h) = super::cache_writes(usage);
        }
        self.complete |= is_final;
    }

    pub(super) fn get(&self) -> Option<Usage> {
        self.complete.then(|| Usage {
            prompt_tokens: self
                .input
                .saturating_add(self.cache_write)
                .saturating_add(self.cache_read),
            completion_tokens: self.output,
            cache_read_tokens: self.cache_read,
            cache_write_tokens: self.cache_write,
            cache_write_1h_tokens: self.cache_write_1h,
            reasoning_tokens: 0,
        })
    }
}

/// The error for data that is not a JSON object, as the OpenAI rewriter reports it.
pub(super) fn not_json() -> StreamStep {
    StreamStep::UpstreamError(json!({
        "message": "upstream sent a stream event that is not a JSON object"
    }))
}

/// An Anthropic event's data as an object, and its type (the data's `type`, else the
/// `event:` name).
pub(super) fn parse_event(event: Option<&str>, data: &str) -> Option<(Value, String)> {
    let v: Value = serde_json::from_str(data).ok()?;
    v.as_object()?;
    let ty = v
        .get("type")
        .and_then(Value::as_str)
        .or(event)
        .unwrap_or_default()
        .to_owned();
    Some((v, ty))
}

/// The error object of an `error` event (`{"type":"overloaded_error","message":…}`).
pub(super) fn error_object(v: &Value) -> Value {
    v.get("error").cloned().unwrap_or_else(|| v.clone())
}
