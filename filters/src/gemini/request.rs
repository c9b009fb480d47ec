//! A Gemini `generateContent` body, checked, and written as the internal chat request:
//! `contents` (roles `user` and `model`; parts of text, inline data, function calls and
//! responses) as messages, `systemInstruction` as the system message, function declarations as
//! chat tools, `toolConfig` as `tool_choice`, `generationConfig` as the chat sampling fields.
//! Gemini gives function calls no ids: the n-th call of a name gets `call_{name}_{n}`, and the
//! n-th response of that name answers it.

use std::collections::HashMap;

use serde_json::{json, Map, Value};

use crate::GatewayError;

/// The most `contents` entries one request may carry.
const MAX_CONTENTS: usize = 10_000;

fn field_err(field: &str, what: impl std::fmt::Display) -> GatewayError {
    GatewayError::invalid(format!("{field}: {what}"))
}

/// A checked Gemini request.
#[derive(Debug, Clone)]
pub struct GeminiRequest {
    /// The chat request (without `model` and `stream`, set by [`GeminiRequest::chat_body`]).
    chat: Map<String, Value>,
    /// The conversation's texts, for `countTokens`.
    pub texts: String,
}

/// Parses a `generateContent` (or `countTokens`) body.
pub fn parse_gemini_request(raw: &[u8]) -> Result<GeminiRequest, GatewayError> {
    let body: Value = serde_json::from_slice(raw)
        .map_err(|e| GatewayError::invalid(format!("body: malformed JSON ({e})")))?;
    let Value::Object(mut body) = body else {
        return Err(GatewayError::invalid("body: must be a JSON object"));
    };
    // countTokens may wrap the request.
    if let Some(Value::Object(inner)) = body.remove("generateContentRequest") {
        body = inner;
    }
    let mut texts = String::new();
    let mut messages = Vec::new();
    if let Some(si) = body.get("systemInstruction").filter(|v| !v.is_null()) {
        let text = parts_text(si.get("parts"), "systemInstruction.parts")?;
        texts.push_str(&text);
        messages.push(json!({"role": "system", "content": text}));
    }
    let contents = match body.get("contents") {
        Some(Value::Array(c)) if !c.is_empty() => c,
        Some(Value::Array(_)) => return Err(field_err("contents", "must not be empty")),
        None | Some(Value::Null) => return Err(field_err("contents", "is required")),
        Some(_) => return Err(field_err("contents", "must be an array of contents")),
    };
    if contents.len() > MAX_CONTENTS {
        return Err(field_err("contents", "holds too many entries"));
    }
    let mut calls: HashMap<String, (usize, usize)> = HashMap::new();
    for (i, c) in contents.iter().enumerate() {
        content_messages(i, c, &mut messages, &mut calls, &mut texts)?;
    }
    let mut chat = Map::new();
    chat.insert("messages".into(), Value::Array(messages));
    if let Some(tools) = body.get("tools").filter(|v| !v.is_null()) {
        let list = chat_tools(tools, &mut texts)?;
        if !list.is_empty() {
            chat.insert("tools".into(), Value::Array(list));
        }
    }
    if let Some(tc) = body.get("toolConfig").filter(|v| !v.is_null()) {
        if let Some(choice) = tool_choice(tc)? {
            chat.insert("tool_choice".into(), choice);
        }
    }
    if let Some(g) = body.get("generationConfig").filter(|v| !v.is_null()) {
        generation_config(g, &mut chat)?;
    }
    Ok(GeminiRequest { chat, texts })
}

impl GeminiRequest {
    /// The internal chat request for `model`, streamed or not.
    pub fn chat_body(&self, model: &str, stream: bool) -> Vec<u8> {
        let mut body = self.chat.clone();
        body.insert("model".into(), model.into());
        if stream {
            body.insert("stream".into(), true.into());
            body.insert("stream_options".into(), json!({"include_usage": true}));
        }
        serde_json::to_vec(&Value::Object(body)).unwrap_or_default()
    }
}

