//! The OpenAI mirror of an inbound Messages request: the same conversation as an OpenAI chat
//! body, so routing, credit holds and OpenAI-compatible providers see one request shape; and
//! [`check_openai_translatable`], for what that mirror had to leave out.

use serde_json::{json, Map, Value};

use crate::GatewayError;

/// Refuses (400) what [`MessagesRequest::chat`] had to leave out, for a request about to go
/// to an OpenAI-compatible provider: content blocks other than text, images (base64 or URL)
/// and tool results of text, and server tools. Anthropic providers get the original body and
/// need no such check. Thinking blocks in assistant turns are not refused: they are the
/// model's own past reasoning, and OpenAI-compatible models take none.
pub fn check_openai_translatable(original: &Map<String, Value>) -> Result<(), GatewayError> {
    let refuse = |field: String, what: &str| {
        GatewayError::invalid(format!(
            "{field}: {what} is not supported for this model: its provider (OpenAI-compatible \
             chat API) has no equivalent"
        ))
    };
    for (i, m) in messages_of(original).iter().enumerate() {
        for (j, b) in blocks_of(m).iter().enumerate() {
            let at = format!("messages[{i}].content[{j}]");
            match block_type(b) {
                "text" | "tool_use" | "thinking" | "redacted_thinking" => {}
                "image" => {
                    let src = b["source"]["type"].as_str().unwrap_or_default();
                    if src != "base64" && src != "url" {
                        return Err(refuse(format!("{at}.source.type"), "this image source"));
                    }
                }
                "tool_result" => {
                    for (k, c) in b["content"].as_array().into_iter().flatten().enumerate() {
                        if block_type(c) != "text" {
                            return Err(refuse(format!("{at}.content[{k}].type"), "non-text"));
                        }
                    }
                }
                other => return Err(refuse(format!("{at}.type"), &format!("\"{other}\""))),
            }
        }
    }
    for (i, t) in tools_of(original).iter().enumerate() {
        if !is_custom_tool(t) {
            return Err(refuse(format!("tools[{i}].type"), "a server tool"));
        }
    }
    Ok(())
}

pub(super) fn block_type(b: &Value) -> &str {
    b.get("type").and_then(Value::as_str).unwrap_or_default()
}

pub(super) fn messages_of(b: &Map<String, Value>) -> &[Value] {
    b.get("messages")
        .and_then(Value::as_array)
        .map_or(&[], Vec::as_slice)
}

pub(super) fn tools_of(b: &Map<String, Value>) -> &[Value] {
    b.get("tools")
        .and_then(Value::as_array)
        .map_or(&[], Vec::as_slice)
}

pub(super) fn blocks_of(m: &Value) -> &[Value] {
    m.get("content")
        .and_then(Value::as_array)
        .map_or(&[], Vec::as_slice)
}

/// A tool the client runs (as opposed to a server tool such as web search, typed by version).
pub(super) fn is_custom_tool(t: &Value) -> bool {
    matches!(t.get("type").and_then(Value::as_str), None | Some("custom"))
}

/// The text of the text blocks of `v` (or `v` itself when a string), joined.
pub(super) fn joined_text(v: &Value, sep: &str) -> String {
    match v {
        Value::String(s) => s.clone(),
        Value::Array(a) => a
            .iter()
            .filter(|b| block_type(b) == "text")
            .filter_map(|b| b.get("text").and_then(Value::as_str))
            .collect::<Vec<_>>()
            .join(sep),
        _ => String::new(),
    }
}

