//! A Responses stream: the typed events (`response.created` … `response.completed`, each with
//! its `event:` line and an increasing `sequence_number`) written from the chat-completion
//! chunks of the internal stream shape. It wraps the translator that turns the provider's
//! stream into chat chunks (OpenAI-compatible or Anthropic), so a provider kind is converted to
//! the internal shape once and every client format is written from that shape.

use std::sync::Arc;

use serde_json::{json, Value};

use super::reply::{
    call_item, item_id, message_item, reasoning_item, text_part, Head, Status, Tokens,
};
use super::request::Frame;
use crate::cost::Cost;
use crate::openai::stream::StreamStep;
use crate::translator::StreamTranslator;
use crate::{GatewayError, Usage};

/// One output item as it is being written.
#[derive(Debug)]
enum Item {
    Reasoning {
        id: String,
        text: String,
    },
    Message {
        id: String,
        text: String,
    },
    Call {
        id: String,
        call_id: String,
        name: String,
        args: String,
    },
}

/// What a Responses stream starts from, whichever attempt serves it: the request's frame and
/// the response's id and time.
#[derive(Debug, Clone)]
pub struct Opening {
    pub frame: Arc<Frame>,
    pub id: String,
    pub created_at: u64,
}

pub struct ResponsesStream {
    inner: Box<dyn StreamTranslator>,
    frame: Arc<Frame>,
    head: Head,
    seq: u64,
    started: bool,
    items: Vec<Item>,
    /// The output index of the item still open (taking deltas); items before it are done.
    open: Option<usize>,
    /// Chat tool-call index → output index.
    calls: Vec<(u64, usize)>,
    finish: Option<String>,
    /// Details the chat usage chunk had (cached, reasoning tokens).
    details: Option<Tokens>,
    /// Once ended ([`StreamTranslator::end`]): the events written so far that have not gone
    /// out, and the closing event's name and response object, which get the cost at the close.
    ending: Option<(Vec<u8>, &'static str, Value)>,
    object: Option<Value>,
}

impl ResponsesStream {
    /// `model`: the model of the attempt that streams.
    pub fn new(inner: Box<dyn StreamTranslator>, opening: &Opening, model: &str) -> Self {
        ResponsesStream {
            inner,
            frame: opening.frame.clone(),
            head: Head {
                id: opening.id.clone(),
                created_at: opening.created_at,
                model: model.to_owned(),
            },
            seq: 0,
            started: false,
            items: Vec::new(),
            open: None,
            calls: Vec::new(),
            finish: None,
            details: None,
            ending: None,
            object: None,
        }
    }

    fn event(&mut self, out: &mut Vec<u8>, kind: &str, data: Value) {
        let mut data = data;
        if let Some(o) = data.as_object_mut() {
            o.insert("type".into(), kind.into());
            o.insert("sequence_number".into(), self.seq.into());
        }
        self.seq += 1;
        out.extend_from_slice(b"event: ");
        out.extend_from_slice(kind.as_bytes());
        out.extend_from_slice(b"\ndata: ");
        // Writing a Value into a Vec cannot fail.
        let _ = serde_json::to_writer(&mut *out, &data);
        out.extend_from_slice(b"\n\n");
    }

    fn snapshot(&self, status: Status, usage: Option<Tokens>, error: Option<Value>) -> Value {
        let output = self
            .items
            .iter()
            .map(|i| self.item_json(i, status))
            .collect();
        self.frame
            .response(&self.head, status, output, usage, error)
    }

    fn item_json(&self, item: &Item, status: Status) -> Value {
        let s = if status == Status::InProgress {
            "in_progress"
        } else {
            "completed"
        };
        match item {
            Item::Reasoning { id, text } => reasoning_item(id.clone(), text),
            Item::Message { id, text } => message_item(id.clone(), s, vec![text_part(text)]),
            Item::Call {
                id,
                call_id,
                name,
                args,
            } => call_item(&self.frame, id.clone(), s, call_id, name, args),
        }
    }

    fn start(&mut self, out: &mut Vec<u8>) {
        if std::mem::replace(&mut self.started, true) {
            return;
        }
        let r = self.snapshot(Status::InProgress, None, None);
        self.event(out, "response.created", json!({ "response": r }));
        self.event(out, "response.in_progress", json!({ "response": r }));
    }

