//! Conversation items, the Responses API's unit of input and output: checked as a client sends
//! them, and written as chat messages. A response's output items are valid input items, so a
//! `previous_response_id` chain (its inputs and outputs, oldest first) is written the same way.

use serde_json::{json, Map, Value};

use crate::GatewayError;

const ROLES: &[&str] = &["user", "assistant", "system", "developer"];
/// The most items one request may carry (a chain included).
pub const MAX_ITEMS: usize = 10_000;

fn field_err(field: &str, what: impl std::fmt::Display) -> GatewayError {
    GatewayError::invalid(format!("{field}: {what}"))
}

/// The chat tool name of a function in a `namespace` tool (and of its calls).
pub fn namespaced_name(namespace: &str, name: &str) -> String {
    format!("{namespace}__{name}")
}

/// `input` as a list of checked items: a string is one user message.
pub fn normalize_input(input: &Value) -> Result<Vec<Value>, GatewayError> {
    let list = match input {
        Value::String(s) => {
            return Ok(vec![json!({
                "type": "message",
                "role": "user",
                "content": [{"type": "input_text", "text": s}],
            })])
        }
        Value::Array(list) => list,
        _ => return Err(field_err("input", "must be a string or an array of items")),
    };
    if list.len() > MAX_ITEMS {
        return Err(field_err("input", "holds too many items"));
    }
    list.iter()
        .enumerate()
        .map(|(i, item)| check_item(&format!("input[{i}]"), item))
        .collect()
}

/// One item, checked; a message without `type` (the easy input form) gets `"type":"message"`.
/// An item recording what a hosted tool did (`web_search_call`, `mcp_list_tools`, …), which a
/// client such as Codex sends back in its next request's input.
pub fn is_hosted_call(kind: &str) -> bool {
    matches!(
        kind,
        "web_search_call"
            | "file_search_call"
            | "code_interpreter_call"
            | "image_generation_call"
            | "mcp_call"
            | "mcp_list_tools"
            | "mcp_approval_request"
            | "mcp_approval_response"
    )
}

fn check_item(at: &str, item: &Value) -> Result<Value, GatewayError> {
    let Some(o) = item.as_object() else {
        return Err(field_err(at, "must be an object"));
    };
    let kind = match o.get("type") {
        None | Some(Value::Null) if o.contains_key("role") => "message",
        Some(Value::String(t)) => t.as_str(),
        _ => return Err(field_err(&format!("{at}.type"), "is required")),
    };
    let string = |k: &str| match o.get(k) {
        Some(Value::String(s)) if !s.is_empty() => Ok(s.as_str()),
        _ => Err(field_err(
            &format!("{at}.{k}"),
            "must be a non-empty string",
        )),
    };
    match kind {
        "message" => {
            let role = string("role")?;
            if !ROLES.contains(&role) {
                return Err(field_err(
                    &format!("{at}.role"),
                    "must be user, assistant, system or developer",
                ));
            }
            match o.get("content") {
                Some(Value::String(_)) => {}
                Some(Value::Array(parts)) => {
                    for (j, p) in parts.iter().enumerate() {
                        check_part(&format!("{at}.content[{j}]"), p)?;
                    }
                }
                _ => {
                    return Err(field_err(
                        &format!("{at}.content"),
                        "must be a string or an array of content parts",
                    ))
                }
            }
        }
        "function_call" => {
            string("call_id")?;
            string("name")?;
            if !o.get("arguments").is_some_and(Value::is_string) {
                return Err(field_err(&format!("{at}.arguments"), "must be a string"));
            }
        }
        "function_call_output" => {
            string("call_id")?;
            match o.get("output") {
                Some(Value::String(_)) => {}
                Some(Value::Array(parts)) => {
                    for (j, p) in parts.iter().enumerate() {
                        check_part(&format!("{at}.output[{j}]"), p)?;
                    }
                }
                _ => {
                    return Err(field_err(
                        &format!("{at}.output"),
                        "must be a string or an array of content parts",
                    ))
                }
            }
        }
        // Reasoning a provider gave earlier, and what a hosted tool did (a web search):
        // a chat provider cannot take them back, so they are kept in the stored
        // conversation and left out of the provider's request.
        "reasoning" => {}
        k if is_hosted_call(k) => {}
        "item_reference" => return Err(field_err(
            &format!("{at}.type"),
            "item references are not supported; send the item itself or use previous_response_id",
        )),
        other => {
            return Err(field_err(
                &format!("{at}.type"),
                format!("unknown item type `{other}`"),
            ))
        }
    }
    let mut out = o.clone();
    out.insert("type".into(), kind.into());
    Ok(Value::Object(out))
}

