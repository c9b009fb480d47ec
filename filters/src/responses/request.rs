//! A `POST /v1/responses` body, validated as OpenAI documents it, and its conversation written
//! as a chat-completions body: the pipeline's one internal request shape (DESIGN.md, "Front
//! doors"), which every provider kind already converts from.
//!
//! What the chat shape cannot carry is refused by name before anything is held (a file input, an
//! `include` the gateway cannot honour, a `tool_choice` forcing a hosted tool on a chat
//! provider); hosted tools only offered (Codex's `web_search`) go to a provider that serves
//! the Responses API and are left out, with a warning, for a chat provider; what only the gateway reads (`store`,
//! `previous_response_id`, `metadata`) stays here and is echoed in the response object.
//! Members this module does not know (`user`, `prompt_cache_key`, `client_metadata`, whatever
//! the API adds next) change nothing a chat provider does and are let through unread, as the
//! chat route passes on members it does not know: a client one release ahead still works.

use serde_json::{json, Map, Value};

use super::items::{items_to_messages, normalize_input};
use super::tools::{read_tools, Tools};
use crate::GatewayError;

pub use super::tools::is_hosted_tool;

/// The longest model name accepted (as on the chat route).
const MAX_MODEL_BYTES: usize = 256;
/// `metadata`: at most 16 pairs, keys up to 64 characters, values up to 512 (OpenAI's limits).
const MAX_METADATA: usize = 16;
/// The `include` values the gateway can honour: it returns no encrypted reasoning, so asking
/// for it (Codex does, with `store: false`) gets none and nothing breaks.
const INCLUDES: &[&str] = &["reasoning.encrypted_content"];

fn field_err(field: &str, what: impl std::fmt::Display) -> GatewayError {
    GatewayError::invalid(format!("{field}: {what}"))
}

/// A validated Responses request.
#[derive(Debug, Clone)]
pub struct ResponsesRequest {
    pub model: String,
    pub stream: bool,
    /// `store` (default true): keep the response and its input for `previous_response_id`.
    pub store: bool,
    pub previous_response_id: Option<String>,
    /// This request's input as items (a string input is one user message).
    pub input: Vec<Value>,
    /// The body's size as sent, for the prompt estimate.
    pub raw_len: usize,
    /// What the response object echoes back.
    pub frame: Frame,
    instructions: Option<String>,
    /// Chat-completions members written as they are (`tools`, `tool_choice`, `temperature`, …).
    chat_members: Map<String, Value>,
    /// The body as sent, for a provider that serves the Responses API itself.
    pub(super) body: Map<String, Value>,
    /// Hosted tools asked for (`web_search`, `file_search`, …, by type), in order: passed on
    /// to a provider that serves the Responses API, left out for a chat provider.
    pub hosted_tools: Vec<String>,
    /// A `tool_choice` that forces a hosted tool (its type): only a Responses provider can
    /// honour it.
    pub forced_hosted: Option<String>,
}

impl ResponsesRequest {
    /// Refuses what a chat-completions provider cannot honour of this request: a `tool_choice`
    /// that forces a hosted tool. Hosted tools that are only offered are left out (the
    /// caller says so: [`ResponsesRequest::dropped_warning`]).
    pub fn check_bridgeable(&self, model: &str) -> Result<(), GatewayError> {
        match &self.forced_hosted {
            Some(kind) => Err(field_err(
                "tool_choice",
                format!("`{kind}` is a hosted tool, run only by a provider that serves the Responses API; `{model}` is served through chat completions (offer the tool without forcing it, and it is left out)"),
            )),
            None => Ok(()),
        }
    }

    /// The warning for a chat provider's reply when hosted tools were left out of its
    /// request (the `X-Tollgate-Warning` header), if any were.
    pub fn dropped_warning(&self) -> Option<String> {
        (!self.hosted_tools.is_empty()).then(|| {
            format!(
                "hosted tools left out ({}): this model's provider serves chat completions, not the Responses API",
                self.hosted_tools.join(", ")
            )
        })
    }
}

/// The request's settings as a response object repeats them.
#[derive(Debug, Clone, Default)]
pub struct Frame {
    pub instructions: Value,
    pub max_output_tokens: Value,
    pub metadata: Value,
    pub parallel_tool_calls: bool,
    pub previous_response_id: Value,
    pub reasoning: Value,
    pub store: bool,
    pub temperature: Value,
    pub text: Value,
    pub tool_choice: Value,
    pub tools: Value,
    pub top_p: Value,
    pub truncation: Value,
    pub user: Value,
    /// The functions of `namespace` tools: (the chat tool's name, namespace, name).
    pub namespaced: Vec<(String, String, String)>,
}