    /// Ends the open item with its `.done` events.
    fn close_open(&mut self, out: &mut Vec<u8>) {
        let Some(index) = self.open.take() else {
            return;
        };
        let done = self.item_json(&self.items[index], Status::Completed);
        match &self.items[index] {
            Item::Reasoning { id, text } => {
                let (id, text) = (id.clone(), text.clone());
                let part = json!({"type": "summary_text", "text": text});
                let at = json!({"item_id": id, "output_index": index, "summary_index": 0});
                self.event(
                    out,
                    "response.reasoning_summary_text.done",
                    merge(&at, json!({"text": text})),
                );
                self.event(
                    out,
                    "response.reasoning_summary_part.done",
                    merge(&at, json!({"part": part})),
                );
            }
            Item::Message { id, text } => {
                let (id, text) = (id.clone(), text.clone());
                let at = json!({"item_id": id, "output_index": index, "content_index": 0});
                self.event(
                    out,
                    "response.output_text.done",
                    merge(&at, json!({"text": text, "logprobs": []})),
                );
                self.event(
                    out,
                    "response.content_part.done",
                    merge(&at, json!({"part": text_part(&text)})),
                );
            }
            Item::Call { id, name, args, .. } => {
                let d =
                    json!({"item_id": id, "output_index": index, "name": name, "arguments": args});
                self.event(out, "response.function_call_arguments.done", d);
            }
        }
        self.event(
            out,
            "response.output_item.done",
            json!({"output_index": index, "item": done}),
        );
    }

    fn open_item(&mut self, out: &mut Vec<u8>, item: Item) -> usize {
        self.close_open(out);
        let index = self.items.len();
        let added = self.item_json(&item, Status::InProgress);
        self.items.push(item);
        self.open = Some(index);
        self.event(
            out,
            "response.output_item.added",
            json!({"output_index": index, "item": added}),
        );
        index
    }

    fn reasoning_delta(&mut self, out: &mut Vec<u8>, delta: &str) {
        let index = match self.open {
            Some(i) if matches!(self.items[i], Item::Reasoning { .. }) => i,
            _ => {
                let id = item_id("rs", &self.head, self.items.len());
                let i = self.open_item(
                    out,
                    Item::Reasoning {
                        id: id.clone(),
                        text: String::new(),
                    },
                );
                let part = json!({"type": "summary_text", "text": ""});
                let d = json!({"item_id": id, "output_index": i, "summary_index": 0, "part": part});
                self.event(out, "response.reasoning_summary_part.added", d);
                i
            }
        };
        if let Item::Reasoning { id, text } = &mut self.items[index] {
            text.push_str(delta);
            let d =
                json!({"item_id": id, "output_index": index, "summary_index": 0, "delta": delta});
            self.event(out, "response.reasoning_summary_text.delta", d);
        }
    }

    fn text_delta(&mut self, out: &mut Vec<u8>, delta: &str) {
        let index = match self.open {
            Some(i) if matches!(self.items[i], Item::Message { .. }) => i,
            _ => {
                let id = item_id("msg", &self.head, self.items.len());
                let i = self.open_item(
                    out,
                    Item::Message {
                        id: id.clone(),
                        text: String::new(),
                    },
                );
                let d = json!({"item_id": id, "output_index": i, "content_index": 0, "part": text_part("")});
                self.event(out, "response.content_part.added", d);
                i
            }
        };
        if let Item::Message { id, text } = &mut self.items[index] {
            text.push_str(delta);
            let d = json!({"item_id": id, "output_index": index, "content_index": 0, "delta": delta, "logprobs": []});
            self.event(out, "response.output_text.delta", d);
        }
    }

    fn call_delta(&mut self, out: &mut Vec<u8>, call: &Value) {
        let n = call.get("index").and_then(Value::as_u64).unwrap_or(0);
        let f = &call["function"];
        let index = match self.calls.iter().find(|(c, _)| *c == n) {
            Some(&(_, i)) => i,
            None => {
                let item = Item::Call {
                    id: item_id("fc", &self.head, self.items.len()),
                    call_id: call["id"].as_str().unwrap_or("").to_owned(),
                    name: f["name"].as_str().unwrap_or("").to_owned(),
                    args: String::new(),
                };
                let i = self.open_item(out, item);
                self.calls.push((n, i));
                i
            }
        };
        // Providers send parallel calls one after the other; a delta for a call already closed
        // (interleaved calls) reopens nothing: it is added to that item, which the final
        // response object carries whole.
        let Some(delta) = f["arguments"].as_str().filter(|d| !d.is_empty()) else {
            return;
        };
        if let Item::Call { id, args, .. } = &mut self.items[index] {
            args.push_str(delta);
            let id = id.clone();
            if self.open == Some(index) {
                let d = json!({"item_id": id, "output_index": index, "delta": delta});
                self.event(out, "response.function_call_arguments.delta", d);
            }
        }
    }

