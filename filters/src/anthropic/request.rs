//! Requests both ways.
//!
//! Here: an OpenAI chat request, already validated by [`crate::openai::request`], checked for
//! fields Anthropic cannot honour ([`check_translatable`]) and written as a Messages body
//! ([`openai_to_messages`]). A field that would change the reply and has no Anthropic
//! equivalent is refused rather than dropped, so a client never gets a reply that silently
//! ignored what it asked for; neutral values of those fields are accepted.
//!
//! The inbound Messages API ([`parse_messages_request`], [`passthrough_body`],
//! [`count_tokens_messages`]) lives in `inbound.rs` and is re-exported here.

use serde_json::{json, Map, Value};

pub use super::inbound::{
    check_openai_translatable, count_tokens_messages, parse_messages_request, passthrough_body,
    MessagesRequest,
};
use crate::openai::request::ChatRequest;
use crate::GatewayError;

fn no_equivalent(field: &str) -> GatewayError {
    GatewayError::invalid(format!(
        "{field}: not supported for this model: its provider (Anthropic Messages API) has no \
         equivalent"
    ))
}

fn is_set(v: Option<&Value>) -> bool {
    v.is_some_and(|v| !v.is_null())
}

/// Fields of an OpenAI request that change the reply and have no Anthropic equivalent.
const NO_EQUIVALENT: &[&str] = &[
    "logprobs",
    "top_logprobs",
    "response_format",
    "logit_bias",
    "seed",
    "presence_penalty",
    "frequency_penalty",
    "audio",
    "modalities",
    "prediction",
    // The legacy form of tools: dropping them would answer without the functions offered.
    "functions",
    "function_call",
    // Reasoning and search options of OpenAI's own models; dropping them would answer as if
    // they had not been asked for.
    "reasoning_effort",
    "web_search_options",
];

/// Whether a (non-null) value of `field` asks for something: the neutral values are the
/// defaults OpenAI clients often send explicitly.
fn asks_for_something(field: &str, v: &Value) -> bool {
    match field {
        "logprobs" => v.as_bool() != Some(false),
        "response_format" => v.get("type").and_then(Value::as_str) != Some("text"),
        "logit_bias" => v.as_object().is_none_or(|o| !o.is_empty()),
        "presence_penalty" | "frequency_penalty" => v.as_f64() != Some(0.0),
        "modalities" => *v != json!(["text"]),
        _ => true,
    }
}

/// Refuses (400) OpenAI fields set to a value Anthropic cannot honour.
pub fn check_translatable(req: &ChatRequest) -> Result<(), GatewayError> {
    if req.n > 1 {
        return Err(no_equivalent("n"));
    }
    for field in NO_EQUIVALENT {
        if let Some(v) = req.body.get(*field).filter(|v| !v.is_null()) {
            if asks_for_something(field, v) {
                return Err(no_equivalent(field));
            }
        }
    }
    let tools = req.body.get("tools").and_then(Value::as_array);
    if let Some(i) = tools.and_then(|t| t.iter().position(|t| t["type"] != "function")) {
        return Err(GatewayError::invalid(format!(
            "tools[{i}].type: only function tools have an equivalent in the Anthropic Messages API"
        )));
    }
    Ok(())
}

/// The Anthropic Messages body for a request that passed [`check_translatable`].
pub fn openai_to_messages(
    req: &ChatRequest,
    upstream_model: &str,
    max_tokens: u64,
) -> Result<Vec<u8>, GatewayError> {
    let b = &req.body;
    let mut out = Map::new();
    out.insert("model".into(), upstream_model.into());
    out.insert("max_tokens".into(), max_tokens.into());

    let empty = Vec::new();
    let msgs = b
        .get("messages")
        .and_then(Value::as_array)
        .unwrap_or(&empty);
    let (system, messages) = translate_messages(msgs)?;
    out.insert("messages".into(), Value::Array(messages));
    if let Some(s) = system {
        out.insert("system".into(), s);
    }

    let tools: Vec<Value> = b
        .get("tools")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .filter_map(|t| t.get("function"))
        .map(tool)
        .collect();
    // Anthropic refuses a tool_choice without tools; OpenAI lets "none" or "auto" stand alone.
    if !tools.is_empty() {
        out.insert("tools".into(), Value::Array(tools));
        let mut choice = match b.get("tool_choice") {
            Some(Value::String(s)) => match s.as_str() {
                "none" => Some(json!({"type": "none"})),
                "required" => Some(json!({"type": "any"})),
                _ => Some(json!({"type": "auto"})),
            },
            Some(Value::Object(o)) => o
                .get("function")
                .and_then(|f| f.get("name"))
                .map(|name| json!({"type": "tool", "name": name})),
            _ => None,
        };
        if b.get("parallel_tool_calls") == Some(&Value::Bool(false)) {
            let c = choice.get_or_insert_with(|| json!({"type": "auto"}));
            // Anthropic has the flag on auto, any and tool only; with "none" it is moot.
            if c["type"] != "none" {
                c["disable_parallel_tool_use"] = true.into();
            }
        }
        if let Some(c) = choice {
            out.insert("tool_choice".into(), c);
        }
    }

    let stops: Vec<Value> = match b.get("stop") {
        Some(Value::String(s)) => vec![s.as_str().into()],
        Some(Value::Array(a)) => a.clone(),
        _ => Vec::new(),
    };
    // An empty stop sequence would end every reply at once; OpenAI ignores it, so do we.
    let stops: Vec<Value> = stops
        .into_iter()
        .filter(|s| s.as_str().is_some_and(|s| !s.is_empty()))
        .collect();
    if !stops.is_empty() {
        out.insert("stop_sequences".into(), Value::Array(stops));
    }
    if let Some(t) = b.get("temperature").and_then(Value::as_f64) {
        // OpenAI's range is 0–2, Anthropic's 0–1: clamp so requests valid for OpenAI still work.
        out.insert("temperature".into(), json!(t.min(1.0)));
    }
    // Recent Claude models refuse temperature and top_p together: temperature wins, and a
    // neutral top_p of 1 (which OpenAI clients often send) is simply left out.
    if let Some(p) = b.get("top_p").filter(|p| p.is_number()) {
        if !out.contains_key("temperature") && p.as_f64() != Some(1.0) {
            out.insert("top_p".into(), p.clone());
        }
    }
    if let Some(s) = b.get("stream").filter(|s| s.is_boolean()) {
        out.insert("stream".into(), s.clone());
    }
    if let Some(u) = b.get("user").filter(|u| u.is_string()) {
        out.insert("metadata".into(), json!({ "user_id": u }));
    }
    serde_json::to_vec(&Value::Object(out)).map_err(|e| GatewayError::internal(e.to_string()))
}