impl Frame {
    /// A chat tool call's function name as the client knows it: (name, its namespace).
    pub fn call_name<'a>(&'a self, chat_name: &'a str) -> (&'a str, Option<&'a str>) {
        match self.namespaced.iter().find(|(c, _, _)| c == chat_name) {
            Some((_, ns, name)) => (name, Some(ns)),
            None => (chat_name, None),
        }
    }
}

/// Parses and validates a Responses body. The fields are checked in a fixed order, so a body
/// with several faults is always told the same one.
pub fn parse_responses_request(raw: &[u8]) -> Result<ResponsesRequest, GatewayError> {
    let body: Value = serde_json::from_slice(raw)
        .map_err(|e| GatewayError::invalid(format!("body: malformed JSON ({e})")))?;
    let Value::Object(body) = body else {
        return Err(GatewayError::invalid("body: must be a JSON object"));
    };
    let fields = Fields(&body);
    let model = fields.model()?;
    let previous_response_id = fields.previous_response_id()?;
    let input = match fields.get("input") {
        None if previous_response_id.is_some() => Vec::new(),
        None => return Err(field_err("input", "is required")),
        Some(v) => normalize_input(v)?,
    };
    let instructions = match fields.get("instructions") {
        None => None,
        Some(Value::String(s)) => Some(s.clone()),
        Some(_) => return Err(field_err("instructions", "must be a string")),
    };
    let stream = fields.flag("stream", false)?;
    let store = fields.flag("store", true)?;
    let parallel_tool_calls = fields.flag("parallel_tool_calls", true)?;
    if fields.flag("background", false)? {
        return Err(field_err(
            "background",
            "background responses are not supported; send the request and wait, or stream it",
        ));
    }
    let mut chat = Map::new();
    let max_output_tokens = fields.sampling(&mut chat)?;
    fields.refuse_unsupported()?;
    let metadata = match fields.get("metadata") {
        None => json!({}),
        Some(m) => check_metadata(m)?,
    };
    let Tools {
        namespaced,
        hosted: hosted_tools,
        forced_hosted,
    } = read_tools(
        fields.get("tools"),
        fields.get("tool_choice"),
        parallel_tool_calls,
        &mut chat,
    )?;
    if let Some(text) = fields.get("text") {
        read_text(text, &mut chat)?;
    }
    if let Some(reasoning) = fields.get("reasoning") {
        read_reasoning(reasoning, &mut chat)?;
    }
    let frame = Frame {
        instructions: instructions.clone().map_or(Value::Null, Value::String),
        max_output_tokens: max_output_tokens.map_or(Value::Null, Value::from),
        metadata,
        parallel_tool_calls,
        previous_response_id: previous_response_id
            .clone()
            .map_or(Value::Null, Value::String),
        store,
        namespaced,
        ..fields.echoed()
    };
    Ok(ResponsesRequest {
        model,
        stream,
        store,
        previous_response_id,
        input,
        raw_len: raw.len(),
        frame,
        instructions,
        chat_members: chat,
        body,
        hosted_tools,
        forced_hosted,
    })
}

/// A Responses body's members, read with `null` taken as absent (as OpenAI reads them).
struct Fields<'a>(&'a Map<String, Value>);

