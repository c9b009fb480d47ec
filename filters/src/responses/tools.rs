//! `tools` and `tool_choice` of a Responses body as the chat request's members: function and
//! `namespace` tools become chat function tools; hosted tools (run by OpenAI) are kept apart,
//! for a provider that serves the Responses API.

use serde_json::{json, Map, Value};

use super::items::namespaced_name;
use crate::GatewayError;

fn field_err(field: &str, what: impl std::fmt::Display) -> GatewayError {
    GatewayError::invalid(format!("{field}: {what}"))
}

/// Whether a tool type is one OpenAI runs itself (a hosted tool): web search in every version
/// (`web_search`, `web_search_preview`, dated variants), file search, the code interpreter,
/// image generation and remote MCP servers.
pub fn is_hosted_tool(kind: &str) -> bool {
    kind.starts_with("web_search")
        || matches!(
            kind,
            "file_search" | "code_interpreter" | "image_generation" | "mcp"
        )
}

/// What `tools` and `tool_choice` say beyond the chat members they are written as.
pub(super) struct Tools {
    pub namespaced: Vec<(String, String, String)>,
    pub hosted: Vec<String>,
    pub forced_hosted: Option<String>,
}

/// `tools` and `tool_choice` as the chat request's members; hosted tools kept apart.
pub(super) fn read_tools(
    tools: Option<&Value>,
    choice: Option<&Value>,
    parallel_tool_calls: bool,
    chat: &mut Map<String, Value>,
) -> Result<Tools, GatewayError> {
    let mut read = Tools {
        namespaced: Vec::new(),
        hosted: Vec::new(),
        forced_hosted: None,
    };
    let mut functions = Vec::new();
    match tools {
        None => {}
        Some(Value::Array(list)) => {
            for (i, t) in list.iter().enumerate() {
                match t.get("type").and_then(Value::as_str) {
                    Some(kind) if is_hosted_tool(kind) => read.hosted.push(kind.to_owned()),
                    _ => chat_tools(i, t, &mut functions, &mut read.namespaced)?,
                }
            }
        }
        Some(_) => return Err(field_err("tools", "must be an array")),
    }
    if !functions.is_empty() {
        chat.insert("tools".into(), Value::Array(functions));
        chat.insert("parallel_tool_calls".into(), parallel_tool_calls.into());
    }
    if let Some(choice) = choice {
        match choice.get("type").and_then(Value::as_str) {
            Some(kind) if is_hosted_tool(kind) => read.forced_hosted = Some(kind.to_owned()),
            _ => {
                chat.insert("tool_choice".into(), chat_tool_choice(choice)?);
            }
        }
    }
    Ok(read)
}

/// A Responses tool as chat tools: a function tool (`name`, `parameters` at the top level) is
/// one; a `namespace` tool's functions are one each, named `{namespace}__{name}` (recorded in
/// `namespaced`, so a call is answered with its name and namespace). A tool OpenAI runs that
/// is not one of the hosted tools kept apart (a computer, …) has no chat stand-in: refused.
fn chat_tools(
    i: usize,
    t: &Value,
    out: &mut Vec<Value>,
    namespaced: &mut Vec<(String, String, String)>,
) -> Result<(), GatewayError> {
    let at = format!("tools[{i}]");
    if t.get("type").and_then(Value::as_str) != Some("namespace") {
        out.push(chat_tool(&at, t, None)?);
        return Ok(());
    }
    let ns = match t.get("name").and_then(Value::as_str) {
        Some(n) if !n.is_empty() => n,
        _ => {
            return Err(field_err(
                &format!("{at}.name"),
                "must be a non-empty string",
            ))
        }
    };
    let Some(list) = t.get("tools").and_then(Value::as_array) else {
        return Err(field_err(
            &format!("{at}.tools"),
            "must be an array of function tools",
        ));
    };
    for (j, inner) in list.iter().enumerate() {
        let tool = chat_tool(&format!("{at}.tools[{j}]"), inner, Some(ns))?;
        let name = inner["name"].as_str().unwrap_or_default();
        namespaced.push((namespaced_name(ns, name), ns.to_owned(), name.to_owned()));
        out.push(tool);
    }
    Ok(())
}

fn chat_tool(at: &str, t: &Value, namespace: Option<&str>) -> Result<Value, GatewayError> {
    let at = |f: &str| format!("{at}{f}");
    let Some(t) = t.as_object() else {
        return Err(field_err(&at(""), "must be an object"));
    };
    match t.get("type").and_then(Value::as_str) {
        Some("function") => {}
        Some(other) => {
            return Err(field_err(
                &at(".type"),
                format!(
                    "`{other}` tools are not supported: function, namespace and hosted tools only"
                ),
            ))
        }
        None => return Err(field_err(&at(".type"), "is required")),
    }
    let name = match t.get("name").and_then(Value::as_str) {
        Some(n) if !n.is_empty() => n,
        _ => return Err(field_err(&at(".name"), "must be a non-empty string")),
    };
    let mut f = Map::new();
    match namespace {
        Some(ns) => f.insert("name".into(), namespaced_name(ns, name).into()),
        None => f.insert("name".into(), name.into()),
    };
    if let Some(d) = t.get("description").filter(|v| !v.is_null()) {
        if !d.is_string() {
            return Err(field_err(&at(".description"), "must be a string"));
        }
        f.insert("description".into(), d.clone());
    }
    if let Some(p) = t.get("parameters").filter(|v| !v.is_null()) {
        if !p.is_object() {
            return Err(field_err(
                &at(".parameters"),
                "must be a JSON Schema object",
            ));
        }
        f.insert("parameters".into(), p.clone());
    }
    if let Some(s) = t.get("strict").filter(|v| !v.is_null()) {
        if !s.is_boolean() {
            return Err(field_err(&at(".strict"), "must be a boolean"));
        }
        f.insert("strict".into(), s.clone());
    }
    Ok(json!({"type": "function", "function": f}))
}

fn chat_tool_choice(choice: &Value) -> Result<Value, GatewayError> {
    match choice {
        Value::String(s) if ["auto", "none", "required"].contains(&s.as_str()) => {
            Ok(choice.clone())
        }
        Value::Object(o) if o.get("type").and_then(Value::as_str) == Some("function") => {
            match o.get("name").and_then(Value::as_str) {
                Some(n) if !n.is_empty() => {
                    Ok(json!({"type": "function", "function": {"name": n}}))
                }
                _ => Err(field_err("tool_choice.name", "must be a non-empty string")),
            }
        }
        _ => Err(field_err(
            "tool_choice",
            "must be \"auto\", \"none\", \"required\" or {\"type\":\"function\",\"name\":…}",
        )),
    }
}
