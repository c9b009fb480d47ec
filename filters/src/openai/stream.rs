//! Rewriting an upstream's SSE chat stream for the client, one event at a time.
//!
//! Each chunk gets the model name the client is told (the pinned id actually used), the usage
//! chunk the gateway asked for is kept only when the client asked for it too (held back and
//! written by [`StreamRewriter::close`], after the settlement, with the cost in its usage), a
//! chunk that carries both content and `finish_reason` is split so that the last content chunk
//! has an empty delta (SPEC.md), and the text delivered so far is kept for the tokenizer
//! fallback.

use std::borrow::Cow;

use serde::de::{Deserialize, Deserializer};
use serde_json::value::RawValue;
use serde_json::{Map, Value};

use crate::cost::Cost;
use crate::json::splice::{splice_members, Members};
use crate::Usage;

/// What one upstream event means for the client.
#[derive(Debug, PartialEq)]
pub enum StreamStep {
    /// Bytes to send to the client (zero or more complete SSE events).
    Emit(Vec<u8>),
    /// The upstream sent `[DONE]`.
    Done,
    /// The upstream reported an error inside the stream; the value is its error object.
    UpstreamError(Value),
}

#[derive(Debug)]
pub struct StreamRewriter {
    model: String,
    client_wants_usage: bool,
    usage: Option<Usage>,
    /// The upstream's usage chunk, for a client that asked for it: held back until the close,
    /// which adds the cost to its usage object (the object's other members kept).
    held_usage: Option<Map<String, Value>>,
    /// Content and tool-call text delivered, for counting when no usage arrives.
    delivered_text: String,
    finished: bool,
    /// A chunk carried output: content, a tool call, a refusal or a finish (not a role alone).
    output: bool,
    /// The JSON text of the last chunk's `id` and `created`, for synthesised chunks.
    last_id: Option<String>,
    last_created: Option<String>,
    /// `model` as a JSON string, spliced into every chunk.
    model_json: String,
    pub chunks_emitted: u64,
}

pub fn sse_event(json: &Value) -> Vec<u8> {
    let mut out = Vec::with_capacity(128);
    out.extend_from_slice(b"data: ");
    // Writing a Value into a Vec cannot fail.
    let _ = serde_json::to_writer(&mut out, json);
    out.extend_from_slice(b"\n\n");
    out
}

pub const DONE_EVENT: &[u8] = b"data: [DONE]\n\n";

impl StreamRewriter {
    pub fn new(model: &str, client_wants_usage: bool) -> Self {
        StreamRewriter {
            model: model.to_owned(),
            client_wants_usage,
            usage: None,
            held_usage: None,
            delivered_text: String::new(),
            finished: false,
            output: false,
            last_id: None,
            last_created: None,
            model_json: Value::String(model.to_owned()).to_string(),
            chunks_emitted: 0,
        }
    }

    pub fn upstream_usage(&self) -> Option<Usage> {
        self.usage
    }

    pub fn delivered_text(&self) -> &str {
        &self.delivered_text
    }

    /// A chunk with `finish_reason` has been seen.
    pub fn finished(&self) -> bool {
        self.finished
    }

    /// Whether any chunk so far carried output: content, a tool call, a refusal or a finish.
    /// A role-only first chunk does not count, so a stream is committed to the client (and
    /// charged) only from its first real output (DESIGN.md, Rules: Routing).
    pub fn has_output(&self) -> bool {
        self.output
    }

    pub fn on_event(&mut self, data: &str) -> StreamStep {
        let data = data.trim();
        if data == "[DONE]" {
            return StreamStep::Done;
        }
        if let Some(out) = self.fast_chunk(data) {
            return StreamStep::Emit(out);
        }
        self.general_chunk(data)
    }

