//! A Gemini stream written from the chat chunks of the internal stream shape: each text delta
//! a `GenerateContentResponse` with one text part; function calls, gathered from their
//! argument deltas, with the finish reason and `usageMetadata` in the closing chunk, sent after
//! the settlement. As Server-Sent Events (`alt=sse`, what Google's SDKs ask for) or as the
//! JSON array a plain `streamGenerateContent` returns.

use serde_json::{json, Value};

use super::reply::{args_object, finish_reason, status_name, usage_metadata};
use crate::cost::{Cost, Spelling};
use crate::openai::stream::StreamStep;
use crate::translator::StreamTranslator;
use crate::{GatewayError, Usage};

pub struct GeminiStream {
    inner: Box<dyn StreamTranslator>,
    model: String,
    id: String,
    sse: bool,
    /// Something was written (the JSON array is open).
    opened: bool,
    /// Function calls by chat index: (name, arguments so far).
    calls: Vec<(u64, String, String)>,
    finish: Option<String>,
}

impl GeminiStream {
    /// `sse`: Server-Sent Events, else one JSON array.
    pub fn new(inner: Box<dyn StreamTranslator>, model: &str, id: &str, sse: bool) -> Self {
        GeminiStream {
            inner,
            model: model.to_owned(),
            id: id.to_owned(),
            sse,
            opened: false,
            calls: Vec::new(),
            finish: None,
        }
    }

    fn write(&mut self, out: &mut Vec<u8>, v: &Value) {
        if self.sse {
            out.extend_from_slice(b"data: ");
            let _ = serde_json::to_writer(&mut *out, v);
            out.extend_from_slice(b"\n\n");
        } else {
            out.extend_from_slice(if self.opened { b",\r\n" } else { b"[" });
            let _ = serde_json::to_writer(&mut *out, v);
        }
        self.opened = true;
    }

    fn chunk(&self, parts: Vec<Value>) -> Value {
        json!({"candidates": [{"content": {"role": "model", "parts": parts}, "index": 0}],
               "modelVersion": self.model, "responseId": self.id})
    }

    fn translate(&mut self, chunks: &[u8], out: &mut Vec<u8>) {
        let text = std::str::from_utf8(chunks).unwrap_or("");
        for data in text.split('\n').filter_map(|l| l.strip_prefix("data: ")) {
            let Ok(chunk) = serde_json::from_str::<Value>(data) else {
                continue;
            };
            let Some(choice) = chunk.pointer("/choices/0") else {
                continue;
            };
            let delta = &choice["delta"];
            if let Some(t) = delta["content"].as_str().filter(|t| !t.is_empty()) {
                let c = self.chunk(vec![json!({ "text": t })]);
                self.write(out, &c);
            }
            for call in delta["tool_calls"].as_array().into_iter().flatten() {
                let n = call["index"].as_u64().unwrap_or(0);
                let f = &call["function"];
                let piece = f["arguments"].as_str().unwrap_or("");
                match self.calls.iter_mut().find(|(i, _, _)| *i == n) {
                    Some((_, _, args)) => args.push_str(piece),
                    None => self.calls.push((
                        n,
                        f["name"].as_str().unwrap_or("").to_owned(),
                        piece.to_owned(),
                    )),
                }
            }
            if let Some(f) = choice["finish_reason"].as_str() {
                self.finish = Some(f.to_owned());
            }
        }
    }
}

impl StreamTranslator for GeminiStream {
    fn on_event(&mut self, event: Option<&str>, data: &str) -> StreamStep {
        match self.inner.on_event(event, data) {
            StreamStep::Emit(chunks) => {
                let mut out = Vec::new();
                self.translate(&chunks, &mut out);
                StreamStep::Emit(out)
            }
            other => other,
        }
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
    /// The cost goes into the last chunk's `usageMetadata` (Gemini's spelling), where Google's
    /// SDKs pass over it and a raw reader finds it.
    fn close(&mut self, usage: Usage, cost: Option<&Cost>) -> Vec<u8> {
        let tail = self.inner.close(usage, None);
        let mut out = Vec::new();
        self.translate(&tail, &mut out);
        let parts: Vec<Value> = self
            .calls
            .iter()
            .map(|(_, name, args)| json!({"functionCall": {"name": name, "args": args_object(args)}}))
            .collect();
        let mut last = self.chunk(parts);
        last["candidates"][0]["finishReason"] =
            finish_reason(self.finish.as_deref().unwrap_or("stop")).into();
        last["usageMetadata"] = usage_metadata(usage);
        if let Some(c) = cost {
            c.add_to_in(&mut last["usageMetadata"], Spelling::Camel);
        }
        self.write(&mut out, &last);
        if !self.sse {
            out.push(b']');
        }
        out
    }
    fn error_event(&mut self, err: &GatewayError) -> Vec<u8> {
        let code = err.status();
        let e =
            json!({"error": {"code": code, "message": err.message, "status": status_name(code)}});
        let mut out = Vec::new();
        self.write(&mut out, &e);
        if !self.sse {
            out.push(b']');
        }
        out
    }
    fn content_type(&self) -> &'static str {
        if self.sse {
            "text/event-stream"
        } else {
            "application/json"
        }
    }
}