/// The texts of a `parts` array (text parts only), joined.
fn parts_text(parts: Option<&Value>, at: &str) -> Result<String, GatewayError> {
    let Some(Value::Array(parts)) = parts else {
        return Err(field_err(at, "must be an array of parts"));
    };
    let mut out = String::new();
    for (j, p) in parts.iter().enumerate() {
        match p.get("text") {
            Some(Value::String(t)) => out.push_str(t),
            _ => return Err(field_err(&format!("{at}[{j}].text"), "must be a string")),
        }
    }
    Ok(out)
}

/// One `contents` entry as chat messages: a `functionResponse` part is a `tool` message of its
/// own (in the order met), the other parts make up one user or assistant message after them.
fn content_messages(
    i: usize,
    c: &Value,
    out: &mut Vec<Value>,
    calls: &mut HashMap<String, (usize, usize)>,
    texts: &mut String,
) -> Result<(), GatewayError> {
    let at = format!("contents[{i}]");
    let model = match c.get("role").and_then(Value::as_str) {
        None | Some("user") => false,
        Some("model") => true,
        Some(_) => {
            return Err(field_err(
                &format!("{at}.role"),
                "must be \"user\" or \"model\"",
            ))
        }
    };
    let Some(Value::Array(parts)) = c.get("parts") else {
        return Err(field_err(
            &format!("{at}.parts"),
            "must be an array of parts",
        ));
    };
    let mut content: Vec<Value> = Vec::new();
    let mut tool_calls = Vec::new();
    for (j, p) in parts.iter().enumerate() {
        let at = format!("{at}.parts[{j}]");
        let Some(p) = p.as_object() else {
            return Err(field_err(&at, "must be an object"));
        };
        if p.get("thought").and_then(Value::as_bool) == Some(true) {
            // The model's own past thoughts: chat providers take none back.
            continue;
        }
        if let Some(t) = p.get("text") {
            let t = t
                .as_str()
                .ok_or_else(|| field_err(&format!("{at}.text"), "must be a string"))?;
            texts.push_str(t);
            content.push(json!({"type": "text", "text": t}));
        } else if let Some(d) = p.get("inlineData") {
            content.push(inline_image(&at, d, model)?);
        } else if let Some(f) = p.get("functionCall") {
            tool_calls.push(function_call(&at, f, model, calls, texts)?);
        } else if let Some(f) = p.get("functionResponse") {
            out.push(function_response(&at, f, calls, texts)?);
        } else {
            let kind = p.keys().next().cloned().unwrap_or_default();
            return Err(field_err(&at, format!("`{kind}` parts are not supported")));
        }
    }
    out.extend(turn_message(model, content, tool_calls));
    Ok(())
}

/// An `inlineData` part (a user's image) as a chat image part with a data URL.
fn inline_image(at: &str, d: &Value, model: bool) -> Result<Value, GatewayError> {
    if model {
        return Err(field_err(
            &format!("{at}.inlineData"),
            "is only taken in a user turn",
        ));
    }
    let (Some(mime), Some(data)) = (
        d.get("mimeType").and_then(Value::as_str),
        d.get("data").and_then(Value::as_str),
    ) else {
        return Err(field_err(
            &format!("{at}.inlineData"),
            "needs mimeType and data",
        ));
    };
    if !mime.starts_with("image/") {
        return Err(field_err(
            &format!("{at}.inlineData.mimeType"),
            format!("`{mime}` is not supported: images only"),
        ));
    }
    Ok(json!({"type": "image_url", "image_url": {"url": format!("data:{mime};base64,{data}")}}))
}

/// A `functionCall` part (a model's call) as a chat tool call, given the id of the n-th call
/// of its name.
fn function_call(
    at: &str,
    f: &Value,
    model: bool,
    calls: &mut HashMap<String, (usize, usize)>,
    texts: &mut String,
) -> Result<Value, GatewayError> {
    if !model {
        return Err(field_err(
            &format!("{at}.functionCall"),
            "is only taken in a model turn",
        ));
    }
    let name = f
        .get("name")
        .and_then(Value::as_str)
        .filter(|n| !n.is_empty());
    let name = name.ok_or_else(|| {
        field_err(
            &format!("{at}.functionCall.name"),
            "must be a non-empty string",
        )
    })?;
    let args = f.get("args").cloned().unwrap_or(json!({}));
    let n = &mut calls.entry(name.to_owned()).or_default().0;
    let id = format!("call_{name}_{n}");
    *n += 1;
    let arguments = args.to_string();
    texts.push_str(&arguments);
    Ok(json!({"id": id, "type": "function", "function": {"name": name, "arguments": arguments}}))
}

