//! The built-in demo provider (`kind = "demo"`): `POST /_demo/v1/chat/completions`, served by
//! the gateway itself to the gateway itself (loopback callers only; anyone else gets 404), so
//! that a fresh `./dev run` can be tried end to end with no provider key and no network. Its
//! replies are deterministic, streamed word by word when asked, with usage reported, and
//! everything before and after it (holds, limits, metering, failover) is the real path.

use std::time::Duration;

use crate::request::Session;
use bytes::Bytes;
use serde_json::{json, Value};
use tollgate_filters::{ErrorKind, GatewayError};

use crate::request::ctx::RequestCtx;
use crate::request::{body, respond};
use crate::runtime::Shared;

/// Pause between streamed words: slow enough to watch, fast enough for tests.
const WORD_EVERY: Duration = Duration::from_millis(15);

pub async fn chat(
    shared: &Shared,
    session: &mut Session,
    ctx: &mut RequestCtx,
) -> Result<(), GatewayError> {
    let loopback = session
        .client_addr()
        .and_then(|a| a.as_inet())
        .is_some_and(|a| a.ip().is_loopback());
    if !loopback {
        return Err(GatewayError::new(
            ErrorKind::NotFound,
            "no route for this path",
        ));
    }
    let rt = shared.runtime.load_full();
    let raw = body::read_within(session, &rt.config).await?;
    let req: Value = serde_json::from_slice(&raw)
        .map_err(|e| GatewayError::invalid(format!("body: malformed JSON ({e})")))?;
    let model = req["model"].as_str().unwrap_or("demo").to_owned();
    let max = req["max_tokens"]
        .as_u64()
        .or_else(|| req["max_completion_tokens"].as_u64())
        .unwrap_or(256) as usize;
    let (words, prompt_tokens) = reply_words(&req, max);
    let usage = json!({"prompt_tokens": prompt_tokens, "completion_tokens": words.len(),
                       "total_tokens": prompt_tokens + words.len()});
    let id = format!("chatcmpl-demo-{}", ctx.request_id);
    let created = crate::clock::now_secs();
    let finish = if words.len() >= max { "length" } else { "stop" };
    if !req["stream"].as_bool().unwrap_or(false) {
        let v = json!({"id": id, "object": "chat.completion", "created": created, "model": model,
            "choices": [{"index": 0, "message": {"role": "assistant", "content": words.concat().trim_end()},
                         "finish_reason": finish}],
            "usage": usage});
        respond::json(session, ctx, 200, &v, &[]).await;
        return Ok(());
    }
    let Some(mut h) = respond::header(200, ctx, &[]) else {
        return Ok(());
    };
    if h.insert_header("Content-Type", "text/event-stream")
        .is_err()
        || session.write_response_header(Box::new(h)).await.is_err()
    {
        return Ok(());
    }
    ctx.status = 200;
    let chunk = |delta: Value, finish: Value| {
        let c = json!({"id": id, "object": "chat.completion.chunk", "created": created, "model": model,
                       "choices": [{"index": 0, "delta": delta, "finish_reason": finish}]});
        Bytes::from(format!("data: {c}\n\n"))
    };
    let mut out = vec![chunk(
        json!({"role": "assistant", "content": ""}),
        Value::Null,
    )];
    for w in &words {
        out.push(chunk(json!({"content": w}), Value::Null));
    }
    out.push(chunk(json!({}), finish.into()));
    if req["stream_options"]["include_usage"].as_bool() == Some(true) {
        let u = json!({"id": id, "object": "chat.completion.chunk", "created": created, "model": model,
                       "choices": [], "usage": usage});
        out.push(Bytes::from(format!("data: {u}\n\n")));
    }
    out.push(Bytes::from_static(b"data: [DONE]\n\n"));
    let last = out.len() - 1;
    for (i, b) in out.into_iter().enumerate() {
        if session.write_response_body(b, i == last).await.is_err() {
            return Ok(());
        }
        if i > 0 && i < last {
            tokio::time::sleep(WORD_EVERY).await;
        }
    }
    Ok(())
}

/// The reply's words (each with its trailing space) and the prompt's size in words.
fn reply_words(req: &Value, max: usize) -> (Vec<String>, usize) {
    let messages = req["messages"].as_array().cloned().unwrap_or_default();
    let text_of = |m: &Value| -> String {
        match &m["content"] {
            Value::String(s) => s.clone(),
            Value::Array(parts) => parts
                .iter()
                .filter_map(|p| p["text"].as_str())
                .collect::<Vec<_>>()
                .join(" "),
            _ => String::new(),
        }
    };
    let prompt_tokens: usize = messages
        .iter()
        .map(|m| text_of(m).split_whitespace().count() + 4)
        .sum();
    let asked = messages
        .iter()
        .rev()
        .find(|m| m["role"] == "user")
        .map(text_of)
        .unwrap_or_default();
    let quoted: Vec<&str> = asked.split_whitespace().take(12).collect();
    let text = format!(
        "This is Tollgate's demo model: a canned reply, no provider key or network needed. You said: \"{}\". Set a provider's key and ask a real model for a real answer.",
        quoted.join(" ")
    );
    let words = text
        .split_whitespace()
        .take(max.max(1))
        .map(|w| format!("{w} "))
        .collect();
    (words, prompt_tokens)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn replies_are_deterministic_quote_the_question_and_respect_max_tokens() {
        let req = json!({"messages": [{"role": "system", "content": "be brief"},
                                      {"role": "user", "content": [{"type": "text", "text": "what is a gateway"}]}]});
        let (a, p) = reply_words(&req, 256);
        assert_eq!(a, reply_words(&req, 256).0);
        assert!(a.concat().contains("\"what is a gateway\""));
        assert_eq!(p, 2 + 4 + 4 + 4);
        assert_eq!(reply_words(&req, 3).0.len(), 3);
    }
}