    /// Any chunk, through a JSON tree.
    pub(super) fn general_chunk(&mut self, data: &str) -> StreamStep {
        let Ok(Value::Object(mut chunk)) = serde_json::from_str::<Value>(data) else {
            return StreamStep::UpstreamError(serde_json::json!({
                "message": "upstream sent a stream event that is not a JSON object"
            }));
        };
        if let Some(err) = chunk.get("error") {
            if !err.is_null() {
                return StreamStep::UpstreamError(err.clone());
            }
        }
        if let Some(u) = chunk.get("usage").and_then(Usage::from_json) {
            self.usage = Some(u);
        }
        let no_choices = chunk
            .get("choices")
            .and_then(Value::as_array)
            .is_none_or(|c| c.is_empty());
        if !self.client_wants_usage {
            if no_choices && chunk.contains_key("usage") {
                return StreamStep::Emit(Vec::new());
            }
            chunk.remove("usage");
        }
        self.stamp(&mut chunk);
        if chunk.get("usage").is_some_and(Value::is_object) {
            // Held back for the close. A usage chunk is held whole; usage riding on a chunk
            // with choices becomes a usage chunk of its own, its choices sent now.
            if no_choices {
                self.held_usage = Some(chunk);
                return StreamStep::Emit(Vec::new());
            }
            self.held_usage = Some(take_usage_chunk(&mut chunk));
        }
        let split_finish = self.read_choices(&mut chunk);
        StreamStep::Emit(self.emit(chunk, split_finish))
    }

    /// Writes the model name the client is told and the chunk's object type into the chunk,
    /// and remembers its `id` and `created` for the chunks the gateway synthesises.
    fn stamp(&mut self, chunk: &mut Map<String, Value>) {
        chunk.insert("model".into(), Value::String(self.model.clone()));
        chunk.insert(
            "object".into(),
            Value::String("chat.completion.chunk".into()),
        );
        if let Some(id) = chunk.get("id") {
            remember(&mut self.last_id, &id.to_string());
        }
        if let Some(c) = chunk.get("created") {
            remember(&mut self.last_created, &c.to_string());
        }
    }

    /// Reads each choice's delivered text and finish, and gives every choice a
    /// `finish_reason`. A choice with both content and a finish keeps its content here and
    /// its finish is returned, for a chunk of its own (SPEC.md: the last content chunk has an
    /// empty delta).
    fn read_choices(&mut self, chunk: &mut Map<String, Value>) -> Option<Value> {
        let Some(Value::Array(choices)) = chunk.get_mut("choices") else {
            return None;
        };
        let mut split_finish = None;
        for choice in choices.iter_mut() {
            let Some(choice) = choice.as_object_mut() else {
                continue;
            };
            if let Some(delta) = choice.get("delta").and_then(Value::as_object) {
                self.collect_text(delta);
            }
            let finish = choice.get("finish_reason").cloned().unwrap_or(Value::Null);
            if !finish.is_null() {
                self.finished = true;
                self.output = true;
                let has_content = choice
                    .get("delta")
                    .and_then(Value::as_object)
                    .is_some_and(|d| d.values().any(|v| !v.is_null()));
                if has_content {
                    // Keep the content in this chunk; the finish goes in one of its own.
                    choice.insert("finish_reason".into(), Value::Null);
                    let idx = choice.get("index").cloned().unwrap_or(0.into());
                    split_finish = Some(serde_json::json!({
                        "index": idx, "delta": {}, "finish_reason": finish
                    }));
                }
            } else if !choice.contains_key("finish_reason") {
                choice.insert("finish_reason".into(), Value::Null);
            }
        }
        split_finish
    }

    /// The chunk as an SSE event, then the finish split off it (if any) as a chunk of its own
    /// with the same identity, carrying the chunk's usage.
    fn emit(&mut self, mut chunk: Map<String, Value>, split_finish: Option<Value>) -> Vec<u8> {
        let mut out = Vec::new();
        let Some(fin) = split_finish else {
            out.extend(sse_event(&Value::Object(chunk)));
            self.chunks_emitted += 1;
            return out;
        };
        let mut tail = Map::new();
        for k in ["id", "object", "created", "model", "system_fingerprint"] {
            if let Some(v) = chunk.get(k) {
                tail.insert(k.into(), v.clone());
            }
        }
        tail.insert("choices".into(), Value::Array(vec![fin]));
        let usage = chunk.remove("usage");
        out.extend(sse_event(&Value::Object(chunk)));
        if let Some(u) = usage {
            tail.insert("usage".into(), u);
        }
        out.extend(sse_event(&Value::Object(tail)));
        self.chunks_emitted += 2;
        out
    }

