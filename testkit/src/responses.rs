//! The fake provider's own `/v1/responses`, for a provider configured as serving the Responses
//! API itself (`responses_api = true`): the reply's words as one message, whole or as the typed
//! events, with the usage the other routes report (its own `resp_fake…` id and the upstream
//! model, which the gateway replaces).

use serde_json::{json, Value};
use tokio::io::AsyncWriteExt;
use tokio::net::TcpStream;

use crate::openai::{write_chunk, write_json};

pub(crate) async fn answer(
    sock: &mut TcpStream,
    body: &Value,
    words: &[String],
    prompt_tokens: u64,
    usage: bool,
) -> std::io::Result<()> {
    let text = words.concat();
    let usage = usage.then(|| {
        json!({"input_tokens": prompt_tokens, "input_tokens_details": {"cached_tokens": 0},
               "output_tokens": words.len(), "output_tokens_details": {"reasoning_tokens": 0},
               "total_tokens": prompt_tokens + words.len() as u64})
    });
    let message = |status: &str, text: &str| {
        json!({"id": "msg_fake", "type": "message", "status": status, "role": "assistant",
               "content": [{"type": "output_text", "text": text, "annotations": []}]})
    };
    let response = |status: &str, output: Value, usage: Option<Value>| {
        json!({"id": "resp_fake", "object": "response", "created_at": 1_700_000_000,
               "status": status, "model": body["model"], "output": output,
               "usage": usage.unwrap_or(Value::Null)})
    };
    if !body["stream"].as_bool().unwrap_or(false) {
        let r = response("completed", json!([message("completed", &text)]), usage);
        return write_json(sock, 200, r.to_string().as_bytes()).await;
    }
    sock.write_all(
        b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nTransfer-Encoding: chunked\r\n\r\n",
    )
    .await?;
    let mut seq = 0u64;
    let mut send = |kind: &str, mut data: Value| {
        data["type"] = json!(kind);
        data["sequence_number"] = json!(seq);
        seq += 1;
        format!("event: {kind}\ndata: {data}\n\n").into_bytes()
    };
    let mut events = vec![
        send(
            "response.created",
            json!({"response": response("in_progress", json!([]), None)}),
        ),
        send(
            "response.output_item.added",
            json!({"output_index": 0, "item": message("in_progress", "")}),
        ),
    ];
    for w in words {
        events.push(send(
            "response.output_text.delta",
            json!({"item_id": "msg_fake", "output_index": 0, "content_index": 0, "delta": w}),
        ));
    }
    events.push(send(
        "response.output_text.done",
        json!({"item_id": "msg_fake", "output_index": 0, "content_index": 0, "text": text}),
    ));
    events.push(send(
        "response.output_item.done",
        json!({"output_index": 0, "item": message("completed", &text)}),
    ));
    let done = response("completed", json!([message("completed", &text)]), usage);
    events.push(send("response.completed", json!({"response": done})));
    for e in events {
        write_chunk(sock, &e).await?;
    }
    sock.write_all(b"0\r\n\r\n").await
}