fn tool(f: &Value) -> Value {
    let mut t = Map::new();
    t.insert("name".into(), f.get("name").cloned().unwrap_or_default());
    if let Some(d) = f.get("description").filter(|d| d.is_string()) {
        t.insert("description".into(), d.clone());
    }
    let schema = f
        .get("parameters")
        .filter(|p| p.is_object())
        .cloned()
        .unwrap_or_else(|| json!({"type": "object", "properties": {}}));
    t.insert("input_schema".into(), schema);
    Value::Object(t)
}

/// The `system` value and the alternating `messages` of an OpenAI conversation.
fn translate_messages(msgs: &[Value]) -> Result<(Option<Value>, Vec<Value>), GatewayError> {
    let mut system: Vec<Value> = Vec::new();
    let mut system_has_array = false;
    // (role, blocks) in order, before merging.
    let mut turns: Vec<(&'static str, Vec<Value>)> = Vec::new();
    for (i, m) in msgs.iter().enumerate() {
        let role = m.get("role").and_then(Value::as_str).unwrap_or_default();
        let content = m.get("content").unwrap_or(&Value::Null);
        match role {
            "system" | "developer" => {
                system_has_array |= content.is_array();
                system.extend(text_blocks(i, content, &["text"])?);
            }
            "user" => turns.push(("user", user_blocks(i, content)?)),
            "assistant" => turns.push(("assistant", assistant_blocks(i, m)?)),
            "tool" => {
                let mut block = json!({
                    "type": "tool_result",
                    "tool_use_id": m.get("tool_call_id").cloned().unwrap_or_default(),
                });
                match content {
                    Value::String(s) if s.is_empty() => {}
                    Value::String(s) => block["content"] = s.as_str().into(),
                    _ => block["content"] = Value::Array(text_blocks(i, content, &["text"])?),
                }
                turns.push(("user", vec![block]));
            }
            _ => {
                return Err(GatewayError::invalid(format!(
                    "messages[{i}].role: the legacy role \"{role}\" is not supported for this \
                     model: its provider (Anthropic Messages API) has no equivalent; use tool"
                )))
            }
        }
    }

    let system = match system.is_empty() {
        true => None,
        false if system_has_array => Some(Value::Array(system)),
        false => Some(Value::String(
            system
                .iter()
                .filter_map(|b| b.get("text").and_then(Value::as_str))
                .collect::<Vec<_>>()
                .join("\n\n"),
        )),
    };

    // Anthropic requires user and assistant turns to alternate and refuses empty content.
    let mut merged: Vec<(&'static str, Vec<Value>)> = Vec::new();
    for (role, blocks) in turns.into_iter().filter(|(_, b)| !b.is_empty()) {
        match merged.last_mut() {
            Some((r, prev)) if *r == role => prev.extend(blocks),
            _ => merged.push((role, blocks)),
        }
    }
    match merged.first() {
        None => {
            return Err(GatewayError::invalid(
                "messages: at least one user message is required",
            ))
        }
        Some(("assistant", _)) => {
            return Err(GatewayError::invalid(
                "messages: the first non-system message must be from the user for this model",
            ))
        }
        _ => {}
    }
    let messages = merged
        .into_iter()
        .map(|(role, mut blocks)| {
            // Anthropic wants the results of the previous turn's tool calls before anything
            // else in a user turn; a stable sort keeps each group's order.
            blocks.sort_by_key(|b| b["type"] != "tool_result");
            json!({ "role": role, "content": blocks })
        })
        .collect();
    Ok((system, messages))
}

/// Text blocks of a string or an array of parts whose types are in `allowed` (`refusal`
/// parts of an assistant turn are its text); empty texts dropped, `cache_control` kept.
fn text_blocks(i: usize, content: &Value, allowed: &[&str]) -> Result<Vec<Value>, GatewayError> {
    let mut out = Vec::new();
    match content {
        Value::String(s) => push_text(&mut out, s, None),
        Value::Array(parts) => {
            for (j, p) in parts.iter().enumerate() {
                let ty = p.get("type").and_then(Value::as_str).unwrap_or_default();
                if !allowed.contains(&ty) {
                    return Err(unsupported_part(i, j, ty));
                }
                let text = p.get(ty).and_then(Value::as_str).unwrap_or_default();
                push_text(&mut out, text, p.get("cache_control"));
            }
        }
        _ => {}
    }
    Ok(out)
}

fn push_text(out: &mut Vec<Value>, text: &str, cache_control: Option<&Value>) {
    if text.is_empty() {
        return;
    }
    let mut block = json!({ "type": "text", "text": text });
    if let Some(c) = cache_control {
        block["cache_control"] = c.clone();
    }
    out.push(block);
}

fn unsupported_part(i: usize, j: usize, ty: &str) -> GatewayError {
    GatewayError::invalid(format!(
        "messages[{i}].content[{j}].type: \"{ty}\" is not supported for this model: its \
         provider (Anthropic Messages API) has no equivalent"
    ))
}

fn user_blocks(i: usize, content: &Value) -> Result<Vec<Value>, GatewayError> {
    let Value::Array(parts) = content else {
        return text_blocks(i, content, &["text"]);
    };
    let mut out = Vec::new();
    for (j, p) in parts.iter().enumerate() {
        match p.get("type").and_then(Value::as_str).unwrap_or_default() {
            "text" => out.extend(text_blocks(i, &Value::Array(vec![p.clone()]), &["text"])?),
            "image_url" => {
                let mut block = image_block(i, j, p)?;
                if let Some(c) = p.get("cache_control") {
                    block["cache_control"] = c.clone();
                }
                out.push(block);
            }
            other => return Err(unsupported_part(i, j, other)),
        }
    }
    Ok(out)
}

fn image_block(i: usize, j: usize, part: &Value) -> Result<Value, GatewayError> {
    let field = format!("messages[{i}].content[{j}].image_url.url");
    let url = match part.get("image_url") {
        Some(Value::String(s)) => Some(s.as_str()),
        Some(v) => v.get("url").and_then(Value::as_str),
        None => None,
    }
    .ok_or_else(|| GatewayError::invalid(format!("{field}: is required")))?;
    if let Some(rest) = url.strip_prefix("data:") {
        let (media, data) = rest.split_once(";base64,").ok_or_else(|| {
            GatewayError::invalid(format!(
                "{field}: a data URL must be of the form data:<media type>;base64,<data>"
            ))
        })?;
        return Ok(json!({
            "type": "image",
            "source": { "type": "base64", "media_type": media, "data": data },
        }));
    }
    if url.starts_with("https://") || url.starts_with("http://") {
        return Ok(json!({ "type": "image", "source": { "type": "url", "url": url } }));
    }
    Err(GatewayError::invalid(format!(
        "{field}: must be an http(s) URL or a base64 data URL"
    )))
}

fn assistant_blocks(i: usize, m: &Value) -> Result<Vec<Value>, GatewayError> {
    if is_set(m.get("function_call")) {
        return Err(no_equivalent(&format!("messages[{i}].function_call")));
    }
    let content = m.get("content").unwrap_or(&Value::Null);
    let mut out = text_blocks(i, content, &["text", "refusal"])?;
    let calls = m.get("tool_calls").and_then(Value::as_array);
    for (k, call) in calls.into_iter().flatten().enumerate() {
        let at = |f: &str| format!("messages[{i}].tool_calls[{k}].{f}");
        let id = call.get("id").and_then(Value::as_str);
        let id = id.ok_or_else(|| GatewayError::invalid(format!("{}: is required", at("id"))))?;
        let f = call.get("function").unwrap_or(&Value::Null);
        let name = f.get("name").and_then(Value::as_str).ok_or_else(|| {
            GatewayError::invalid(format!("{}: is required", at("function.name")))
        })?;
        let args = f
            .get("arguments")
            .and_then(Value::as_str)
            .unwrap_or_default();
        let input = if args.trim().is_empty() {
            json!({})
        } else {
            match serde_json::from_str::<Value>(args) {
                Ok(v @ Value::Object(_)) => v,
                _ => {
                    return Err(GatewayError::invalid(format!(
                        "{}: must be the JSON text of an object",
                        at("function.arguments")
                    )))
                }
            }
        };
        out.push(json!({ "type": "tool_use", "id": id, "name": name, "input": input }));
    }
    Ok(out)
}