/// A `functionResponse` part as a chat `tool` message answering the n-th call of its name.
fn function_response(
    at: &str,
    f: &Value,
    calls: &mut HashMap<String, (usize, usize)>,
    texts: &mut String,
) -> Result<Value, GatewayError> {
    let name = f
        .get("name")
        .and_then(Value::as_str)
        .filter(|n| !n.is_empty());
    let name = name.ok_or_else(|| {
        field_err(
            &format!("{at}.functionResponse.name"),
            "must be a non-empty string",
        )
    })?;
    let n = &mut calls.entry(name.to_owned()).or_default().1;
    let id = format!("call_{name}_{n}");
    *n += 1;
    let response = f
        .get("response")
        .cloned()
        .unwrap_or(Value::Null)
        .to_string();
    texts.push_str(&response);
    Ok(json!({"role": "tool", "tool_call_id": id, "content": response}))
}

/// The turn's own message, if it has content or tool calls: text only (or any model turn) as
/// one string, a user's text with images as parts.
fn turn_message(model: bool, content: Vec<Value>, tool_calls: Vec<Value>) -> Option<Value> {
    let role = if model { "assistant" } else { "user" };
    let only_text = content.iter().all(|p| p["type"] == "text");
    let content = if content.is_empty() {
        Value::Null
    } else if only_text || model {
        let joined: String = content.iter().filter_map(|p| p["text"].as_str()).collect();
        Value::String(joined)
    } else {
        Value::Array(content)
    };
    if !tool_calls.is_empty() {
        Some(json!({"role": role, "content": content, "tool_calls": tool_calls}))
    } else if !content.is_null() {
        Some(json!({"role": role, "content": content}))
    } else {
        None
    }
}

/// Gemini's schema (an OpenAPI subset, types in capitals) as JSON Schema: type names in lower
/// case, everything else as it is.
pub fn json_schema(v: &Value) -> Value {
    match v {
        Value::Object(o) => Value::Object(
            o.iter()
                .map(|(k, v)| match (k.as_str(), v) {
                    ("type", Value::String(t)) => (k.clone(), Value::String(t.to_lowercase())),
                    _ => (k.clone(), json_schema(v)),
                })
                .collect(),
        ),
        Value::Array(a) => Value::Array(a.iter().map(json_schema).collect()),
        other => other.clone(),
    }
}

fn chat_tools(tools: &Value, texts: &mut String) -> Result<Vec<Value>, GatewayError> {
    let Value::Array(tools) = tools else {
        return Err(field_err("tools", "must be an array"));
    };
    let mut out = Vec::new();
    for (i, t) in tools.iter().enumerate() {
        let Some(t) = t.as_object() else {
            return Err(field_err(&format!("tools[{i}]"), "must be an object"));
        };
        for (k, v) in t {
            if k != "functionDeclarations" {
                return Err(field_err(
                    &format!("tools[{i}].{k}"),
                    "is not supported: only function declarations (Google's hosted tools run at Google)",
                ));
            }
            let Value::Array(decls) = v else {
                return Err(field_err(
                    &format!("tools[{i}].functionDeclarations"),
                    "must be an array",
                ));
            };
            for (j, d) in decls.iter().enumerate() {
                let at = format!("tools[{i}].functionDeclarations[{j}]");
                let name = d
                    .get("name")
                    .and_then(Value::as_str)
                    .filter(|n| !n.is_empty());
                let name = name.ok_or_else(|| {
                    field_err(&format!("{at}.name"), "must be a non-empty string")
                })?;
                let mut f = Map::new();
                f.insert("name".into(), name.into());
                if let Some(desc) = d.get("description").and_then(Value::as_str) {
                    texts.push_str(desc);
                    f.insert("description".into(), desc.into());
                }
                let params = match (d.get("parametersJsonSchema"), d.get("parameters")) {
                    (Some(p), _) if p.is_object() => Some(p.clone()),
                    (_, Some(p)) if p.is_object() => Some(json_schema(p)),
                    _ => None,
                };
                if let Some(p) = params {
                    texts.push_str(&p.to_string());
                    f.insert("parameters".into(), p);
                }
                out.push(json!({"type": "function", "function": f}));
            }
        }
    }
    Ok(out)
}