    /// The inner translator's chat chunks as Responses events.
    fn translate(&mut self, chunks: &[u8], out: &mut Vec<u8>) {
        self.start(out);
        for data in data_lines(chunks) {
            let Ok(chunk) = serde_json::from_str::<Value>(data) else {
                continue;
            };
            if let Some(t) = chunk.get("usage").and_then(Tokens::from_chat) {
                self.details = Some(t);
            }
            let Some(choice) = chunk.pointer("/choices/0") else {
                continue;
            };
            let delta = &choice["delta"];
            if let Some(r) = delta
                .get("reasoning_content")
                .or_else(|| delta.get("reasoning"))
                .and_then(Value::as_str)
                .filter(|s| !s.is_empty())
            {
                self.reasoning_delta(out, r);
            }
            for key in ["content", "refusal"] {
                if let Some(t) = delta[key].as_str().filter(|s| !s.is_empty()) {
                    self.text_delta(out, t);
                }
            }
            if let Some(calls) = delta["tool_calls"].as_array() {
                for call in calls {
                    self.call_delta(out, call);
                }
            }
            if let Some(f) = choice["finish_reason"].as_str() {
                self.finish = Some(f.to_owned());
            }
        }
    }

    fn emit(&mut self, step: StreamStep) -> StreamStep {
        match step {
            StreamStep::Emit(chunks) => {
                let mut out = Vec::with_capacity(chunks.len() * 2);
                self.translate(&chunks, &mut out);
                StreamStep::Emit(out)
            }
            other => other,
        }
    }
}

fn merge(a: &Value, b: Value) -> Value {
    let mut a = a.clone();
    if let (Some(a), Value::Object(b)) = (a.as_object_mut(), b) {
        a.extend(b);
    }
    a
}

/// The `data:` payloads of complete SSE events written by a chat translator.
fn data_lines(bytes: &[u8]) -> impl Iterator<Item = &str> {
    std::str::from_utf8(bytes)
        .unwrap_or("")
        .split('\n')
        .filter_map(|l| l.strip_prefix("data: "))
        .filter(|d| *d != "[DONE]")
}

impl StreamTranslator for ResponsesStream {
    fn on_event(&mut self, event: Option<&str>, data: &str) -> StreamStep {
        let step = self.inner.on_event(event, data);
        self.emit(step)
    }
    fn has_output(&self) -> bool {
        self.inner.has_output()
    }
    fn finished(&self) -> bool {
        self.inner.finished()
    }
    fn upstream_usage(&self) -> Option<Usage> {
        self.inner.upstream_usage()
    }
    fn delivered_text(&self) -> &str {
        self.inner.delivered_text()
    }
    fn end(&mut self, usage: Usage, failure: Option<&GatewayError>) {
        if self.ending.is_some() {
            return;
        }
        let mut out = Vec::new();
        let (kind, r) = match failure {
            None => {
                let tail = self.inner.close(usage, None);
                self.translate(&tail, &mut out);
                self.close_open(&mut out);
                let details = self.details.unwrap_or_default();
                let tokens = Tokens {
                    input: usage.prompt_tokens,
                    output: usage.completion_tokens,
                    cached: details.cached.max(usage.cache_read_tokens),
                    reasoning: details.reasoning.max(usage.reasoning_tokens),
                };
                let status = Status::from_finish(self.finish.as_deref());
                let kind = match status {
                    Status::Incomplete(_) => "response.incomplete",
                    _ => "response.completed",
                };
                (kind, self.snapshot(status, Some(tokens), None))
            }
            Some(err) => {
                let message = err.to_value()["error"]["message"].clone();
                let error = json!({"code": "server_error", "message": message});
                let r = self.snapshot(Status::Failed, None, Some(error));
                ("response.failed", r)
            }
        };
        self.object = Some(r.clone());
        self.ending = Some((out, kind, r));
    }
    fn close(&mut self, usage: Usage, cost: Option<&Cost>) -> Vec<u8> {
        self.end(usage, None);
        let Some((mut out, kind, mut r)) = self.ending.take() else {
            return Vec::new();
        };
        if let (Some(c), Some(u)) = (cost, r.get_mut("usage")) {
            c.add_to(u);
        }
        self.event(&mut out, kind, json!({ "response": r }));
        out
    }
    fn error_event(&mut self, err: &GatewayError) -> Vec<u8> {
        self.end(Usage::default(), Some(err));
        let Some((mut out, kind, r)) = self.ending.take() else {
            return Vec::new();
        };
        let body = err.to_value();
        let e = &body["error"];
        let (code, message) = (e["type"].clone(), e["message"].clone());
        self.event(
            &mut out,
            "error",
            json!({"code": code, "message": message, "param": null}),
        );
        self.event(&mut out, kind, json!({ "response": r }));
        out
    }
    fn take_object(&mut self) -> Option<Value> {
        self.object.take()
    }
    // A resumed stream continues inside the chat stream it is written from: the response's
    // items and sequence numbers carry on.
    fn resumable(&self) -> bool {
        self.inner.resumable()
    }
    fn resume(&mut self, next: Box<dyn StreamTranslator>) -> bool {
        self.inner.resume(next)
    }
}