    /// The common chunk — choices that carry content and no `finish_reason` yet, no usage,
    /// no error — rewritten without building a JSON tree: its members are located in place
    /// and copied with `model` and `object` spliced in. `None` sends the chunk down the
    /// general path (finish chunks, usage chunks, errors, anything unusual).
    pub(super) fn fast_chunk(&mut self, data: &str) -> Option<Vec<u8>> {
        // A multi-line `data:` field joined by the decoder would break the event's framing
        // if copied as is; the general path writes it compactly.
        if data.bytes().any(|b| b == b'\n' || b == b'\r') {
            return None;
        }
        let Members(members) = serde_json::from_str::<Members<'_>>(data).ok()?;
        if members.iter().any(|(k, _)| k == "usage" || k == "error") {
            return None;
        }
        let choices = members.iter().find(|(k, _)| k == "choices")?.1;
        let choices: Vec<FastChoice<'_>> = serde_json::from_str(choices.get()).ok()?;
        if choices.is_empty()
            || !choices
                .iter()
                .all(|c| c.finish_reason.is_some_and(|f| f.get() == "null"))
        {
            return None;
        }
        for d in choices.iter().filter_map(|c| c.delta.as_ref()) {
            if let Some(s) = &d.content {
                self.delivered_text.push_str(s);
                self.output |= !s.is_empty();
            }
            self.output |= d.refusal.as_deref().is_some_and(|r| !r.is_empty())
                || d.tool_calls.as_ref().is_some_and(|c| !c.is_empty());
            for f in d
                .tool_calls
                .iter()
                .flatten()
                .filter_map(|c| c.function.as_ref())
            {
                for s in [&f.name, &f.arguments].into_iter().flatten() {
                    self.delivered_text.push_str(s);
                }
            }
        }

        for (k, v) in &members {
            match k.as_ref() {
                "id" => remember(&mut self.last_id, v.get()),
                "created" => remember(&mut self.last_created, v.get()),
                _ => {}
            }
        }
        let mut out = Vec::with_capacity(data.len() + self.model_json.len() + 48);
        out.extend_from_slice(b"data: ");
        splice_members(
            data.as_bytes(),
            &members,
            &[
                ("model", self.model_json.as_bytes()),
                ("object", b"\"chat.completion.chunk\""),
            ],
            &mut out,
        );
        out.extend_from_slice(b"\n\n");
        self.chunks_emitted += 1;
        Some(out)
    }

    fn collect_text(&mut self, delta: &Map<String, Value>) {
        if let Some(Value::String(s)) = delta.get("content") {
            self.delivered_text.push_str(s);
            self.output |= !s.is_empty();
        }
        if let Some(Value::String(s)) = delta.get("refusal") {
            self.output |= !s.is_empty();
        }
        if let Some(Value::Array(calls)) = delta.get("tool_calls") {
            self.output |= !calls.is_empty();
            for c in calls {
                if let Some(f) = c.get("function") {
                    for k in ["name", "arguments"] {
                        if let Some(s) = f.get(k).and_then(Value::as_str) {
                            self.delivered_text.push_str(s);
                        }
                    }
                }
            }
        }
    }

    /// A usage chunk for a client that asked for one when the upstream sent none.
    fn synthetic_usage_chunk(&self, usage: Usage) -> Value {
        serde_json::json!({
            "id": raw_or(&self.last_id, "chatcmpl-tollgate".into()),
            "object": "chat.completion.chunk",
            "created": raw_or(&self.last_created, 0.into()),
            "model": self.model,
            "choices": [],
            "usage": usage.to_json(),
        })
    }

