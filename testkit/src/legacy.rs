//! The fake provider's `/v1/completions` (legacy text completions): the reply's words as one
//! `text`, or streamed one chunk per word, with the usage the other routes report.

use serde_json::{json, Value};
use tokio::io::AsyncWriteExt;
use tokio::net::TcpStream;

use crate::openai::{write_chunk, write_json};

/// Answers one legacy completion: `words` (already cut at `max_tokens`), `cut` when that cut
/// the reply short, `usage` unless `None` (the provider reported none).
pub(crate) async fn answer(
    sock: &mut TcpStream,
    body: &Value,
    words: &[String],
    cut: bool,
    usage: Option<Value>,
) -> std::io::Result<()> {
    let model = body["model"].as_str().unwrap_or("?");
    let finish = if cut { "length" } else { "stop" };
    let head = |choices: Value| {
        json!({"id": "cmpl-fake", "object": "text_completion", "created": 1_700_000_000,
               "model": model, "choices": choices})
    };
    if !body["stream"].as_bool().unwrap_or(false) {
        let mut reply = head(
            json!([{"text": words.concat(), "index": 0, "logprobs": null, "finish_reason": finish}]),
        );
        if let Some(u) = usage {
            reply["usage"] = u;
        }
        return write_json(sock, 200, reply.to_string().as_bytes()).await;
    }
    sock.write_all(
        b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nTransfer-Encoding: chunked\r\n\r\n",
    )
    .await?;
    let event = |v: Value| format!("data: {v}\n\n").into_bytes();
    for w in words {
        let c = head(json!([{"text": w, "index": 0, "logprobs": null, "finish_reason": null}]));
        write_chunk(sock, &event(c)).await?;
    }
    let last = head(json!([{"text": "", "index": 0, "logprobs": null, "finish_reason": finish}]));
    write_chunk(sock, &event(last)).await?;
    let asked = body["stream_options"]["include_usage"].as_bool() == Some(true);
    if let (true, Some(u)) = (asked, usage) {
        let mut c = head(json!([]));
        c["usage"] = u;
        write_chunk(sock, &event(c)).await?;
    }
    write_chunk(sock, b"data: [DONE]\n\n").await?;
    sock.write_all(b"0\r\n\r\n").await
}
