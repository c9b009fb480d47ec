//! The fake provider's own `/v1/responses`, for a provider configured as serving the Responses
//! API itself (`responses_api = true`): the reply's words as one message, whole or as the typed
//! events, with the usage the other routes report (its own `resp_fake…` id and the upstream
//! model, which the gateway replaces). Offered a hosted `web_search` tool, it runs one search
//! first (a `web_search_call` item before the message), as OpenAI does.

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
    let search = searches(body).then(|| {
        json!({"id": "ws_fake", "type": "web_search_call", "status": "completed",
               "action": {"type": "search", "query": "fake news"}})
    });
    let at = usize::from(search.is_some());
    let output = |text: &str| {
        let mut items: Vec<Value> = search.iter().cloned().collect();
        items.push(message("completed", text));
        Value::Array(items)
    };
    if !body["stream"].as_bool().unwrap_or(false) {
        let r = response("completed", output(&text), usage);
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
    let mut events = vec![send(
        "response.created",
        json!({"response": response("in_progress", json!([]), None)}),
    )];
    if let Some(item) = &search {
        let mut running = item.clone();
        running["status"] = json!("in_progress");
        events.push(send(
            "response.output_item.added",
            json!({"output_index": 0, "item": running}),
        ));
        for step in ["in_progress", "searching", "completed"] {
            events.push(send(
                &format!("response.web_search_call.{step}"),
                json!({"output_index": 0, "item_id": "ws_fake"}),
            ));
        }
        events.push(send(
            "response.output_item.done",
            json!({"output_index": 0, "item": item}),
        ));
    }
    events.push(send(
        "response.output_item.added",
        json!({"output_index": at, "item": message("in_progress", "")}),
    ));
    for w in words {
        events.push(send(
            "response.output_text.delta",
            json!({"item_id": "msg_fake", "output_index": at, "content_index": 0, "delta": w}),
        ));
    }
    events.push(send(
        "response.output_text.done",
        json!({"item_id": "msg_fake", "output_index": at, "content_index": 0, "text": text}),
    ));
    events.push(send(
        "response.output_item.done",
        json!({"output_index": at, "item": message("completed", &text)}),
    ));
    let done = response("completed", output(&text), usage);
    events.push(send("response.completed", json!({"response": done})));
    for e in events {
        write_chunk(sock, &e).await?;
    }
    sock.write_all(b"0\r\n\r\n").await
}

/// Whether the request offers a hosted web search and has not had one run yet.
fn searches(body: &Value) -> bool {
    let offered = body["tools"].as_array().is_some_and(|t| {
        t.iter().any(|t| {
            t["type"]
                .as_str()
                .is_some_and(|k| k.starts_with("web_search"))
        })
    });
    let ran = body["input"]
        .as_array()
        .is_some_and(|i| i.iter().any(|i| i["type"] == "web_search_call"));
    offered && !ran
}
