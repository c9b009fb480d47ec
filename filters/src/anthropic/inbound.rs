//! The inbound Messages API: a client's Anthropic request, validated as Anthropic validates
//! it, and mirrored into an OpenAI chat request so the gateway can route, hold credits and
//! reach OpenAI-compatible providers with the same pipeline. Anthropic providers get the
//! original body instead ([`passthrough_body`]), so nothing the mirror cannot carry (prompt
//! caching, thinking, `top_k`, document blocks) is lost on the way to them. The mirror itself
//! is built in `mirror.rs`.

use serde_json::{json, Map, Value};

pub use super::mirror::check_openai_translatable;
use super::mirror::{block_type, openai_body, openai_messages};
use crate::openai::request::{parse_chat_request, ChatRequest};
use crate::GatewayError;

/// A validated Messages request.
#[derive(Debug, Clone)]
pub struct MessagesRequest {
    /// The same conversation as an OpenAI chat body, read through [`MessagesRequest::chat`].
    pub chat_body: Vec<u8>,
    /// The Anthropic body as received.
    pub original: Map<String, Value>,
    /// Size of the body as received.
    pub raw_len: usize,
}

impl MessagesRequest {
    /// The OpenAI mirror as a chat request borrowing from [`Self::chat_body`] (a request
    /// cannot own the bytes it borrows from, so it is parsed where it is used).
    pub fn chat(&self) -> Result<ChatRequest<'_>, GatewayError> {
        let mut chat = parse_chat_request(&self.chat_body)?;
        // An Anthropic client gets its usage in message_delta, never as an OpenAI usage chunk.
        chat.client_wants_usage = false;
        chat.raw_len = self.raw_len;
        Ok(chat)
    }
}

const MAX_MODEL_BYTES: usize = 256;

fn bad(field: &str, what: &str) -> GatewayError {
    GatewayError::invalid(format!("{field}: {what}"))
}

/// Parses and validates a `POST /v1/messages` body. The mirror is validated as any chat
/// request is when [`MessagesRequest::chat`] reads it.
pub fn parse_messages_request(raw: &[u8]) -> Result<MessagesRequest, GatewayError> {
    let original = parse_object(raw)?;
    validate(&original)?;
    let body = openai_body(&original);
    let chat_body = serde_json::to_vec(&Value::Object(body))
        .map_err(|e| GatewayError::internal(e.to_string()))?;
    Ok(MessagesRequest {
        chat_body,
        original,
        raw_len: raw.len(),
    })
}

/// The body for an Anthropic provider: the client's, with the model and `max_tokens` the
/// pipeline chose; everything else (cache_control, thinking, top_k, unknown blocks) untouched.
pub fn passthrough_body(
    original: &Map<String, Value>,
    upstream_model: &str,
    max_tokens: u64,
) -> Vec<u8> {
    let mut body = original.clone();
    body.insert("model".into(), upstream_model.into());
    body.insert("max_tokens".into(), max_tokens.into());
    // Serializing a map of JSON values cannot fail.
    serde_json::to_vec(&Value::Object(body)).unwrap_or_default()
}

/// For `POST /v1/messages/count_tokens`: validates as [`parse_messages_request`] does, but
/// with no `max_tokens` required, and returns the OpenAI-form messages for
/// [`crate::tokens::count_prompt`]; tool definitions, which Anthropic counts as prompt, come
/// as one more system message holding their JSON text.
pub fn count_tokens_messages(raw: &[u8]) -> Result<Value, GatewayError> {
    let mut original = parse_object(raw)?;
    // Counting has no output: any max_tokens passes (also above a thinking budget).
    original.insert("max_tokens".into(), u64::from(u32::MAX).into());
    validate(&original)?;
    let mut messages = openai_messages(&original);
    if let Some(tools) = original.get("tools").filter(|t| !t.is_null()) {
        messages.push(json!({ "role": "system", "content": tools.to_string() }));
    }
    Ok(Value::Array(messages))
}

fn parse_object(raw: &[u8]) -> Result<Map<String, Value>, GatewayError> {
    match serde_json::from_slice(raw) {
        Ok(Value::Object(o)) => Ok(o),
        Ok(_) => Err(bad("body", "must be a JSON object")),
        Err(e) => Err(bad("body", &format!("malformed JSON ({e})"))),
    }
}

