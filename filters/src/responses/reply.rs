//! The response object: built from the request's [`Frame`] and the output items, for a whole
//! reply from a chat completion (the internal reply shape every provider kind is read into),
//! and by the stream translator as its events go out.

use serde_json::{json, Map, Value};

use super::request::Frame;

/// What the response object needs besides the frame.
#[derive(Debug, Clone)]
pub struct Head {
    /// `resp_…`
    pub id: String,
    pub created_at: u64,
    /// The model that served the request.
    pub model: String,
}

/// Token counts in the Responses shape.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Tokens {
    pub input: u64,
    pub output: u64,
    pub cached: u64,
    pub reasoning: u64,
}

impl Tokens {
    pub fn to_json(self) -> Value {
        json!({
            "input_tokens": self.input,
            "input_tokens_details": {"cached_tokens": self.cached},
            "output_tokens": self.output,
            "output_tokens_details": {"reasoning_tokens": self.reasoning},
            "total_tokens": self.input.saturating_add(self.output),
        })
    }

    /// A chat completion's `usage` object.
    pub fn from_chat(u: &Value) -> Option<Tokens> {
        Some(Tokens {
            input: u.get("prompt_tokens")?.as_u64()?,
            output: u.get("completion_tokens")?.as_u64()?,
            cached: u
                .pointer("/prompt_tokens_details/cached_tokens")
                .and_then(Value::as_u64)
                .unwrap_or(0),
            reasoning: u
                .pointer("/completion_tokens_details/reasoning_tokens")
                .and_then(Value::as_u64)
                .unwrap_or(0),
        })
    }
}

/// How a response ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Status {
    InProgress,
    Completed,
    /// Cut by the output cap (`max_output_tokens`) or a content filter.
    Incomplete(&'static str),
    Failed,
}

impl Status {
    /// From a chat completion's `finish_reason`.
    pub fn from_finish(reason: Option<&str>) -> Status {
        match reason {
            Some("length") => Status::Incomplete("max_output_tokens"),
            Some("content_filter") => Status::Incomplete("content_filter"),
            _ => Status::Completed,
        }
    }

    pub fn as_str(self) -> &'static str {
        match self {
            Status::InProgress => "in_progress",
            Status::Completed => "completed",
            Status::Incomplete(_) => "incomplete",
            Status::Failed => "failed",
        }
    }
}

impl Frame {
    /// The response object, members in the order OpenAI writes them.
    pub fn response(
        &self,
        head: &Head,
        status: Status,
        output: Vec<Value>,
        usage: Option<Tokens>,
        error: Option<Value>,
    ) -> Value {
        let mut o = Map::new();
        o.insert("id".into(), head.id.clone().into());
        o.insert("object".into(), "response".into());
        o.insert("created_at".into(), head.created_at.into());
        o.insert("status".into(), status.as_str().into());
        o.insert("error".into(), error.unwrap_or(Value::Null));
        o.insert(
            "incomplete_details".into(),
            match status {
                Status::Incomplete(reason) => json!({ "reason": reason }),
                _ => Value::Null,
            },
        );
        o.insert("instructions".into(), self.instructions.clone());
        o.insert("max_output_tokens".into(), self.max_output_tokens.clone());
        o.insert("model".into(), head.model.clone().into());
        o.insert("output".into(), Value::Array(output));
        o.insert(
            "parallel_tool_calls".into(),
            self.parallel_tool_calls.into(),
        );
        o.insert(
            "previous_response_id".into(),
            self.previous_response_id.clone(),
        );
        o.insert("reasoning".into(), self.reasoning.clone());
        o.insert("store".into(), self.store.into());
        o.insert("temperature".into(), self.temperature.clone());
        o.insert("text".into(), self.text.clone());
        o.insert("tool_choice".into(), self.tool_choice.clone());
        o.insert("tools".into(), self.tools.clone());
        o.insert("top_p".into(), self.top_p.clone());
        o.insert("truncation".into(), self.truncation.clone());
        o.insert("usage".into(), usage.map_or(Value::Null, Tokens::to_json));
        o.insert("user".into(), self.user.clone());
        o.insert("metadata".into(), self.metadata.clone());
        Value::Object(o)
    }
}

/// Output item ids: derived from the response's, so a stream and a stored copy agree.
pub fn item_id(prefix: &str, head: &Head, index: usize) -> String {
    let stem = head.id.strip_prefix("resp_").unwrap_or(&head.id);
    format!("{prefix}_{stem}_{index}")
}

pub fn message_item(id: String, status: &str, parts: Vec<Value>) -> Value {
    json!({"id": id, "type": "message", "status": status, "role": "assistant", "content": parts})
}

pub fn text_part(text: &str) -> Value {
    json!({"type": "output_text", "text": text, "annotations": [], "logprobs": []})
}

/// A function call item; `chat_name` is the chat tool's name, read back through the frame into
/// the function's name and, for a `namespace` tool's function, its namespace.
pub fn call_item(
    frame: &Frame,
    id: String,
    status: &str,
    call_id: &str,
    chat_name: &str,
    arguments: &str,
) -> Value {
    let (name, namespace) = frame.call_name(chat_name);
    let mut item = json!({
        "id": id, "type": "function_call", "status": status,
        "arguments": arguments, "call_id": call_id, "name": name,
    });
    if let Some(ns) = namespace {
        item["namespace"] = ns.into();
    }
    item
}

pub fn reasoning_item(id: String, summary: &str) -> Value {
    json!({"id": id, "type": "reasoning", "summary": [{"type": "summary_text", "text": summary}]})
}

/// A whole chat completion (usage included) as the response object.
pub fn completion_to_response(
    completion: &[u8],
    frame: &Frame,
    head: &Head,
) -> Result<Value, String> {
    let c: Value =
        serde_json::from_slice(completion).map_err(|e| format!("reply is not JSON: {e}"))?;
    let choice = c.pointer("/choices/0").ok_or("reply has no choices[0]")?;
    let message = choice.get("message").ok_or("reply has no message")?;
    let mut output = Vec::new();
    let reasoning = message
        .get("reasoning_content")
        .or_else(|| message.get("reasoning"))
        .and_then(Value::as_str)
        .filter(|s| !s.is_empty());
    if let Some(r) = reasoning {
        output.push(reasoning_item(item_id("rs", head, output.len()), r));
    }
    let text = message.get("content").and_then(Value::as_str).unwrap_or("");
    let refusal = message.get("refusal").and_then(Value::as_str);
    if !text.is_empty() || refusal.is_some() {
        let part = match refusal {
            Some(r) if text.is_empty() => json!({"type": "refusal", "refusal": r}),
            _ => text_part(text),
        };
        output.push(message_item(
            item_id("msg", head, output.len()),
            "completed",
            vec![part],
        ));
    }
    if let Some(calls) = message.get("tool_calls").and_then(Value::as_array) {
        for call in calls {
            let f = &call["function"];
            output.push(call_item(
                frame,
                item_id("fc", head, output.len()),
                "completed",
                call["id"].as_str().unwrap_or(""),
                f["name"].as_str().unwrap_or(""),
                f["arguments"].as_str().unwrap_or(""),
            ));
        }
    }
    let status = Status::from_finish(choice.get("finish_reason").and_then(Value::as_str));
    let usage = c.get("usage").and_then(Tokens::from_chat);
    Ok(frame.response(head, status, output, usage, None))
}
