//! Anthropic upstream, Anthropic client: every event is copied as it came, but for the model
//! name in `message_start`, while the stream's output, finish and usage are noted for the
//! relay. `message_delta` (the usage) and `message_stop` are held back and written by `close`,
//! after the relay settled, with the cost in the usage.

use std::collections::BTreeSet;

use serde_json::{json, Value};

use super::events::{error_object, not_json, parse_event, UsageTrack};
use super::{named_event, with_member};
use crate::cost::Cost;
use crate::openai::stream::StreamStep;
use crate::translator::StreamTranslator;
use crate::{GatewayError, Usage};

#[derive(Debug)]
pub struct Passthrough {
    /// The model as a JSON string, spliced into `message_start`.
    model_json: String,
    usage: UsageTrack,
    delivered: String,
    output: bool,
    finished: bool,
    /// Content blocks started and not stopped, to close them if the upstream did not.
    open_blocks: BTreeSet<u64>,
    /// The upstream's `message_delta` (its `event:` name and data), held back for the close.
    held_delta: Option<(String, String)>,
}

impl Passthrough {
    pub fn new(model: &str) -> Passthrough {
        Passthrough {
            model_json: Value::String(model.to_owned()).to_string(),
            usage: UsageTrack::default(),
            delivered: String::new(),
            output: false,
            finished: false,
            open_blocks: BTreeSet::new(),
            held_delta: None,
        }
    }

    /// `message_start` with `message.model` replaced; the rest kept exactly.
    fn message_start(&self, data: &str) -> Option<String> {
        let message = super::member_text(data, "message")?;
        let message = with_member(&message, "model", &self.model_json)?;
        with_member(data, "message", &message)
    }

    fn note(&mut self, ty: &str, v: &Value) {
        match ty {
            "message_start" => self.usage.take(&v["message"]["usage"], false),
            "content_block_start" => {
                self.open_blocks.insert(v["index"].as_u64().unwrap_or(0));
                let block = &v["content_block"];
                match block["type"].as_str() {
                    Some("text") => self.text(block["text"].as_str()),
                    Some("tool_use" | "server_tool_use") => {
                        self.output = true;
                        self.text(block["name"].as_str());
                    }
                    // An empty thinking block is not output yet (its deltas are); a redacted
                    // one arrives whole.
                    Some("redacted_thinking") => self.output = true,
                    _ => {}
                }
            }
            "content_block_delta" => {
                let d = &v["delta"];
                match d["type"].as_str() {
                    Some("text_delta") => self.text(d["text"].as_str()),
                    Some("input_json_delta") => self.text(d["partial_json"].as_str()),
                    Some("thinking_delta") => {
                        // Thinking is billed as output, so it is counted when usage is missing.
                        let t = d["thinking"].as_str();
                        self.output |= t.is_some_and(|t| !t.is_empty());
                        self.text(t);
                    }
                    _ => {}
                }
            }
            "content_block_stop" => {
                self.open_blocks.remove(&v["index"].as_u64().unwrap_or(0));
            }
            "message_delta" => {
                self.usage.take(&v["usage"], true);
                if !v["delta"]["stop_reason"].is_null() {
                    self.finished = true;
                    self.output = true;
                }
            }
            _ => {}
        }
    }

    fn text(&mut self, text: Option<&str>) {
        if let Some(t) = text.filter(|t| !t.is_empty()) {
            self.output = true;
            self.delivered.push_str(t);
        }
    }
}

/// `event: <name>` and the data, a `data:` line per line of it, so a multi-line data field
/// the decoder joined is framed as the upstream framed it.
fn reframe(name: &str, data: &str) -> Vec<u8> {
    let mut out = Vec::with_capacity(data.len() + name.len() + 16);
    out.extend_from_slice(b"event: ");
    out.extend_from_slice(name.as_bytes());
    out.push(b'\n');
    for line in data.split('\n') {
        out.extend_from_slice(b"data: ");
        out.extend_from_slice(line.as_bytes());
        out.push(b'\n');
    }
    out.push(b'\n');
    out
}

impl StreamTranslator for Passthrough {
    fn on_event(&mut self, event: Option<&str>, data: &str) -> StreamStep {
        let Some((v, ty)) = parse_event(event, data) else {
            return not_json();
        };
        self.note(&ty, &v);
        let name = event.unwrap_or(&ty);
        match ty.as_str() {
            "message_stop" => StreamStep::Done,
            "error" => StreamStep::UpstreamError(error_object(&v)),
            "message_start" => match self.message_start(data) {
                Some(d) => StreamStep::Emit(reframe(name, &d)),
                None => not_json(),
            },
            "message_delta" => {
                self.held_delta = Some((name.to_owned(), data.to_owned()));
                StreamStep::Emit(Vec::new())
            }
            _ => StreamStep::Emit(reframe(name, data)),
        }
    }

    fn has_output(&self) -> bool {
        self.output
    }

    fn finished(&self) -> bool {
        self.finished
    }

    fn upstream_usage(&self) -> Option<Usage> {
        self.usage.get()
    }

    fn delivered_text(&self) -> &str {
        &self.delivered
    }

    fn close(&mut self, usage: Usage, cost: Option<&Cost>) -> Vec<u8> {
        let mut out = Vec::new();
        if let Some((name, data)) = self.held_delta.take() {
            // The cost goes into the upstream's usage; the rest of the event is as it came.
            let with_cost = cost.and_then(|c| {
                let mut v: Value = serde_json::from_str(&data).ok()?;
                c.add_to(v.get_mut("usage")?);
                Some(v.to_string())
            });
            out.extend(reframe(&name, with_cost.as_deref().unwrap_or(&data)));
        }
        if !self.finished {
            for index in std::mem::take(&mut self.open_blocks) {
                let stop = json!({ "type": "content_block_stop", "index": index });
                out.extend(named_event("content_block_stop", &stop));
            }
            self.finished = true;
            let mut delta = json!({
                "type": "message_delta",
                "delta": { "stop_reason": "end_turn", "stop_sequence": null },
                "usage": { "output_tokens": usage.completion_tokens },
            });
            if let Some(c) = cost {
                c.add_to(&mut delta["usage"]);
            }
            out.extend(named_event("message_delta", &delta));
        }
        out.extend(named_event(
            "message_stop",
            &json!({ "type": "message_stop" }),
        ));
        out
    }

    fn error_event(&mut self, err: &GatewayError) -> Vec<u8> {
        // A `message_delta` held back goes first, as it would have without the break.
        let mut out = match self.held_delta.take() {
            Some((name, data)) => reframe(&name, &data),
            None => Vec::new(),
        };
        out.extend(super::error::error_event(err));
        out
    }
}
