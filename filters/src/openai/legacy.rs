//! `POST /v1/completions`, OpenAI's legacy text completions: the request checked and passed on
//! to the OpenAI-compatible providers that serve it (the client's bytes with `model`,
//! `max_tokens` and, for a stream, `stream_options.include_usage` spliced in), and the reply
//! and stream chunks rewritten for the client as the chat ones are (the model, usage captured
//! or counted). The pipeline routes and holds on a chat mirror of the prompt
//! ([`LegacyRequest::chat`]), the internal request shape.

use serde_json::value::RawValue;
use serde_json::{json, Value};

use super::request::{parse_chat_request, ChatRequest};
use super::stream::{sse_event, StreamStep, DONE_EVENT};
use crate::cost::Cost;
use crate::json::raw::{self, Kind, MemberList, ObjectError};
use crate::json::splice::{splice_members, Members};
use crate::translator::StreamTranslator;
use crate::{GatewayError, Usage};

/// OpenAI's default `max_tokens` for a legacy completion.
pub const DEFAULT_MAX_TOKENS: u64 = 16;

fn field_err(field: &str, what: &str) -> GatewayError {
    GatewayError::invalid(format!("{field}: {what}"))
}

/// A checked legacy completion request, borrowing the client's body.
#[derive(Debug, Clone)]
pub struct LegacyRequest<'a> {
    raw: &'a [u8],
    members: MemberList<'a>,
    pub stream: bool,
    /// The chat mirror ([`LegacyRequest::chat`]).
    chat_body: Vec<u8>,
}

pub fn parse_legacy_request(raw: &[u8]) -> Result<LegacyRequest<'_>, GatewayError> {
    let members = raw::parse_object(raw).map_err(|e| match e {
        ObjectError::Malformed(e) => GatewayError::invalid(format!("body: malformed JSON ({e})")),
        ObjectError::NotAnObject => GatewayError::invalid("body: must be a JSON object"),
    })?;
    let get = |k: &str| raw::get(&members, k).filter(|v| !raw::is_null(v));
    let model = match get("model") {
        None => return Err(field_err("model", "is required")),
        Some(v) => match raw::as_str(v) {
            Some(s) if !s.trim().is_empty() && s.len() <= 256 => s.into_owned(),
            _ => {
                return Err(field_err(
                    "model",
                    "must be a non-empty string of at most 256 bytes",
                ))
            }
        },
    };
    let prompt = match get("prompt") {
        None => return Err(field_err("prompt", "is required")),
        Some(p) => prompt_text(p)?,
    };
    let max_tokens = match get("max_tokens") {
        None => DEFAULT_MAX_TOKENS,
        Some(v) => raw::as_u64(v)
            .filter(|n| *n >= 1)
            .ok_or_else(|| field_err("max_tokens", "must be a positive integer"))?,
    };
    let n = match get("n") {
        None => 1,
        Some(v) => raw::as_u64(v)
            .filter(|n| (1..=128).contains(n))
            .ok_or_else(|| field_err("n", "must be an integer from 1 to 128"))?,
    };
    let stream = match get("stream") {
        None => false,
        Some(v) => raw::as_bool(v).ok_or_else(|| field_err("stream", "must be a boolean"))?,
    };
    let wants_usage = stream
        && get("stream_options")
            .and_then(raw::object)
            .and_then(|o| raw::get(&o, "include_usage").and_then(raw::as_bool))
            .unwrap_or(false);
    let mut mirror = json!({
        "model": model,
        "messages": [{"role": "user", "content": prompt}],
        "max_tokens": max_tokens,
        "n": n,
        "stream": stream,
    });
    if wants_usage {
        mirror["stream_options"] = json!({"include_usage": true});
    }
    Ok(LegacyRequest {
        raw,
        members,
        stream,
        chat_body: mirror.to_string().into_bytes(),
    })
}

