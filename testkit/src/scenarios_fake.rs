//! The fakes of `benches/scenarios.sh` that the chat fake ([`crate::FakeOpenAi`]) has no mode
//! for: a provider that streams its whole answer as `tool_calls` argument deltas ([`serve_deltas`]:
//! two parallel calls, their arguments cut into many small pieces, some of them inside an
//! escape or a multi-byte character), and one that reads each request and closes the
//! connection without a word ([`serve_closer`], the failover rows). The arguments are a pure
//! function of the call's index ([`tool_arguments`]), so the client checks what it reassembled
//! against the very text the fake sent, whatever proxy stood between them.

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use serde_json::{json, Value};
use tokio::io::AsyncWriteExt;
use tokio::net::TcpStream;

use crate::openai::{read_request, write_chunk, write_json};

/// Parallel tool calls in every answer: a client (or proxy) that keys deltas by anything but
/// their `index` mixes them up.
pub const CALLS: usize = 2;

/// The name of call `call`.
pub fn tool_name(call: usize) -> String {
    format!("lookup_{call}")
}

/// The arguments of call `call`: about 1 KB of JSON with escaped quotes, a backslash, accented
/// letters, an arrow and an emoji (four bytes), so that a cut can fall inside any of them and a
/// proxy that re-encodes or re-chunks the deltas shows it.
pub fn tool_arguments(call: usize) -> String {
    let days: Vec<String> = (0..12)
        .map(|d| {
            format!("{{\"day\":{d},\"note\":\"stop {d}: caf\u{e9} \\\"chez L\u{e9}a\\\" \u{2192} \u{1F600}\"}}")
        })
        .collect();
    format!(
        "{{\"call\":{call},\"city\":\"Paris\",\"path\":\"C:\\\\tmp\",\"days\":[{}]}}",
        days.join(",")
    )
}

/// `s` cut into about `n` pieces, each ending on a character boundary (a delta is a JSON
/// string: it holds whole characters, but may end inside an escape like `\"`).
pub fn pieces(s: &str, n: usize) -> Vec<&str> {
    let step = s.len().div_ceil(n.max(1)).max(1);
    let mut out = Vec::with_capacity(n);
    let mut i = 0;
    while i < s.len() {
        let mut j = (i + step).min(s.len());
        while !s.is_char_boundary(j) {
            j += 1;
        }
        out.push(&s[i..j]);
        i = j;
    }
    out
}

struct Deltas {
    pieces: usize,
    delay: Duration,
}

/// Serves on `listen` until the runtime ends: every chat request is answered with [`CALLS`]
/// tool calls, streamed as about `pieces` argument deltas each (interleaved between the calls),
/// `delay` before each delta; a request with `"stream": false` gets the calls whole.
pub async fn serve_deltas(listen: &str, pieces: usize, delay: Duration) -> SocketAddr {
    let state = Arc::new(Deltas { pieces, delay });
    crate::accept::serve_fake(listen, state, deltas_conn).await
}

/// Serves on `listen` until the runtime ends: reads each request whole, then closes the
/// connection with no answer (an upstream that died under the request).
pub async fn serve_closer(listen: &str) -> SocketAddr {
    crate::accept::serve_fake(listen, Arc::new(()), closer_conn).await
}

async fn closer_conn(mut sock: TcpStream, _: Arc<()>) -> std::io::Result<()> {
    let mut buf = Vec::new();
    let _ = read_request(&mut sock, &mut buf).await;
    // Dropped here: a FIN after the request, no status line.
    Ok(())
}

fn event(v: &Value) -> Vec<u8> {
    format!("data: {v}\n\n").into_bytes()
}

async fn deltas_conn(mut sock: TcpStream, st: Arc<Deltas>) -> std::io::Result<()> {
    let mut buf = Vec::new();
    while let Some(req) = read_request(&mut sock, &mut buf).await {
        if req.method == "GET" {
            // A health check.
            write_json(&mut sock, 200, br#"{"object":"list","data":[]}"#).await?;
            continue;
        }
        let body = req.json();
        let model = body["model"].as_str().unwrap_or("?").to_string();
        let args: Vec<String> = (0..CALLS).map(tool_arguments).collect();
        let cut: Vec<Vec<&str>> = args.iter().map(|a| pieces(a, st.pieces)).collect();
        let completion: usize = cut.iter().map(Vec::len).sum();
        let usage = json!({"prompt_tokens": 11, "completion_tokens": completion, "total_tokens": 11 + completion});
        if !body["stream"].as_bool().unwrap_or(false) {
            let calls: Vec<Value> = (0..CALLS)
                .map(|c| json!({"id": format!("call_{c}"), "type": "function", "function": {"name": tool_name(c), "arguments": args[c]}}))
                .collect();
            let reply = json!({
                "id": "chatcmpl-deltas", "object": "chat.completion", "created": 1_700_000_000, "model": model,
                "choices": [{"index": 0, "finish_reason": "tool_calls", "message": {"role": "assistant", "content": null, "tool_calls": calls}}],
                "usage": usage,
            });
            write_json(&mut sock, 200, reply.to_string().as_bytes()).await?;
            continue;
        }
        let chunk = |delta: Value, finish: Value| {
            event(
                &json!({"id": "chatcmpl-deltas", "object": "chat.completion.chunk", "created": 1_700_000_000,
                "model": model, "choices": [{"index": 0, "delta": delta, "finish_reason": finish}]}),
            )
        };
        sock.write_all(b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nTransfer-Encoding: chunked\r\n\r\n")
            .await?;
        write_chunk(
            &mut sock,
            &chunk(json!({"role": "assistant", "content": null}), Value::Null),
        )
        .await?;
        for c in 0..CALLS {
            let first = json!({"index": c, "id": format!("call_{c}"), "type": "function",
                "function": {"name": tool_name(c), "arguments": ""}});
            write_chunk(
                &mut sock,
                &chunk(json!({"tool_calls": [first]}), Value::Null),
            )
            .await?;
        }
        let longest = cut.iter().map(Vec::len).max().unwrap_or(0);
        for k in 0..longest {
            for (c, p) in cut.iter().enumerate() {
                let Some(p) = p.get(k) else { continue };
                if !st.delay.is_zero() {
                    tokio::time::sleep(st.delay).await;
                }
                let d = json!({"index": c, "function": {"arguments": p}});
                write_chunk(&mut sock, &chunk(json!({"tool_calls": [d]}), Value::Null)).await?;
            }
        }
        write_chunk(&mut sock, &chunk(json!({}), json!("tool_calls"))).await?;
        if body["stream_options"]["include_usage"]
            .as_bool()
            .unwrap_or(false)
        {
            let u = json!({"id": "chatcmpl-deltas", "object": "chat.completion.chunk", "created": 1_700_000_000,
                "model": model, "choices": [], "usage": usage});
            write_chunk(&mut sock, &event(&u)).await?;
        }
        write_chunk(&mut sock, b"data: [DONE]\n\n").await?;
        sock.write_all(b"0\r\n\r\n").await?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn arguments_are_json_and_pieces_join_back() {
        for c in 0..CALLS {
            let a = tool_arguments(c);
            let v: Value = serde_json::from_str(&a).unwrap();
            assert_eq!(v["call"], c);
            let p = pieces(&a, 64);
            assert!(p.len() >= 60, "{}", p.len());
            assert_eq!(p.concat(), a);
        }
    }
}