impl<'a> Fields<'a> {
    fn get(&self, k: &str) -> Option<&'a Value> {
        self.0.get(k).filter(|v| !v.is_null())
    }

    fn flag(&self, k: &str, default: bool) -> Result<bool, GatewayError> {
        match self.get(k) {
            None => Ok(default),
            Some(Value::Bool(b)) => Ok(*b),
            Some(_) => Err(field_err(k, "must be a boolean")),
        }
    }

    fn number(&self, k: &str, lo: f64, hi: f64) -> Result<Option<Value>, GatewayError> {
        match self.get(k) {
            None => Ok(None),
            Some(v) => match v.as_f64() {
                Some(x) if (lo..=hi).contains(&x) => Ok(Some(v.clone())),
                _ => Err(field_err(k, format!("must be a number from {lo} to {hi}"))),
            },
        }
    }

    fn model(&self) -> Result<String, GatewayError> {
        match self.get("model") {
            None => Err(field_err("model", "is required")),
            Some(Value::String(s)) if s.trim().is_empty() => {
                Err(field_err("model", "must not be empty"))
            }
            Some(Value::String(s)) if s.len() > MAX_MODEL_BYTES => {
                Err(field_err("model", "must be at most 256 bytes"))
            }
            Some(Value::String(s)) => Ok(s.clone()),
            Some(_) => Err(field_err("model", "must be a string")),
        }
    }

    fn previous_response_id(&self) -> Result<Option<String>, GatewayError> {
        match self.get("previous_response_id") {
            None => Ok(None),
            Some(Value::String(s)) if !s.is_empty() && s.len() <= 128 => Ok(Some(s.clone())),
            Some(_) => Err(field_err(
                "previous_response_id",
                "must be a response id (a string)",
            )),
        }
    }

    /// `temperature`, `top_p` and `max_output_tokens` (as `max_tokens`) as the chat request's
    /// members; `max_output_tokens` is returned for the frame.
    fn sampling(&self, chat: &mut Map<String, Value>) -> Result<Option<u64>, GatewayError> {
        if let Some(t) = self.number("temperature", 0.0, 2.0)? {
            chat.insert("temperature".into(), t);
        }
        if let Some(p) = self.number("top_p", 0.0, 1.0)? {
            chat.insert("top_p".into(), p);
        }
        let max_output_tokens = match self.get("max_output_tokens") {
            None => None,
            Some(v) => match v.as_u64() {
                Some(n) if n >= 1 => Some(n),
                _ => return Err(field_err("max_output_tokens", "must be a positive integer")),
            },
        };
        if let Some(n) = max_output_tokens {
            chat.insert("max_tokens".into(), n.into());
        }
        Ok(max_output_tokens)
    }

    /// What the gateway cannot honour, refused by name before anything is held.
    fn refuse_unsupported(&self) -> Result<(), GatewayError> {
        if let Some(v) = self.get("top_logprobs") {
            if v.as_u64() != Some(0) {
                return Err(field_err(
                    "top_logprobs",
                    "log probabilities are not supported",
                ));
            }
        }
        if let Some(v) = self.get("truncation") {
            if !matches!(v.as_str(), Some("disabled" | "auto")) {
                return Err(field_err("truncation", "must be \"disabled\" or \"auto\""));
            }
        }
        for unsupported in ["prompt", "conversation", "max_tool_calls"] {
            if self.get(unsupported).is_some() {
                return Err(field_err(unsupported, "is not supported by this gateway"));
            }
        }
        if let Some(inc) = self.get("include") {
            check_include(inc)?;
        }
        Ok(())
    }

    /// The settings a response object repeats as the client sent them (OpenAI's defaults
    /// where it sent none); the rest of the frame is what the parse read.
    fn echoed(&self) -> Frame {
        let echo = |k: &str| self.get(k).cloned().unwrap_or(Value::Null);
        let or = |k: &str, default: Value| self.get(k).cloned().unwrap_or(default);
        Frame {
            reasoning: or("reasoning", json!({"effort": null, "summary": null})),
            temperature: echo("temperature"),
            text: or("text", json!({"format": {"type": "text"}})),
            tool_choice: or("tool_choice", json!("auto")),
            tools: or("tools", json!([])),
            top_p: echo("top_p"),
            truncation: or("truncation", json!("disabled")),
            user: echo("user"),
            ..Frame::default()
        }
    }
}

/// `include`: only the values the gateway can honour.
fn check_include(inc: &Value) -> Result<(), GatewayError> {
    let Some(list) = inc.as_array() else {
        return Err(field_err("include", "must be an array of strings"));
    };
    for (i, v) in list.iter().enumerate() {
        match v.as_str() {
            Some(s) if INCLUDES.contains(&s) => {}
            Some(s) => {
                return Err(field_err(
                    &format!("include[{i}]"),
                    format!("`{s}` is not supported"),
                ))
            }
            None => return Err(field_err(&format!("include[{i}]"), "must be a string")),
        }
    }
    Ok(())
}