fn tool_choice(tc: &Value) -> Result<Option<Value>, GatewayError> {
    let Some(fc) = tc.get("functionCallingConfig") else {
        return Ok(None);
    };
    let allowed: Vec<&str> = fc
        .get("allowedFunctionNames")
        .and_then(Value::as_array)
        .map(|a| a.iter().filter_map(Value::as_str).collect())
        .unwrap_or_default();
    match fc.get("mode").and_then(Value::as_str) {
        None | Some("AUTO" | "MODE_UNSPECIFIED" | "VALIDATED") => Ok(Some(json!("auto"))),
        Some("NONE") => Ok(Some(json!("none"))),
        Some("ANY") => match allowed.as_slice() {
            [one] => Ok(Some(json!({"type": "function", "function": {"name": one}}))),
            _ => Ok(Some(json!("required"))),
        },
        Some(_) => Err(field_err(
            "toolConfig.functionCallingConfig.mode",
            "must be AUTO, ANY or NONE",
        )),
    }
}

fn generation_config(g: &Value, chat: &mut Map<String, Value>) -> Result<(), GatewayError> {
    let Some(g) = g.as_object() else {
        return Err(field_err("generationConfig", "must be an object"));
    };
    let number = |k: &str, lo: f64, hi: f64| -> Result<Option<Value>, GatewayError> {
        match g.get(k).filter(|v| !v.is_null()) {
            None => Ok(None),
            Some(v) if v.as_f64().is_some_and(|x| (lo..=hi).contains(&x)) => Ok(Some(v.clone())),
            Some(_) => Err(field_err(
                &format!("generationConfig.{k}"),
                format!("must be a number from {lo} to {hi}"),
            )),
        }
    };
    if let Some(t) = number("temperature", 0.0, 2.0)? {
        chat.insert("temperature".into(), t);
    }
    if let Some(p) = number("topP", 0.0, 1.0)? {
        chat.insert("top_p".into(), p);
    }
    if let Some(v) = g.get("maxOutputTokens").filter(|v| !v.is_null()) {
        match v.as_u64() {
            Some(n) if n >= 1 => chat.insert("max_tokens".into(), n.into()),
            _ => {
                return Err(field_err(
                    "generationConfig.maxOutputTokens",
                    "must be a positive integer",
                ))
            }
        };
    }
    if let Some(v) = g.get("candidateCount").filter(|v| !v.is_null()) {
        match v.as_u64() {
            Some(n) if (1..=8).contains(&n) => chat.insert("n".into(), n.into()),
            _ => {
                return Err(field_err(
                    "generationConfig.candidateCount",
                    "must be an integer from 1 to 8",
                ))
            }
        };
    }
    if let Some(s) = g.get("stopSequences").filter(|v| !v.is_null()) {
        if !s.as_array().is_some_and(|a| a.iter().all(Value::is_string)) {
            return Err(field_err(
                "generationConfig.stopSequences",
                "must be an array of strings",
            ));
        }
        chat.insert("stop".into(), s.clone());
    }
    let schema = match (g.get("responseJsonSchema"), g.get("responseSchema")) {
        (Some(s), _) if s.is_object() => Some(s.clone()),
        (_, Some(s)) if s.is_object() => Some(json_schema(s)),
        _ => None,
    };
    match (g.get("responseMimeType").and_then(Value::as_str), schema) {
        (None | Some("text/plain"), None) => {}
        (Some("application/json"), None) => {
            chat.insert("response_format".into(), json!({"type": "json_object"}));
        }
        (Some("application/json"), Some(schema)) => {
            chat.insert(
                "response_format".into(),
                json!({"type": "json_schema", "json_schema": {"name": "response", "schema": schema}}),
            );
        }
        (_, Some(_)) => {
            return Err(field_err(
                "generationConfig.responseSchema",
                "needs responseMimeType \"application/json\"",
            ))
        }
        (Some(other), None) => {
            return Err(field_err(
                "generationConfig.responseMimeType",
                format!("`{other}` is not supported: text/plain or application/json"),
            ))
        }
    }
    Ok(())
}
