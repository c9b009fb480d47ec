//! A provider that serves the Responses API itself (`[[providers]] responses_api = true`): the
//! client's body passed on in its own shape (the model and output cap set, the conversation of
//! a `previous_response_id` chain written into `input`, since the provider knows none of the
//! gateway's ids, and `store: false`, since the gateway keeps what is stored), and the
//! provider's reply and events passed back with the gateway's response id and model. Usage is
//! read from the response object (`response.completed` on a stream), which is held back until
//! the stream is settled, as every stream's closing event is.

use serde_json::{json, Map, Value};

use super::reply::Head;
use super::request::ResponsesRequest;
use crate::cost::Cost;
use crate::openai::stream::StreamStep;
use crate::translator::StreamTranslator;
use crate::{GatewayError, Usage};

impl ResponsesRequest {
    /// The body for a provider that serves `/v1/responses`.
    pub fn native_body(&self, history: &[Value], upstream_model: &str, max_tokens: u64) -> Vec<u8> {
        let mut body: Map<String, Value> = self.body.clone();
        body.insert("model".into(), upstream_model.into());
        body.insert("max_output_tokens".into(), max_tokens.into());
        body.insert("store".into(), false.into());
        body.remove("previous_response_id");
        if !history.is_empty() {
            let mut input = history.to_vec();
            input.extend(self.input.iter().cloned());
            body.insert("input".into(), Value::Array(input));
        }
        serde_json::to_vec(&Value::Object(body)).unwrap_or_default()
    }
}

/// The usage of a response object.
fn usage_of(response: &Value) -> Option<Usage> {
    let u = response.get("usage")?;
    Some(Usage {
        prompt_tokens: u.get("input_tokens")?.as_u64()?,
        completion_tokens: u.get("output_tokens")?.as_u64()?,
        cache_read_tokens: u
            .pointer("/input_tokens_details/cached_tokens")
            .and_then(Value::as_u64)
            .unwrap_or(0),
        reasoning_tokens: u
            .pointer("/output_tokens_details/reasoning_tokens")
            .and_then(Value::as_u64)
            .unwrap_or(0),
        ..Usage::default()
    })
}

/// The gateway's id and model written into a response object.
fn own(response: &mut Value, head: &Head) {
    if let Some(o) = response.as_object_mut() {
        o.insert("id".into(), head.id.clone().into());
        o.insert("model".into(), head.model.clone().into());
    }
}

/// The text of a response's output (messages and call arguments), for the tokenizer.
fn output_text(response: &Value) -> String {
    let mut text = String::new();
    for item in response["output"].as_array().into_iter().flatten() {
        for part in item["content"].as_array().into_iter().flatten() {
            text.push_str(part["text"].as_str().unwrap_or(""));
        }
        text.push_str(item["arguments"].as_str().unwrap_or(""));
    }
    text
}

/// A provider's whole response object for the client; its usage, or `count`'s over its text
/// when it reported none (then written in). Returns the object, its usage, whether counted.
pub fn rewrite_native(
    raw: &[u8],
    head: &Head,
    count: impl FnOnce(&str) -> Usage,
) -> Result<(Value, Usage, bool), String> {
    let mut r: Value =
        serde_json::from_slice(raw).map_err(|e| format!("reply is not JSON: {e}"))?;
    if r.get("object").and_then(Value::as_str) != Some("response") {
        return Err("reply is not a response object".into());
    }
    own(&mut r, head);
    match usage_of(&r) {
        Some(u) => Ok((r, u, false)),
        None => {
            let u = count(&output_text(&r));
            r["usage"] = json!({
                "input_tokens": u.prompt_tokens, "input_tokens_details": {"cached_tokens": 0},
                "output_tokens": u.completion_tokens, "output_tokens_details": {"reasoning_tokens": 0},
                "total_tokens": u.total(),
            });
            Ok((r, u, true))
        }
    }
}

