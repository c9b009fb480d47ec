//! Streams: the three [`StreamTranslator`]s that involve Anthropic.
//!
//! - [`ToOpenAi`] (here): an Anthropic event stream as OpenAI chunks.
//! - [`Passthrough`] (`passthrough.rs`): Anthropic to an Anthropic client, events copied as
//!   they came but for the model name.
//! - [`FromOpenAi`] (`from_openai.rs`): OpenAI chunks as Anthropic events.
//!
//! Anthropic's events (https://docs.anthropic.com/en/docs/build-with-claude/streaming):
//! `message_start`, then per content block `content_block_start`, `content_block_delta`s and
//! `content_block_stop`, then `message_delta` (stop reason, usage) and `message_stop`; `ping`
//! anywhere, `error` in place of any of them.

use std::collections::HashMap;

use serde_json::{json, Value};

use super::events::{error_object, not_json, parse_event, UsageTrack};
pub use super::from_openai::FromOpenAi;
pub use super::passthrough::Passthrough;
use super::{openai_usage_json, stop_reason_to_finish};
use crate::cost::Cost;
use crate::openai::stream::{sse_event, StreamStep, DONE_EVENT};
use crate::translator::StreamTranslator;
use crate::{GatewayError, Usage};

/// Anthropic upstream, OpenAI client.
#[derive(Debug)]
pub struct ToOpenAi {
    model: String,
    client_wants_usage: bool,
    created: u64,
    id: String,
    usage: UsageTrack,
    /// Anthropic content-block index of each tool_use block → its OpenAI tool-call index.
    tool_index: HashMap<u64, u64>,
    delivered: String,
    output: bool,
    finished: bool,
}

impl ToOpenAi {
    pub fn new(model: &str, client_wants_usage: bool, created: u64) -> ToOpenAi {
        ToOpenAi {
            model: model.to_owned(),
            client_wants_usage,
            created,
            id: "chatcmpl-tollgate".to_owned(),
            usage: UsageTrack::default(),
            tool_index: HashMap::new(),
            delivered: String::new(),
            output: false,
            finished: false,
        }
    }

    fn chunk(&self, delta: Value, finish: Option<&str>) -> Vec<u8> {
        sse_event(&json!({
            "id": self.id,
            "object": "chat.completion.chunk",
            "created": self.created,
            "model": self.model,
            "choices": [{ "index": 0, "delta": delta, "finish_reason": finish }],
        }))
    }

    fn text(&mut self, text: &str) -> Vec<u8> {
        if text.is_empty() {
            return Vec::new();
        }
        self.output = true;
        self.delivered.push_str(text);
        self.chunk(json!({ "content": text }), None)
    }

    fn block_start(&mut self, v: &Value) -> Vec<u8> {
        let block = &v["content_block"];
        match block["type"].as_str() {
            Some("text") => self.text(block["text"].as_str().unwrap_or_default()),
            // Server tools (web search…) ran at Anthropic: not calls for the client to make.
            Some("tool_use") => {
                let k = self.tool_index.len() as u64;
                self.tool_index.insert(v["index"].as_u64().unwrap_or(0), k);
                let name = block["name"].as_str().unwrap_or_default();
                self.delivered.push_str(name);
                self.output = true;
                self.chunk(
                    json!({ "tool_calls": [{
                        "index": k, "id": block["id"], "type": "function",
                        "function": { "name": name, "arguments": "" },
                    }]}),
                    None,
                )
            }
            _ => Vec::new(),
        }
    }

    fn block_delta(&mut self, v: &Value) -> Vec<u8> {
        let delta = &v["delta"];
        match delta["type"].as_str() {
            Some("text_delta") => self.text(delta["text"].as_str().unwrap_or_default()),
            Some("input_json_delta") => {
                let index = v["index"].as_u64().unwrap_or(0);
                let part = delta["partial_json"].as_str().unwrap_or_default();
                match self.tool_index.get(&index) {
                    Some(&k) if !part.is_empty() => {
                        self.delivered.push_str(part);
                        self.output = true;
                        self.chunk(
                            json!({ "tool_calls": [{ "index": k, "function": { "arguments": part } }] }),
                            None,
                        )
                    }
                    _ => Vec::new(),
                }
            }
            // Thinking, signatures, citations: OpenAI chunks have no place for them.
            _ => Vec::new(),
        }
    }
}

impl StreamTranslator for ToOpenAi {
    fn on_event(&mut self, event: Option<&str>, data: &str) -> StreamStep {
        let Some((v, ty)) = parse_event(event, data) else {
            return not_json();
        };
        let out = match ty.as_str() {
            "message_start" => {
                let msg = &v["message"];
                if let Some(id) = msg["id"].as_str() {
                    self.id = format!("chatcmpl-{id}");
                }
                self.usage.take(&msg["usage"], false);
                self.chunk(json!({ "role": "assistant", "content": "" }), None)
            }
            "content_block_start" => self.block_start(&v),
            "content_block_delta" => self.block_delta(&v),
            "message_delta" => {
                self.usage.take(&v["usage"], true);
                let stop = v["delta"]["stop_reason"].as_str().unwrap_or("end_turn");
                self.finished = true;
                self.output = true;
                self.chunk(json!({}), Some(stop_reason_to_finish(stop)))
            }
            "message_stop" => return StreamStep::Done,
            "error" => return StreamStep::UpstreamError(error_object(&v)),
            // ping, content_block_stop, and events newer than this code.
            _ => Vec::new(),
        };
        StreamStep::Emit(out)
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
        if !self.finished {
            self.finished = true;
            out.extend(self.chunk(json!({}), Some("stop")));
        }
        // The upstream's usage never reaches the client as a chunk of its own: it is written
        // here, once, if the client asked for it, with the cost.
        if self.client_wants_usage {
            let mut u = openai_usage_json(usage);
            if let Some(c) = cost {
                c.add_to(&mut u);
            }
            out.extend(sse_event(&json!({
                "id": self.id,
                "object": "chat.completion.chunk",
                "created": self.created,
                "model": self.model,
                "choices": [],
                "usage": u,
            })));
        }
        out.extend_from_slice(DONE_EVENT);
        out
    }

    fn error_event(&mut self, err: &GatewayError) -> Vec<u8> {
        sse_event(&err.to_value())
    }
}
