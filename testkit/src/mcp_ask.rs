//! The fake tool server's calls answered as event streams with more than the response on them:
//! [`ToolMode::Progress`](crate::ToolMode::Progress) (notifications first) and
//! [`ToolMode::Ask`](crate::ToolMode::Ask) (during a call, the server asks the client,
//! sampling then elicitation, on the call's event stream and waits for each answer to come in
//! the call's session, as the SDKs' servers do); and how the fake writes a reply, as JSON or
//! as a one-event stream.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Mutex;
use std::time::Duration;

use serde_json::{json, Value};
use tokio::io::AsyncWriteExt;
use tokio::net::TcpStream;

/// One chunk of a chunked body (the empty one ends it).
pub(crate) async fn chunk(sock: &mut TcpStream, text: &str) -> std::io::Result<()> {
    let c = format!("{:x}\r\n{text}\r\n", text.len());
    sock.write_all(c.as_bytes()).await
}

/// [`ToolMode::Ask`]: opens the call's event stream, asks the client to sample and to elicit,
/// each answered in session `sid`; the result's text, or `None` when an answer did not come.
pub(crate) async fn ask_the_client(
    sock: &mut TcpStream,
    answers: &Mutex<Vec<(String, Value, Value)>>,
    next_ask: &AtomicUsize,
    sid: &str,
) -> std::io::Result<Option<String>> {
    sock.write_all(
        b"HTTP/1.1 200 X\r\nContent-Type: text/event-stream\r\nTransfer-Encoding: chunked\r\n\r\n",
    )
    .await?;
    let asks = [
        (
            "sampling/createMessage",
            json!({"messages": [{"role": "user", "content": {"type": "text", "text": "Say hi"}}], "maxTokens": 10}),
        ),
        (
            "elicitation/create",
            json!({"message": "Your name?", "requestedSchema": {"type": "object", "properties": {"name": {"type": "string"}}}}),
        ),
    ];
    let mut got = Vec::new();
    for (method, params) in asks {
        let id = json!(next_ask.fetch_add(1, Ordering::SeqCst));
        let ask = json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params});
        chunk(sock, &format!("event: message\ndata: {ask}\n\n")).await?;
        let start = std::time::Instant::now();
        let answer = loop {
            let found = answers
                .lock()
                .unwrap()
                .iter()
                .find(|(s, i, _)| s == sid && *i == id)
                .map(|(_, _, m)| m.clone());
            if let Some(m) = found {
                break m;
            }
            if start.elapsed() > Duration::from_secs(60) {
                return Ok(None);
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        };
        got.push(answer.get("result").or(answer.get("error")).cloned());
    }
    Ok(Some(
        json!({"sampled": got[0], "elicited": got[1]}).to_string(),
    ))
}

/// [`ToolMode::Progress`](crate::ToolMode::Progress): two progress notifications (with the
/// call's `token`) around a log message, then the response `done`, in one event stream.
pub(crate) async fn progress_stream(
    sock: &mut TcpStream,
    token: &Value,
    done: &Value,
) -> std::io::Result<()> {
    let note = |method: &str, params: Value| {
        format!(
            "event: message\ndata: {}\n\n",
            json!({"jsonrpc": "2.0", "method": method, "params": params})
        )
    };
    let payload = [
        note(
            "notifications/progress",
            json!({"progressToken": token, "progress": 1, "total": 2}),
        ),
        note(
            "notifications/message",
            json!({"level": "info", "data": "halfway"}),
        ),
        note(
            "notifications/progress",
            json!({"progressToken": token, "progress": 2, "total": 2}),
        ),
        format!("event: message\ndata: {done}\n\n"),
    ]
    .concat();
    let head = format!(
        "HTTP/1.1 200 X\r\nContent-Type: text/event-stream\r\nContent-Length: {}\r\n\r\n",
        payload.len()
    );
    sock.write_all(format!("{head}{payload}").as_bytes()).await
}

pub(crate) async fn reply(
    sock: &mut TcpStream,
    status: u16,
    body: &Value,
    sse: bool,
    session: Option<&str>,
) -> std::io::Result<()> {
    reply_text(sock, status, body.to_string(), sse, session).await
}

pub(crate) async fn reply_text(
    sock: &mut TcpStream,
    status: u16,
    text: String,
    sse: bool,
    session: Option<&str>,
) -> std::io::Result<()> {
    let (ctype, payload) = if sse {
        (
            "text/event-stream",
            format!("event: message\ndata: {text}\n\n"),
        )
    } else {
        ("application/json", text)
    };
    let sid = session
        .map(|s| format!("Mcp-Session-Id: {s}\r\n"))
        .unwrap_or_default();
    // Head and body in one write, as HTTP servers send a small reply (two writes cost every
    // client a second read and wakeup, and the benchmarks' proxies two).
    let reply = format!(
        "HTTP/1.1 {status} X\r\nContent-Type: {ctype}\r\n{sid}Content-Length: {}\r\n\r\n{payload}",
        payload.len()
    );
    sock.write_all(reply.as_bytes()).await
}