    /// The upstream's usage chunk held back, if any.
    pub fn take_held_usage(&mut self) -> Option<Value> {
        self.held_usage.take().map(Value::Object)
    }

    /// The stream's end, after the settlement: the finish the upstream never sent, the usage
    /// chunk the client asked for (the upstream's held back, else one with `usage`) with the
    /// cost in its usage object, `[DONE]`.
    pub fn close(&mut self, usage: Usage, cost: Option<&Cost>) -> Vec<u8> {
        let mut tail = Vec::new();
        if !self.finished() {
            tail.extend_from_slice(&self.synthetic_finish_chunk());
        }
        if self.client_wants_usage() {
            let mut chunk = self
                .take_held_usage()
                .unwrap_or_else(|| self.synthetic_usage_chunk(usage));
            if let (Some(c), Some(u)) = (cost, chunk.get_mut("usage")) {
                c.add_to(u);
            }
            tail.extend(sse_event(&chunk));
        }
        tail.extend_from_slice(DONE_EVENT);
        tail
    }

    /// The final chunk when the upstream ended with `[DONE]` but never sent a `finish_reason`.
    pub fn synthetic_finish_chunk(&self) -> Vec<u8> {
        sse_event(&serde_json::json!({
            "id": raw_or(&self.last_id, "chatcmpl-tollgate".into()),
            "object": "chat.completion.chunk",
            "created": raw_or(&self.last_created, 0.into()),
            "model": self.model,
            "choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}],
        }))
    }

    pub fn client_wants_usage(&self) -> bool {
        self.client_wants_usage
    }
}

/// Keeps `raw` in `slot`, allocating only when it changed (the id is the same on every
/// chunk of a stream).
fn remember(slot: &mut Option<String>, raw: &str) {
    if slot.as_deref() != Some(raw) {
        *slot = Some(raw.to_owned());
    }
}

fn raw_or(raw: &Option<String>, default: Value) -> Value {
    raw.as_deref()
        .and_then(|r| serde_json::from_str(r).ok())
        .unwrap_or(default)
}

/// The usage riding on a chunk with choices, taken off it as a usage chunk of its own: the
/// chunk's identity members, no choices, the usage.
fn take_usage_chunk(chunk: &mut Map<String, Value>) -> Map<String, Value> {
    let mut held: Map<String, Value> = ["id", "object", "created", "model"]
        .into_iter()
        .chain(["system_fingerprint", "service_tier"])
        .filter_map(|k| Some((k.to_owned(), chunk.get(k)?.clone())))
        .collect();
    held.insert("choices".into(), Value::Array(Vec::new()));
    held.insert("usage".into(), chunk.remove("usage").unwrap_or_default());
    held
}

/// One choice of a chunk, as much as the fast path reads. `finish_reason` is `Some` when the
/// key is present at all (its raw text is `null` on content chunks).
#[derive(serde::Deserialize)]
struct FastChoice<'a> {
    #[serde(borrow, default)]
    delta: Option<FastDelta<'a>>,
    #[serde(borrow, default, deserialize_with = "present")]
    finish_reason: Option<&'a RawValue>,
}

#[derive(serde::Deserialize)]
struct FastDelta<'a> {
    #[serde(borrow, default)]
    content: Option<Cow<'a, str>>,
    #[serde(borrow, default)]
    tool_calls: Option<Vec<FastCall<'a>>>,
    #[serde(borrow, default)]
    refusal: Option<Cow<'a, str>>,
}

#[derive(serde::Deserialize)]
struct FastCall<'a> {
    #[serde(borrow, default)]
    function: Option<FastFunction<'a>>,
}

#[derive(serde::Deserialize)]
struct FastFunction<'a> {
    #[serde(borrow, default)]
    name: Option<Cow<'a, str>>,
    #[serde(borrow, default)]
    arguments: Option<Cow<'a, str>>,
}

fn present<'de, D: Deserializer<'de>>(d: D) -> Result<Option<&'de RawValue>, D::Error> {
    <&RawValue>::deserialize(d).map(Some)
}