fn check_part(at: &str, part: &Value) -> Result<(), GatewayError> {
    let Some(p) = part.as_object() else {
        return Err(field_err(at, "must be an object"));
    };
    match p.get("type").and_then(Value::as_str) {
        Some("input_text" | "output_text") => {
            if !p.get("text").is_some_and(Value::is_string) {
                return Err(field_err(&format!("{at}.text"), "must be a string"));
            }
        }
        Some("refusal") => {
            if !p.get("refusal").is_some_and(Value::is_string) {
                return Err(field_err(&format!("{at}.refusal"), "must be a string"));
            }
        }
        Some("input_image") => {
            match p.get("image_url") {
                Some(Value::String(u)) if !u.is_empty() => {}
                _ if p.contains_key("file_id") => return Err(field_err(
                    &format!("{at}.file_id"),
                    "files are not supported; send the image as image_url (a URL or a data URL)",
                )),
                _ => return Err(field_err(&format!("{at}.image_url"), "must be a URL")),
            }
        }
        Some(t @ ("input_file" | "input_audio")) => {
            return Err(field_err(
                &format!("{at}.type"),
                format!("`{t}` parts are not supported"),
            ))
        }
        Some(other) => {
            return Err(field_err(
                &format!("{at}.type"),
                format!("unknown content part type `{other}`"),
            ))
        }
        None => return Err(field_err(&format!("{at}.type"), "is required")),
    }
    Ok(())
}

/// Writes checked items as chat messages onto `out`: consecutive function calls become one
/// assistant turn's `tool_calls` (joined to the assistant text before them), a call's output a
/// `tool` message, reasoning is left out. `what` names the items in an error.
pub fn items_to_messages(
    items: &[Value],
    what: &str,
    out: &mut Vec<Value>,
) -> Result<(), GatewayError> {
    for (i, item) in items.iter().enumerate() {
        let kind = item
            .get("type")
            .and_then(Value::as_str)
            .unwrap_or("message");
        match kind {
            "message" => {
                let role = match item.get("role").and_then(Value::as_str) {
                    // Chat providers that predate `developer` read it as what it is: system.
                    Some("developer") | Some("system") => "system",
                    Some("assistant") => "assistant",
                    _ => "user",
                };
                let content = match item.get("content") {
                    Some(Value::Array(parts)) => chat_content(role, parts),
                    Some(c) => c.clone(),
                    None => Value::String(String::new()),
                };
                out.push(json!({"role": role, "content": content}));
            }
            "function_call" => {
                let name = match (item["namespace"].as_str(), item["name"].as_str()) {
                    (Some(ns), Some(name)) => Value::String(namespaced_name(ns, name)),
                    _ => item["name"].clone(),
                };
                let call = json!({
                    "id": item["call_id"],
                    "type": "function",
                    "function": {"name": name, "arguments": item["arguments"]},
                });
                match out.last_mut().and_then(Value::as_object_mut) {
                    Some(last) if last.get("role") == Some(&json!("assistant")) => {
                        let calls = last.entry("tool_calls").or_insert_with(|| json!([]));
                        if let Some(list) = calls.as_array_mut() {
                            list.push(call);
                        }
                    }
                    _ => out
                        .push(json!({"role": "assistant", "content": null, "tool_calls": [call]})),
                }
            }
            "function_call_output" => {
                let content = match &item["output"] {
                    Value::Array(parts) => Value::String(joined_text(parts)),
                    other => other.clone(),
                };
                out.push(
                    json!({"role": "tool", "tool_call_id": item["call_id"], "content": content}),
                );
            }
            "reasoning" => {}
            k if is_hosted_call(k) => {}
            other => {
                return Err(field_err(
                    &format!("{what}[{i}].type"),
                    format!("unknown item type `{other}`"),
                ))
            }
        }
    }
    Ok(())
}

/// A message's parts in chat form: text joined for an assistant (every chat provider takes a
/// string there), typed parts for the others (images as `image_url`).
fn chat_content(role: &str, parts: &[Value]) -> Value {
    if role == "assistant" || parts.iter().all(|p| p.get("image_url").is_none()) {
        return Value::String(joined_text(parts));
    }
    let list = parts
        .iter()
        .map(|p| match p.get("type").and_then(Value::as_str) {
            Some("input_image") => {
                let mut image = Map::new();
                image.insert("url".into(), p["image_url"].clone());
                if let Some(d) = p.get("detail").filter(|d| d.is_string()) {
                    image.insert("detail".into(), d.clone());
                }
                json!({"type": "image_url", "image_url": image})
            }
            _ => json!({"type": "text", "text": part_text(p)}),
        })
        .collect();
    Value::Array(list)
}

fn part_text(p: &Value) -> &str {
    p.get("text")
        .or_else(|| p.get("refusal"))
        .and_then(Value::as_str)
        .unwrap_or("")
}

fn joined_text(parts: &[Value]) -> String {
    parts.iter().map(part_text).collect::<Vec<_>>().join("")
}

/// Items as stored and listed by `GET /v1/responses/{id}/input_items`: each with an `id` (an
/// item the client sent without one gets `{prefix}_{response}_{index}`).
pub fn with_ids(items: &[Value], response_id: &str) -> Vec<Value> {
    let stem = response_id.strip_prefix("resp_").unwrap_or(response_id);
    items
        .iter()
        .enumerate()
        .map(|(i, item)| {
            let mut item = item.clone();
            if let Some(o) = item.as_object_mut() {
                if !o.get("id").is_some_and(Value::is_string) {
                    let prefix = match o.get("type").and_then(Value::as_str) {
                        Some("function_call") => "fc",
                        Some("function_call_output") => "fco",
                        Some("reasoning") => "rs",
                        _ => "msg",
                    };
                    o.insert("id".into(), format!("{prefix}_{stem}_in{i}").into());
                }
            }
            item
        })
        .collect()
}
