//! Whole (non-streaming) replies: an Anthropic Message for an OpenAI client
//! ([`message_to_completion`]) or for an Anthropic client ([`rewrite_message`]), and an
//! OpenAI chat.completion for an Anthropic client ([`completion_to_message`]).

use serde_json::{json, Map, Value};

use super::{
    finish_to_stop_reason, openai_usage_json, stop_reason_to_finish, usage_from_anthropic,
};
use crate::Usage;

/// An Anthropic Message as an OpenAI `chat.completion` named `model`. Thinking and server-tool
/// blocks are left out: an OpenAI client has no place for them.
pub fn message_to_completion(
    raw: &[u8],
    model: &str,
    created: u64,
) -> Result<(Vec<u8>, Usage), String> {
    let Ok(Value::Object(msg)) = serde_json::from_slice::<Value>(raw) else {
        return Err("upstream reply is not a JSON object".into());
    };
    if msg.get("type").and_then(Value::as_str) != Some("message") {
        return Err("upstream reply is not a message".into());
    }
    let Some(Value::Array(content)) = msg.get("content") else {
        return Err("upstream message has no content array".into());
    };
    let usage = msg
        .get("usage")
        .and_then(usage_from_anthropic)
        .ok_or("upstream message has no usage")?;

    let mut text = String::new();
    let mut calls = Vec::new();
    for b in content {
        match b.get("type").and_then(Value::as_str) {
            Some("text") => {
                text.push_str(b.get("text").and_then(Value::as_str).unwrap_or_default())
            }
            Some("tool_use") => calls.push(json!({
                "id": b.get("id").cloned().unwrap_or_default(),
                "type": "function",
                "function": {
                    "name": b.get("name").cloned().unwrap_or_default(),
                    "arguments": b.get("input").unwrap_or(&json!({})).to_string(),
                },
            })),
            _ => {}
        }
    }
    let has_text = !text.is_empty();
    let mut message = json!({
        "role": "assistant",
        "content": if has_text { Value::String(text) } else { Value::Null },
    });
    if !calls.is_empty() {
        message["tool_calls"] = Value::Array(calls);
    }
    let stop = msg
        .get("stop_reason")
        .and_then(Value::as_str)
        .unwrap_or("end_turn");
    let id = msg.get("id").and_then(Value::as_str).unwrap_or("tollgate");
    let out = json!({
        "id": format!("chatcmpl-{id}"),
        "object": "chat.completion",
        "created": created,
        "model": model,
        "choices": [{
            "index": 0,
            "message": message,
            "logprobs": null,
            "finish_reason": stop_reason_to_finish(stop),
        }],
        "usage": openai_usage_json(usage),
    });
    Ok((serde_json::to_vec(&out).map_err(|e| e.to_string())?, usage))
}

/// An Anthropic Message for an Anthropic client: `model` replaced by ours, every other member
/// kept exactly as the upstream wrote it.
pub fn rewrite_message(raw: &[u8], model: &str) -> Result<(Vec<u8>, Usage), String> {
    let text = std::str::from_utf8(raw).map_err(|_| "upstream reply is not UTF-8".to_owned())?;
    let usage_text = super::member_text(text, "usage").ok_or("upstream reply has no usage")?;
    let usage = serde_json::from_str::<Value>(&usage_text)
        .ok()
        .as_ref()
        .and_then(usage_from_anthropic)
        .ok_or("upstream reply has no usable usage")?;
    let model_json = Value::String(model.to_owned()).to_string();
    let out = super::with_member(text, "model", &model_json)
        .ok_or("upstream reply is not a JSON object")?;
    Ok((out.into_bytes(), usage))
}

/// An OpenAI chat.completion (choice 0) as an Anthropic Message named `model`. When the reply
/// has no usable usage, `count` gets its text (content and tool-call arguments) and returns
/// the usage to report; the bool says it was counted.
pub fn completion_to_message(
    raw: &[u8],
    model: &str,
    count: impl FnOnce(&str) -> Usage,
) -> Result<(Vec<u8>, Usage, bool), String> {
    let Ok(Value::Object(c)) = serde_json::from_slice::<Value>(raw) else {
        return Err("upstream reply is not a JSON object".into());
    };
    let Some(Value::Array(choices)) = c.get("choices") else {
        return Err("upstream reply has no choices array".into());
    };
    let choice = choices.first().ok_or("upstream reply has no choices")?;
    let message = choice.get("message").unwrap_or(&Value::Null);

    let mut counted_text = String::new();
    let mut content = Vec::new();
    let text = match message.get("content") {
        Some(Value::String(s)) => s.clone(),
        // Some providers send content parts even in replies.
        Some(Value::Array(parts)) => parts
            .iter()
            .filter_map(|p| p.get("text").and_then(Value::as_str))
            .collect(),
        _ => String::new(),
    };
    if !text.is_empty() {
        counted_text.push_str(&text);
        content.push(json!({ "type": "text", "text": text }));
    }
    let calls = message.get("tool_calls").and_then(Value::as_array);
    for (k, call) in calls.into_iter().flatten().enumerate() {
        let f = call.get("function").unwrap_or(&Value::Null);
        let args = f
            .get("arguments")
            .and_then(Value::as_str)
            .unwrap_or_default();
        counted_text.push_str(args);
        let input = match serde_json::from_str::<Value>(args) {
            Ok(v @ Value::Object(_)) => v,
            _ if args.trim().is_empty() => json!({}),
            // Anthropic's input must be an object: keep what the model wrote, visibly.
            _ => json!({ "_raw": args }),
        };
        let id = match call.get("id").and_then(Value::as_str) {
            Some(id) => id.to_owned(),
            None => format!("toolu_{k}"),
        };
        content.push(json!({
            "type": "tool_use",
            "id": id,
            "name": f.get("name").cloned().unwrap_or_default(),
            "input": input,
        }));
    }

    let (usage, counted) = match c.get("usage").and_then(Usage::from_json) {
        Some(u) => (u, false),
        None => (count(&counted_text), true),
    };
    let finish = choice
        .get("finish_reason")
        .and_then(Value::as_str)
        .unwrap_or("stop");
    let id = c.get("id").and_then(Value::as_str).unwrap_or("tollgate");
    let mut out = Map::new();
    out.insert("id".into(), format!("msg_{id}").into());
    out.insert("type".into(), "message".into());
    out.insert("role".into(), "assistant".into());
    out.insert("model".into(), model.into());
    // Servers that answer tool calls with "stop" (vLLM, Ollama…) would have an agent loop
    // end without running the tools: a reply that calls tools stopped for them.
    let calls_tools = content.iter().any(|b| b["type"] == "tool_use");
    out.insert("content".into(), Value::Array(content));
    let stop = match finish_to_stop_reason(finish) {
        "end_turn" if calls_tools => "tool_use",
        s => s,
    };
    out.insert("stop_reason".into(), stop.into());
    out.insert("stop_sequence".into(), Value::Null);
    out.insert(
        "usage".into(),
        json!({ "input_tokens": usage.prompt_tokens, "output_tokens": usage.completion_tokens }),
    );
    let bytes = serde_json::to_vec(&Value::Object(out)).map_err(|e| e.to_string())?;
    Ok((bytes, usage, counted))
}