/// `reasoning.effort` as the chat request's `reasoning_effort`.
fn read_reasoning(reasoning: &Value, chat: &mut Map<String, Value>) -> Result<(), GatewayError> {
    let Some(r) = reasoning.as_object() else {
        return Err(field_err("reasoning", "must be an object"));
    };
    match r.get("effort").filter(|v| !v.is_null()) {
        None => Ok(()),
        Some(Value::String(e))
            if ["none", "minimal", "low", "medium", "high", "xhigh"].contains(&e.as_str()) =>
        {
            chat.insert("reasoning_effort".into(), e.clone().into());
            Ok(())
        }
        Some(_) => Err(field_err(
            "reasoning.effort",
            "must be one of none, minimal, low, medium, high, xhigh",
        )),
    }
}

impl ResponsesRequest {
    /// The conversation as a chat-completions body: this request's `instructions` as the system
    /// message, then `history` (the items of the `previous_response_id` chain, oldest first),
    /// then this request's input; `stream_options.include_usage` on a stream, so the gateway
    /// always reads the provider's usage.
    pub fn chat_body(&self, history: &[Value]) -> Result<Vec<u8>, GatewayError> {
        let mut messages = Vec::new();
        if let Some(i) = &self.instructions {
            messages.push(json!({"role": "system", "content": i}));
        }
        items_to_messages(history, "previous_response_id", &mut messages)?;
        items_to_messages(&self.input, "input", &mut messages)?;
        if messages.is_empty() {
            return Err(field_err("input", "must contain at least one item"));
        }
        let mut body = Map::new();
        body.insert("model".into(), self.model.clone().into());
        body.insert("messages".into(), Value::Array(messages));
        for (k, v) in &self.chat_members {
            body.insert(k.clone(), v.clone());
        }
        if self.stream {
            body.insert("stream".into(), true.into());
            body.insert("stream_options".into(), json!({"include_usage": true}));
        }
        serde_json::to_vec(&Value::Object(body))
            .map_err(|e| GatewayError::invalid(format!("body: {e}")))
    }
}

/// `text.format` as the chat request's `response_format`; `text.verbosity` as `verbosity`.
fn read_text(text: &Value, chat: &mut Map<String, Value>) -> Result<(), GatewayError> {
    let Some(t) = text.as_object() else {
        return Err(field_err("text", "must be an object"));
    };
    if let Some(v) = t.get("verbosity").filter(|v| !v.is_null()) {
        match v.as_str() {
            Some("low" | "medium" | "high") => {
                chat.insert("verbosity".into(), v.clone());
            }
            _ => return Err(field_err("text.verbosity", "must be low, medium or high")),
        }
    }
    let Some(format) = t.get("format").filter(|v| !v.is_null()) else {
        return Ok(());
    };
    let Some(f) = format.as_object() else {
        return Err(field_err("text.format", "must be an object"));
    };
    match f.get("type").and_then(Value::as_str) {
        Some("text") => Ok(()),
        Some("json_object") => {
            chat.insert("response_format".into(), json!({"type": "json_object"}));
            Ok(())
        }
        Some("json_schema") => {
            let name = match f.get("name").and_then(Value::as_str) {
                Some(n) if !n.is_empty() => n,
                _ => return Err(field_err("text.format.name", "is required")),
            };
            let Some(schema) = f.get("schema").filter(|s| s.is_object()) else {
                return Err(field_err(
                    "text.format.schema",
                    "must be a JSON Schema object",
                ));
            };
            let mut js = Map::new();
            js.insert("name".into(), name.into());
            js.insert("schema".into(), schema.clone());
            for k in ["strict", "description"] {
                if let Some(v) = f.get(k).filter(|v| !v.is_null()) {
                    js.insert(k.into(), v.clone());
                }
            }
            chat.insert(
                "response_format".into(),
                json!({"type": "json_schema", "json_schema": js}),
            );
            Ok(())
        }
        _ => Err(field_err(
            "text.format.type",
            "must be \"text\", \"json_object\" or \"json_schema\"",
        )),
    }
}

fn check_metadata(m: &Value) -> Result<Value, GatewayError> {
    let Some(o) = m.as_object() else {
        return Err(field_err("metadata", "must be an object of strings"));
    };
    if o.len() > MAX_METADATA {
        return Err(field_err("metadata", "may hold at most 16 pairs"));
    }
    for (k, v) in o {
        if k.chars().count() > 64 {
            return Err(field_err("metadata", "keys may be at most 64 characters"));
        }
        match v.as_str() {
            Some(s) if s.chars().count() <= 512 => {}
            _ => {
                return Err(field_err(
                    &format!("metadata.{k}"),
                    "must be a string of at most 512 characters",
                ))
            }
        }
    }
    Ok(m.clone())
}