/// The prompt as text for the estimate and the tokenizer: strings joined, a token array as
/// one short word per token (what it costs, give or take).
fn prompt_text(p: &RawValue) -> Result<String, GatewayError> {
    let bad = || {
        field_err(
            "prompt",
            "must be a string, an array of strings, an array of tokens or an array of token arrays",
        )
    };
    let tokens = |v: &RawValue| -> Option<String> {
        let list = raw::array(v)?;
        list.iter()
            .all(|t| raw::as_u64(t).is_some())
            .then(|| " x".repeat(list.len()))
    };
    match raw::kind(p) {
        Kind::String => Ok(raw::as_str(p).unwrap_or_default().into_owned()),
        Kind::Array => {
            let list = raw::array(p).unwrap_or_default();
            if list.is_empty() {
                return Err(bad());
            }
            if let Some(t) = tokens(p) {
                return Ok(t);
            }
            let mut out = Vec::with_capacity(list.len());
            for item in list {
                match raw::kind(item) {
                    Kind::String => out.push(raw::as_str(item).unwrap_or_default().into_owned()),
                    Kind::Array => out.push(tokens(item).ok_or_else(bad)?),
                    _ => return Err(bad()),
                }
            }
            Ok(out.join("\n"))
        }
        _ => Err(bad()),
    }
}

impl LegacyRequest<'_> {
    /// The prompt as a chat request, for routing, the hold and the tokenizer.
    pub fn chat(&self) -> Result<ChatRequest<'_>, GatewayError> {
        let mut chat = parse_chat_request(&self.chat_body)?;
        chat.raw_len = self.raw.len();
        Ok(chat)
    }

    /// The body for the provider: the client's, with the model, the output cap and, for a
    /// stream, the usage chunk asked for.
    pub fn upstream_body(&self, upstream_model: &str, max_tokens: u64) -> Vec<u8> {
        let model = serde_json::to_vec(upstream_model).unwrap_or_default();
        let limit = max_tokens.to_string();
        let mut set: Vec<(&str, &[u8])> = vec![("model", &model), ("max_tokens", limit.as_bytes())];
        if self.stream {
            set.push(("stream_options", br#"{"include_usage":true}"#));
        }
        let mut out = Vec::with_capacity(self.raw.len() + 64);
        splice_members(self.raw, &self.members, &set, &mut out);
        out
    }
}

/// A whole legacy completion for the client: the model, and usage counted (`count` gets the
/// texts) when the provider sent none. Returns the body, its usage, whether it was counted.
pub fn rewrite_legacy(
    raw: &[u8],
    model: &str,
    count: impl FnOnce(&str) -> Usage,
) -> Result<(Vec<u8>, Usage, bool), String> {
    let Ok(Members(members)) = serde_json::from_slice::<Members<'_>>(raw) else {
        return Err("upstream reply is not a JSON object".into());
    };
    let member = |name: &str| members.iter().find(|(k, _)| k == name).map(|(_, v)| *v);
    let Some(choices) = member("choices").filter(|v| v.get().starts_with('[')) else {
        return Err("upstream reply has no choices array".into());
    };
    let (usage, counted) = match member("usage").and_then(|u| Usage::from_raw(u.get())) {
        Some(u) => (u, false),
        None => {
            let choices: Value = serde_json::from_str(choices.get()).map_err(|e| e.to_string())?;
            let text: String = choices
                .as_array()
                .into_iter()
                .flatten()
                .filter_map(|c| c["text"].as_str())
                .collect();
            (count(&text), true)
        }
    };
    let model_json = serde_json::to_string(model).unwrap_or_default();
    let usage_json = usage.json_text();
    let mut set: Vec<(&str, &[u8])> = vec![("model", model_json.as_bytes())];
    if counted {
        set.push(("usage", usage_json.as_bytes()));
    }
    let mut out = Vec::with_capacity(raw.len() + 64);
    splice_members(raw, &members, &set, &mut out);
    Ok((out, usage, counted))
}