/// Anthropic's checks, each naming the field.
fn validate(b: &Map<String, Value>) -> Result<(), GatewayError> {
    match b.get("model") {
        Some(Value::String(s)) if s.trim().is_empty() => {
            return Err(bad("model", "must not be empty"))
        }
        // A model name goes into logs, metrics labels and the ledger: no novel-length ones.
        Some(Value::String(s)) if s.len() > MAX_MODEL_BYTES => {
            return Err(bad("model", "must be at most 256 bytes"))
        }
        Some(Value::String(_)) => {}
        None | Some(Value::Null) => return Err(bad("model", "is required")),
        Some(_) => return Err(bad("model", "must be a string")),
    }
    match b.get("max_tokens") {
        None | Some(Value::Null) => return Err(bad("max_tokens", "is required")),
        Some(v) if v.as_u64().is_some_and(|n| n > 0) => {}
        Some(_) => return Err(bad("max_tokens", "must be a positive integer")),
    }
    let msgs = match b.get("messages") {
        None | Some(Value::Null) => return Err(bad("messages", "is required")),
        Some(Value::Array(a)) if a.is_empty() => {
            return Err(bad("messages", "must contain at least one message"))
        }
        Some(Value::Array(a)) => a,
        Some(_) => return Err(bad("messages", "must be an array")),
    };
    for (i, m) in msgs.iter().enumerate() {
        check_message(i, m)?;
    }
    match b.get("system") {
        None | Some(Value::Null) | Some(Value::String(_)) => {}
        Some(Value::Array(a))
            if a.iter()
                .all(|s| block_type(s) == "text" && s["text"].is_string()) => {}
        Some(_) => return Err(bad("system", "must be a string or an array of text blocks")),
    }
    if !matches!(b.get("stream"), None | Some(Value::Null | Value::Bool(_))) {
        return Err(bad("stream", "must be a boolean"));
    }
    if let Some(t) = b.get("temperature").filter(|t| !t.is_null()) {
        if !t.as_f64().is_some_and(|t| (0.0..=1.0).contains(&t)) {
            return Err(bad("temperature", "must be a number between 0 and 1"));
        }
    }
    if let Some(s) = b.get("stop_sequences").filter(|s| !s.is_null()) {
        if !s.as_array().is_some_and(|a| a.iter().all(Value::is_string)) {
            return Err(bad("stop_sequences", "must be an array of strings"));
        }
    }
    match b.get("tools") {
        None | Some(Value::Null) => {}
        Some(Value::Array(tools)) => {
            for (i, t) in tools.iter().enumerate() {
                // Server tools (web search, code execution…) are billed by Anthropic per use,
                // which the gateway does not meter: not offered rather than given away.
                if !matches!(t.get("type"), None | Some(Value::Null))
                    && t.get("type").and_then(Value::as_str) != Some("custom")
                {
                    return Err(bad(
                        &format!("tools[{i}].type"),
                        "server tools are not offered through the gateway; define the tool yourself",
                    ));
                }
                if !t.get("name").is_some_and(Value::is_string) {
                    return Err(bad(&format!("tools[{i}].name"), "must be a string"));
                }
                if !matches!(t.get("input_schema"), None | Some(Value::Object(_))) {
                    return Err(bad(
                        &format!("tools[{i}].input_schema"),
                        "must be an object",
                    ));
                }
            }
        }
        Some(_) => return Err(bad("tools", "must be an array")),
    }
    let budget = b.get("thinking").and_then(|t| t.get("budget_tokens"));
    if let (Some(budget), Some(max)) = (budget, b.get("max_tokens").and_then(Value::as_u64)) {
        if budget.as_u64().is_none_or(|n| n >= max) {
            return Err(bad(
                "thinking.budget_tokens",
                "must be an integer below max_tokens",
            ));
        }
    }
    for field in ["mcp_servers", "container"] {
        if b.get(field).is_some_and(|v| !v.is_null()) {
            return Err(bad(
                field,
                "not offered through the gateway (billed by Anthropic per use, not metered here)",
            ));
        }
    }
    if let Some(path) = long_cache_ttl(&Value::Object(b.clone()), "body") {
        return Err(bad(
            &path,
            "only the default 5-minute cache is offered (cache writes are billed at one rate)",
        ));
    }
    match b.get("tool_choice") {
        None | Some(Value::Null) => {}
        Some(c) => match c.get("type").and_then(Value::as_str) {
            Some("auto" | "any" | "none") => {}
            Some("tool") if c.get("name").is_some_and(Value::is_string) => {}
            _ => {
                return Err(bad(
                    "tool_choice",
                    "must be {\"type\": \"auto\"|\"any\"|\"none\"} or {\"type\": \"tool\", \"name\": …}",
                ))
            }
        },
    }
    Ok(())
}

/// Where a `cache_control` asks for a TTL other than 5 minutes, if anywhere (a 1-hour cache
/// write costs more than the one cache-write rate a model has).
fn long_cache_ttl(v: &Value, at: &str) -> Option<String> {
    match v {
        Value::Object(o) => {
            if let Some(ttl) = o.get("cache_control").and_then(|c| c.get("ttl")) {
                if ttl.as_str() != Some("5m") {
                    return Some(format!("{at}.cache_control.ttl"));
                }
            }
            o.iter()
                .find_map(|(k, v)| long_cache_ttl(v, &format!("{at}.{k}")))
        }
        Value::Array(a) => a
            .iter()
            .enumerate()
            .find_map(|(i, v)| long_cache_ttl(v, &format!("{at}[{i}]"))),
        _ => None,
    }
}

fn check_message(i: usize, m: &Value) -> Result<(), GatewayError> {
    if !m.is_object() {
        return Err(bad(&format!("messages[{i}]"), "must be an object"));
    }
    if !matches!(
        m.get("role").and_then(Value::as_str),
        Some("user" | "assistant")
    ) {
        return Err(bad(
            &format!("messages[{i}].role"),
            "must be \"user\" or \"assistant\"",
        ));
    }
    let blocks = match m.get("content") {
        Some(Value::String(_)) => return Ok(()),
        Some(Value::Array(a))
            if a.iter()
                .all(|b| b.get("type").is_some_and(Value::is_string)) =>
        {
            a
        }
        _ => {
            return Err(bad(
                &format!("messages[{i}].content"),
                "must be a string or an array of content blocks with a type",
            ))
        }
    };
    for (j, b) in blocks.iter().enumerate() {
        let at = |f: &str| format!("messages[{i}].content[{j}].{f}");
        let is_str = |k: &str| b.get(k).is_some_and(Value::is_string);
        match block_type(b) {
            "text" if !is_str("text") => return Err(bad(&at("text"), "must be a string")),
            "image" if !b.get("source").is_some_and(Value::is_object) => {
                return Err(bad(&at("source"), "must be an object"))
            }
            "tool_use" if !is_str("id") => return Err(bad(&at("id"), "must be a string")),
            "tool_use" if !is_str("name") => return Err(bad(&at("name"), "must be a string")),
            "tool_result" if !is_str("tool_use_id") => {
                return Err(bad(&at("tool_use_id"), "must be a string"))
            }
            _ => {}
        }
    }
    Ok(())
}