/// A provider's Responses stream passed to the client: each event as sent but for the response
/// object's id and model; the closing `response.completed` (or `.incomplete`) held back for
/// [`StreamTranslator::close`].
pub struct NativeStream {
    head: Head,
    output: bool,
    text: String,
    usage: Option<Usage>,
    closing: Option<(String, Value)>,
    last_seq: u64,
    /// [`StreamTranslator::end`] has run: the closing event is complete but for the cost.
    ended: bool,
    object: Option<Value>,
}

impl NativeStream {
    pub fn new(head: Head) -> NativeStream {
        NativeStream {
            head,
            output: false,
            text: String::new(),
            usage: None,
            closing: None,
            last_seq: 0,
            ended: false,
            object: None,
        }
    }
}

fn event(kind: &str, data: &Value) -> Vec<u8> {
    format!("event: {kind}\ndata: {data}\n\n").into_bytes()
}

impl StreamTranslator for NativeStream {
    fn on_event(&mut self, _event: Option<&str>, data: &str) -> StreamStep {
        let Ok(mut ev) = serde_json::from_str::<Value>(data.trim()) else {
            return StreamStep::UpstreamError(json!({
                "message": "upstream sent a stream event that is not JSON"
            }));
        };
        let kind = ev["type"].as_str().unwrap_or("").to_owned();
        self.last_seq = ev["sequence_number"].as_u64().unwrap_or(self.last_seq);
        match kind.as_str() {
            "error" => return StreamStep::UpstreamError(ev),
            "response.failed" => return StreamStep::UpstreamError(ev["response"]["error"].clone()),
            "response.output_text.delta"
            | "response.refusal.delta"
            | "response.function_call_arguments.delta" => {
                self.text.push_str(ev["delta"].as_str().unwrap_or(""));
                self.output = true;
            }
            "response.output_item.added" => {
                // A hosted tool's call (a web search) has run, at a cost, once it is added:
                // the stream is committed rather than failed over and searched again.
                let item = ev["item"]["type"].as_str().unwrap_or("");
                self.output |= item == "function_call" || super::items::is_hosted_call(item);
            }
            _ => {}
        }
        if let Some(r) = ev.get_mut("response") {
            own(r, &self.head);
        }
        if matches!(kind.as_str(), "response.completed" | "response.incomplete") {
            self.usage = usage_of(&ev["response"]);
            self.output = true;
            self.closing = Some((kind, ev));
            return StreamStep::Done;
        }
        StreamStep::Emit(event(&kind, &ev))
    }
    fn has_output(&self) -> bool {
        self.output
    }
    fn finished(&self) -> bool {
        self.closing.is_some()
    }
    fn upstream_usage(&self) -> Option<Usage> {
        self.usage
    }
    fn delivered_text(&self) -> &str {
        &self.text
    }
    fn end(&mut self, usage: Usage, failure: Option<&GatewayError>) {
        if std::mem::replace(&mut self.ended, true) {
            return;
        }
        let Some((_, ev)) = self.closing.as_mut().filter(|_| failure.is_none()) else {
            return;
        };
        if self.usage.is_none() {
            ev["response"]["usage"] = json!({
                "input_tokens": usage.prompt_tokens, "input_tokens_details": {"cached_tokens": 0},
                "output_tokens": usage.completion_tokens, "output_tokens_details": {"reasoning_tokens": 0},
                "total_tokens": usage.total(),
            });
        }
        self.object = Some(ev["response"].clone());
    }
    fn close(&mut self, usage: Usage, cost: Option<&Cost>) -> Vec<u8> {
        self.end(usage, None);
        let Some((kind, mut ev)) = self.closing.take() else {
            return Vec::new();
        };
        if let (Some(c), Some(u)) = (cost, ev["response"].get_mut("usage")) {
            c.add_to(u);
        }
        event(&kind, &ev)
    }
    fn error_event(&mut self, err: &GatewayError) -> Vec<u8> {
        let body = err.to_value();
        let seq = self.last_seq + 1;
        let data = json!({"type": "error", "code": body["error"]["type"], "message": body["error"]["message"],
                          "param": null, "sequence_number": seq});
        event("error", &data)
    }
    fn take_object(&mut self) -> Option<Value> {
        self.object.take()
    }
}