/// A legacy completion stream rewritten for the client: each chunk with the model used, the
/// usage chunk kept only when the client asked for it (held back for the close, which adds the
/// cost), `[DONE]` at the close.
pub struct LegacyStream {
    model: String,
    client_wants_usage: bool,
    usage: Option<Usage>,
    held_usage: Option<Value>,
    text: String,
    output: bool,
    finished: bool,
}

impl LegacyStream {
    pub fn new(model: &str, client_wants_usage: bool) -> LegacyStream {
        LegacyStream {
            model: model.to_owned(),
            client_wants_usage,
            usage: None,
            held_usage: None,
            text: String::new(),
            output: false,
            finished: false,
        }
    }
}

impl StreamTranslator for LegacyStream {
    fn on_event(&mut self, _event: Option<&str>, data: &str) -> StreamStep {
        let data = data.trim();
        if data == "[DONE]" {
            return StreamStep::Done;
        }
        let Ok(Value::Object(mut chunk)) = serde_json::from_str::<Value>(data) else {
            return StreamStep::UpstreamError(json!({
                "message": "upstream sent a stream event that is not a JSON object"
            }));
        };
        if let Some(err) = chunk.get("error").filter(|e| !e.is_null()) {
            return StreamStep::UpstreamError(err.clone());
        }
        if let Some(u) = chunk.get("usage").and_then(Usage::from_json) {
            self.usage = Some(u);
        }
        let choices = chunk.get("choices").and_then(Value::as_array);
        for c in choices.into_iter().flatten() {
            if let Some(t) = c["text"].as_str() {
                self.text.push_str(t);
                self.output |= !t.is_empty();
            }
            if !c["finish_reason"].is_null() {
                self.finished = true;
                self.output = true;
            }
        }
        let usage_only = choices.is_none_or(|c| c.is_empty());
        if !self.client_wants_usage {
            if usage_only && chunk.contains_key("usage") {
                return StreamStep::Emit(Vec::new());
            }
            chunk.remove("usage");
        }
        chunk.insert("model".into(), Value::String(self.model.clone()));
        if usage_only && chunk.get("usage").is_some_and(Value::is_object) {
            self.held_usage = Some(Value::Object(chunk));
            return StreamStep::Emit(Vec::new());
        }
        StreamStep::Emit(sse_event(&Value::Object(chunk)))
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
        &self.text
    }
    fn close(&mut self, usage: Usage, cost: Option<&Cost>) -> Vec<u8> {
        let mut tail = Vec::new();
        if self.client_wants_usage {
            let mut chunk = self.held_usage.take().unwrap_or_else(|| {
                json!({
                    "object": "text_completion", "model": self.model, "choices": [],
                    "usage": usage.to_json(),
                })
            });
            if let (Some(c), Some(u)) = (cost, chunk.get_mut("usage")) {
                c.add_to(u);
            }
            tail.extend(sse_event(&chunk));
        }
        tail.extend_from_slice(DONE_EVENT);
        tail
    }
    fn error_event(&mut self, err: &GatewayError) -> Vec<u8> {
        let mut out = self
            .held_usage
            .take()
            .map(|c| sse_event(&c))
            .unwrap_or_default();
        out.extend(sse_event(&err.to_value()));
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_prompt_of_any_shape_is_checked_and_mirrored_for_the_hold() {
        for (prompt, text) in [
            (json!("Once upon"), "Once upon"),
            (json!(["a", "b"]), "a\nb"),
            (json!([1, 2, 3]), " x x x"),
            (json!([[1, 2], "c"]), " x x\nc"),
        ] {
            let body = json!({"model": "m", "prompt": prompt}).to_string();
            let req = parse_legacy_request(body.as_bytes()).unwrap();
            let chat = req.chat().unwrap();
            assert_eq!(chat.max_tokens, Some(DEFAULT_MAX_TOKENS));
            let mirror: Value = serde_json::from_slice(&req.chat_body).unwrap();
            assert_eq!(mirror["messages"][0]["content"], text);
        }
        for (body, field) in [
            (json!({"prompt": "x"}), "model"),
            (json!({"model": "m"}), "prompt"),
            (json!({"model": "m", "prompt": 5}), "prompt"),
            (json!({"model": "m", "prompt": []}), "prompt"),
            (json!({"model": "m", "prompt": [{"a": 1}]}), "prompt"),
            (
                json!({"model": "m", "prompt": "x", "max_tokens": 0}),
                "max_tokens",
            ),
            (json!({"model": "m", "prompt": "x", "n": 0}), "n"),
            (
                json!({"model": "m", "prompt": "x", "stream": "yes"}),
                "stream",
            ),
        ] {
            let e = parse_legacy_request(body.to_string().as_bytes()).unwrap_err();
            assert_eq!(e.param.as_deref(), Some(field), "{body}");
        }
    }

    #[test]
    fn the_upstream_body_is_the_clients_with_model_cap_and_usage_spliced() {
        let body = r#"{"model":"m","prompt":"x","suffix":"!","stream":true,"echo":false}"#;
        let req = parse_legacy_request(body.as_bytes()).unwrap();
        let up: Value = serde_json::from_slice(&req.upstream_body("up-m", 7)).unwrap();
        assert_eq!(
            up,
            json!({"model": "up-m", "prompt": "x", "suffix": "!", "stream": true, "echo": false,
                   "max_tokens": 7, "stream_options": {"include_usage": true}})
        );
    }

    #[test]
    fn replies_and_chunks_name_the_model_used_and_usage_is_read_or_counted() {
        let reply = json!({"id": "c", "object": "text_completion", "model": "up",
            "choices": [{"text": "abc", "index": 0, "finish_reason": "stop"}],
            "usage": {"prompt_tokens": 3, "completion_tokens": 1, "total_tokens": 4}});
        let (out, usage, counted) =
            rewrite_legacy(reply.to_string().as_bytes(), "m", |_| unreachable!()).unwrap();
        let out: Value = serde_json::from_slice(&out).unwrap();
        assert_eq!(
            (out["model"].as_str(), out["object"].as_str()),
            (Some("m"), Some("text_completion"))
        );
        assert_eq!((usage.prompt_tokens, counted), (3, false));
        let bare = json!({"choices": [{"text": "abc"}]});
        let (_, usage, counted) = rewrite_legacy(bare.to_string().as_bytes(), "m", |t| Usage {
            completion_tokens: t.len() as u64,
            ..Usage::default()
        })
        .unwrap();
        assert_eq!((usage.completion_tokens, counted), (3, true));

        let mut s = LegacyStream::new("m", false);
        let chunk = json!({"object": "text_completion", "model": "up", "choices": [{"text": "", "index": 0, "finish_reason": null}]});
        assert!(matches!(
            s.on_event(None, &chunk.to_string()),
            StreamStep::Emit(_)
        ));
        assert!(!s.has_output(), "an empty text is no output");
        let chunk =
            json!({"model": "up", "choices": [{"text": "hi", "index": 0, "finish_reason": null}]});
        let StreamStep::Emit(b) = s.on_event(None, &chunk.to_string()) else {
            panic!()
        };
        assert!(String::from_utf8(b).unwrap().contains("\"model\":\"m\""));
        assert!(s.has_output());
        let usage = json!({"choices": [], "usage": {"prompt_tokens": 2, "completion_tokens": 1, "total_tokens": 3}});
        assert!(
            matches!(s.on_event(None, &usage.to_string()), StreamStep::Emit(b) if b.is_empty())
        );
        assert_eq!(s.upstream_usage().map(|u| u.prompt_tokens), Some(2));
        assert!(matches!(s.on_event(None, "[DONE]"), StreamStep::Done));
        assert_eq!(s.close(Usage::default(), None), DONE_EVENT);
    }
}