/// The OpenAI form of a validated Messages body.
pub(super) fn openai_body(b: &Map<String, Value>) -> Map<String, Value> {
    let mut out = Map::new();
    for k in ["model", "max_tokens", "temperature", "top_p"] {
        if let Some(v) = b.get(k).filter(|v| !v.is_null()) {
            out.insert(k.into(), v.clone());
        }
    }
    out.insert("messages".into(), Value::Array(openai_messages(b)));
    if b.get("stream") == Some(&Value::Bool(true)) {
        out.insert("stream".into(), true.into());
        out.insert("stream_options".into(), json!({ "include_usage": true }));
    }
    if let Some(s) = b.get("stop_sequences").filter(|s| !s.is_null()) {
        out.insert("stop".into(), s.clone());
    }
    let tools: Vec<Value> = tools_of(b)
        .iter()
        .filter(|t| is_custom_tool(t))
        .map(|t| {
            let mut f = Map::new();
            f.insert("name".into(), t["name"].clone());
            if let Some(d) = t.get("description").filter(|d| d.is_string()) {
                f.insert("description".into(), d.clone());
            }
            if let Some(s) = t.get("input_schema") {
                f.insert("parameters".into(), s.clone());
            }
            json!({ "type": "function", "function": f })
        })
        .collect();
    if !tools.is_empty() {
        out.insert("tools".into(), Value::Array(tools));
    }
    if let Some(c) = b.get("tool_choice").filter(|c| c.is_object()) {
        let choice = match c["type"].as_str() {
            Some("any") => json!("required"),
            Some("none") => json!("none"),
            Some("tool") => json!({ "type": "function", "function": { "name": c["name"] } }),
            _ => json!("auto"),
        };
        out.insert("tool_choice".into(), choice);
        if c.get("disable_parallel_tool_use") == Some(&Value::Bool(true)) {
            out.insert("parallel_tool_calls".into(), false.into());
        }
    }
    if let Some(u) = b
        .get("metadata")
        .and_then(|m| m.get("user_id"))
        .filter(|u| u.is_string())
    {
        out.insert("user".into(), u.clone());
    }
    out
}

/// The OpenAI-form messages of a validated Messages body, system prompt first.
pub(super) fn openai_messages(b: &Map<String, Value>) -> Vec<Value> {
    let mut out = Vec::new();
    let system = b
        .get("system")
        .map(|s| joined_text(s, "\n\n"))
        .unwrap_or_default();
    if !system.is_empty() {
        out.push(json!({ "role": "system", "content": system }));
    }
    for m in messages_of(b) {
        match (m["role"].as_str(), &m["content"]) {
            (Some(role), Value::String(s)) => out.push(json!({ "role": role, "content": s })),
            (Some("assistant"), Value::Array(blocks)) => out.push(assistant_message(blocks)),
            (_, Value::Array(blocks)) => user_messages(blocks, &mut out),
            _ => {}
        }
    }
    out
}

/// An Anthropic user turn: its tool results as `tool` messages (OpenAI wants them right after
/// the assistant's calls), then one user message with the rest.
fn user_messages(blocks: &[Value], out: &mut Vec<Value>) {
    let mut parts = Vec::new();
    for b in blocks {
        match block_type(b) {
            "tool_result" => out.push(json!({
                "role": "tool",
                "tool_call_id": b["tool_use_id"],
                "content": joined_text(&b["content"], "\n\n"),
            })),
            "text" => parts.push(json!({ "type": "text", "text": b["text"] })),
            "image" => {
                let s = &b["source"];
                let url = match s["type"].as_str() {
                    Some("base64") => format!(
                        "data:{};base64,{}",
                        s["media_type"].as_str().unwrap_or_default(),
                        s["data"].as_str().unwrap_or_default()
                    ),
                    Some("url") => s["url"].as_str().unwrap_or_default().to_owned(),
                    // Other sources (files) have no OpenAI form: check_openai_translatable.
                    _ => continue,
                };
                parts.push(json!({ "type": "image_url", "image_url": { "url": url } }));
            }
            // Documents and newer blocks: see check_openai_translatable.
            _ => {}
        }
    }
    let content = match parts.as_slice() {
        [] => return,
        [p] if p["type"] == "text" => p["text"].clone(),
        _ => Value::Array(parts),
    };
    out.push(json!({ "role": "user", "content": content }));
}

/// An Anthropic assistant turn: text as content, tool_use blocks as tool calls; thinking is
/// dropped (no OpenAI-compatible model takes another's reasoning back).
fn assistant_message(blocks: &[Value]) -> Value {
    let text: String = blocks
        .iter()
        .filter(|b| block_type(b) == "text")
        .filter_map(|b| b["text"].as_str())
        .collect();
    let calls: Vec<Value> = blocks
        .iter()
        .filter(|b| block_type(b) == "tool_use")
        .map(|b| {
            json!({
                "id": b["id"], "type": "function",
                "function": { "name": b["name"], "arguments": b.get("input").unwrap_or(&json!({})).to_string() },
            })
        })
        .collect();
    let mut m = json!({ "role": "assistant", "content": text });
    if !calls.is_empty() {
        if text.is_empty() {
            m["content"] = Value::Null;
        }
        m["tool_calls"] = Value::Array(calls);
    }
    m
}
