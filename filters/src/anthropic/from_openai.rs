//! OpenAI-compatible upstream, Anthropic client: chat chunks as Anthropic's event sequence.
//!
//! Content opens a text block; each tool-call index opens a tool_use block of its own (the
//! block open before it is stopped, as Anthropic streams one block at a time); the finish
//! stops the open block. `message_delta` and `message_stop` are written by `close`, because
//! OpenAI sends the usage after the finish and Anthropic puts it in `message_delta`.

use std::collections::HashMap;

use serde_json::{json, Value};

use super::events::not_json;
use super::finish_to_stop_reason;
use super::named_event;
use crate::cost::Cost;
use crate::openai::stream::StreamStep;
use crate::translator::StreamTranslator;
use crate::{GatewayError, Usage};

#[derive(Debug)]
pub struct FromOpenAi {
    model: String,
    started: bool,
    /// The Anthropic index of the next block to open.
    next_block: u64,
    /// The open block's index, and whether it is text.
    open: Option<(u64, bool)>,
    /// OpenAI tool-call index → Anthropic block index.
    tools: HashMap<u64, u64>,
    stop_reason: Option<&'static str>,
    usage: Option<Usage>,
    delivered: String,
    output: bool,
    finished: bool,
}

impl FromOpenAi {
    pub fn new(model: &str) -> FromOpenAi {
        FromOpenAi {
            model: model.to_owned(),
            started: false,
            next_block: 0,
            open: None,
            tools: HashMap::new(),
            stop_reason: None,
            usage: None,
            delivered: String::new(),
            output: false,
            finished: false,
        }
    }

    fn start(&mut self, id: &str, out: &mut Vec<u8>) {
        if std::mem::replace(&mut self.started, true) {
            return;
        }
        out.extend(named_event(
            "message_start",
            &json!({
                "type": "message_start",
                "message": {
                    "id": format!("msg_{id}"), "type": "message", "role": "assistant",
                    "model": self.model, "content": [], "stop_reason": null,
                    "stop_sequence": null, "usage": { "input_tokens": 0, "output_tokens": 0 },
                },
            }),
        ));
    }

    fn stop_open(&mut self, out: &mut Vec<u8>) {
        if let Some((index, _)) = self.open.take() {
            let stop = json!({ "type": "content_block_stop", "index": index });
            out.extend(named_event("content_block_stop", &stop));
        }
    }

    fn open_block(&mut self, block: Value, is_text: bool, out: &mut Vec<u8>) -> u64 {
        self.stop_open(out);
        let index = self.next_block;
        self.next_block += 1;
        self.open = Some((index, is_text));
        let start =
            json!({ "type": "content_block_start", "index": index, "content_block": block });
        out.extend(named_event("content_block_start", &start));
        index
    }

    fn delta(index: u64, delta: Value, out: &mut Vec<u8>) {
        let d = json!({ "type": "content_block_delta", "index": index, "delta": delta });
        out.extend(named_event("content_block_delta", &d));
    }

    fn text(&mut self, text: &str, out: &mut Vec<u8>) {
        if text.is_empty() {
            // The role chunk's "" opens nothing: Anthropic never streams an empty text block.
            return;
        }
        let index = match self.open {
            Some((index, true)) => index,
            _ => self.open_block(json!({ "type": "text", "text": "" }), true, out),
        };
        self.output = true;
        self.delivered.push_str(text);
        Self::delta(index, json!({ "type": "text_delta", "text": text }), out);
    }

    fn tool_call(&mut self, call: &Value, out: &mut Vec<u8>) {
        let key = call["index"].as_u64().unwrap_or(0);
        let f = &call["function"];
        let index = match self.tools.get(&key) {
            // A fragment for a tool block already stopped (providers that interleave parallel
            // calls) still names its own block; Anthropic SDKs accumulate by index.
            Some(&index) => index,
            None => {
                let name = f["name"].as_str().unwrap_or_default();
                self.delivered.push_str(name);
                let id = match call["id"].as_str() {
                    Some(id) => id.to_owned(),
                    None => format!("toolu_{}", self.next_block),
                };
                let block = json!({ "type": "tool_use", "id": id, "name": name, "input": {} });
                let index = self.open_block(block, false, out);
                self.tools.insert(key, index);
                index
            }
        };
        self.output = true;
        if let Some(args) = f["arguments"].as_str().filter(|a| !a.is_empty()) {
            self.delivered.push_str(args);
            let delta = json!({ "type": "input_json_delta", "partial_json": args });
            Self::delta(index, delta, out);
        }
    }
}

impl StreamTranslator for FromOpenAi {
    fn on_event(&mut self, _event: Option<&str>, data: &str) -> StreamStep {
        let data = data.trim();
        if data == "[DONE]" {
            return StreamStep::Done;
        }
        let Ok(Value::Object(chunk)) = serde_json::from_str::<Value>(data) else {
            return not_json();
        };
        if let Some(err) = chunk.get("error").filter(|e| !e.is_null()) {
            return StreamStep::UpstreamError(err.clone());
        }
        let mut out = Vec::new();
        self.start(
            chunk
                .get("id")
                .and_then(Value::as_str)
                .unwrap_or("tollgate"),
            &mut out,
        );
        if let Some(u) = chunk.get("usage").and_then(Usage::from_json) {
            self.usage = Some(u);
        }
        let choices = chunk.get("choices").and_then(Value::as_array);
        // Only choice 0 is translated: an Anthropic message has one.
        let choice = choices
            .into_iter()
            .flatten()
            .find(|c| c["index"].as_u64().unwrap_or(0) == 0);
        if let Some(c) = choice {
            let d = &c["delta"];
            for key in ["content", "refusal"] {
                self.text(d[key].as_str().unwrap_or_default(), &mut out);
            }
            for call in d["tool_calls"].as_array().into_iter().flatten() {
                self.tool_call(call, &mut out);
            }
            if let Some(finish) = c["finish_reason"].as_str() {
                self.stop_open(&mut out);
                // A stream that called tools stopped for them, whatever "stop" the server said.
                self.stop_reason = Some(match finish_to_stop_reason(finish) {
                    "end_turn" if !self.tools.is_empty() => "tool_use",
                    s => s,
                });
                self.finished = true;
                self.output = true;
            }
        }
        StreamStep::Emit(out)
    }

    fn has_output(&self) -> bool {
        self.output
    }

    fn finished(&self) -> bool {
        self.finished
    }

    fn upstream_usage(&self) -> Option<Usage> {
        self.usage
    }

    fn delivered_text(&self) -> &str {
        &self.delivered
    }

    fn close(&mut self, usage: Usage, cost: Option<&Cost>) -> Vec<u8> {
        let mut out = Vec::new();
        self.start("tollgate", &mut out);
        self.stop_open(&mut out);
        self.finished = true;
        let mut delta = json!({
            "type": "message_delta",
            "delta": {
                "stop_reason": self.stop_reason.unwrap_or("end_turn"),
                "stop_sequence": null,
            },
            "usage": {
                "input_tokens": usage.prompt_tokens,
                "output_tokens": usage.completion_tokens,
            },
        });
        if let Some(c) = cost {
            c.add_to(&mut delta["usage"]);
        }
        out.extend(named_event("message_delta", &delta));
        out.extend(named_event(
            "message_stop",
            &json!({ "type": "message_stop" }),
        ));
        out
    }

    fn error_event(&mut self, err: &GatewayError) -> Vec<u8> {
        super::error::error_event(err)
    }
}
