//! A chat completion (the internal reply shape every provider kind is read into) written as a
//! Gemini `GenerateContentResponse`, and Gemini's error shape.

use serde_json::{json, Value};

use crate::{GatewayError, Usage};

/// Gemini's `finishReason` for a chat `finish_reason`.
pub fn finish_reason(chat: &str) -> &'static str {
    match chat {
        "length" => "MAX_TOKENS",
        "content_filter" => "SAFETY",
        _ => "STOP",
    }
}

/// A function call's arguments as the object Gemini carries (a chat provider's are JSON text).
pub fn args_object(arguments: &str) -> Value {
    match serde_json::from_str::<Value>(arguments) {
        Ok(v @ Value::Object(_)) => v,
        _ if arguments.trim().is_empty() => json!({}),
        _ => json!({ "arguments": arguments }),
    }
}

pub fn usage_metadata(u: Usage) -> Value {
    let mut m = json!({
        "promptTokenCount": u.prompt_tokens,
        "candidatesTokenCount": u.completion_tokens,
        "totalTokenCount": u.total(),
    });
    if u.cache_read_tokens > 0 {
        m["cachedContentTokenCount"] = u.cache_read_tokens.into();
    }
    m
}

/// A whole chat completion as a Gemini response; `model` is the model used.
pub fn completion_to_gemini(completion: &[u8], model: &str, id: &str) -> Result<Value, String> {
    let c: Value =
        serde_json::from_slice(completion).map_err(|e| format!("reply is not JSON: {e}"))?;
    let choices = c["choices"].as_array().ok_or("reply has no choices")?;
    let candidates: Vec<Value> = choices
        .iter()
        .enumerate()
        .map(|(i, choice)| {
            let m = &choice["message"];
            let mut parts = Vec::new();
            if let Some(t) = m["content"].as_str().filter(|t| !t.is_empty()) {
                parts.push(json!({ "text": t }));
            }
            for call in m["tool_calls"].as_array().into_iter().flatten() {
                let f = &call["function"];
                parts.push(json!({"functionCall": {
                    "name": f["name"], "args": args_object(f["arguments"].as_str().unwrap_or(""))}}));
            }
            let finish = finish_reason(choice["finish_reason"].as_str().unwrap_or("stop"));
            json!({"content": {"role": "model", "parts": parts}, "finishReason": finish, "index": i})
        })
        .collect();
    let usage = Usage::from_json(&c["usage"]).unwrap_or_default();
    let cached = c
        .pointer("/usage/prompt_tokens_details/cached_tokens")
        .and_then(Value::as_u64)
        .unwrap_or(0);
    let usage = Usage {
        cache_read_tokens: cached,
        ..usage
    };
    Ok(json!({
        "candidates": candidates,
        "usageMetadata": usage_metadata(usage),
        "modelVersion": model,
        "responseId": id,
    }))
}

/// Google's status name for an HTTP status.
pub fn status_name(code: u16) -> &'static str {
    match code {
        400 | 413 => "INVALID_ARGUMENT",
        401 => "UNAUTHENTICATED",
        402 => "FAILED_PRECONDITION",
        403 => "PERMISSION_DENIED",
        404 => "NOT_FOUND",
        405 => "UNIMPLEMENTED",
        409 => "ALREADY_EXISTS",
        429 => "RESOURCE_EXHAUSTED",
        502..=504 | 529 => "UNAVAILABLE",
        _ => "INTERNAL",
    }
}

/// An error in Google's shape: `{"error":{"code","message","status"}}`, the status the
/// gateway's error has.
pub fn error_body(err: &GatewayError) -> (u16, Vec<u8>) {
    let code = err.status();
    let body =
        json!({"error": {"code": code, "message": err.message, "status": status_name(code)}});
    (code, body.to_string().into_bytes())
}
