//! A fake MCP tool server (Streamable HTTP, JSON-RPC 2.0): two tools, `echo` and `add`, a
//! session id from `initialize` that later requests must carry, and every way a tool server
//! fails a call ([`ToolMode`]). Replies are JSON, or SSE with [`FakeToolServer::sse`].
//! [`FakeToolServer::stateless`] speaks only the 2026-07-28 protocol: `server/discover`, every
//! request's `_meta` and routing headers checked as that specification says, `initialize`
//! refused (400, -32022). [`FakeToolServer::both`] speaks both eras: a request in the 2026
//! envelope is answered as the stateless one does, any other as the 2025 server does.

use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use serde_json::{json, Value};
use tokio::io::AsyncWriteExt;
use tokio::net::TcpStream;

use crate::mcp_2026::{capabilities, discovered, in_2026_envelope, input_round, stateless_refusal};
use crate::mcp_ask::{ask_the_client, chunk, progress_stream, reply, reply_text};
use crate::openai::read_request;

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ToolMode {
    Ok,
    /// `tools/call` answers HTTP 500.
    Fail,
    /// `tools/call` never answers.
    Hang,
    /// `tools/call` answers a JSON-RPC error.
    RpcError,
    /// `tools/call` answers a result with `isError: true`.
    IsError,
    /// `tools/call` answers a 6 MB result.
    Huge,
    /// `tools/call` answers 200 with a body that is not JSON.
    NotJson,
    /// `tools/call` answers 200 with JSON that is no JSON-RPC response.
    NotRpc,
    /// `tools/call` answers [`VERBATIM_RESULT`], written by hand (spacing, escapes, a number
    /// beyond f64), which a gateway passing results on must deliver byte for byte.
    Verbatim,
    /// `tools/call` answers as an event stream: two `notifications/progress` (with the call's
    /// `progressToken`) and a `notifications/message` before the echo's result.
    Progress,
    /// `tools/call` answers as an event stream asking the client first (`sampling/createMessage`,
    /// then `elicitation/create`, each answer awaited in the call's session 60 s), then a result
    /// whose text is `{"sampled": <answer>, "elicited": <answer>}` (`result`s or `error`s).
    Ask,
    /// (2026-only server) `tools/call` asks for input first: [`crate::mcp_2026::input_round`].
    InputRequired,
}

/// The result text of [`ToolMode::Verbatim`].
pub const VERBATIM_RESULT: &str = r#"{"content": [ {"type":"text","text":"caf\u00e9 \"q\""} ],"zeta":1e400, "alpha" : {"b":1,"a":2}}"#;

struct State {
    mode: Mutex<ToolMode>,
    /// Answer `initialize` with "method not found" and need no session (a plain handler).
    plain: bool,
    sse: bool,
    sessions: Mutex<Vec<String>>,
    calls: AtomicUsize,
    /// The body of the last `tools/call` received, as its bytes came.
    last_call: Mutex<Vec<u8>>,
    /// The `traceparent` header of the last `tools/call` received.
    last_traceparent: Mutex<Option<String>>,
    /// Forget every session (a restart): the next request with one gets 404.
    forget: AtomicBool,
    /// Offer no tools.
    empty: bool,
    /// Offer a third tool, `shout` (a server that changed its list).
    more: AtomicBool,
    /// Speak only 2026-07-28 (stateless).
    stateless: bool,
    /// Speak 2026-07-28 to a request in its envelope, the 2025 era to any other.
    both: bool,
    /// Requests that came in that era's envelope.
    stateless_requests: AtomicUsize,
    /// Answers to the server's requests ([`ToolMode::Ask`]): (session, id, message); next id.
    answers: Mutex<Vec<(String, Value, Value)>>,
    next_ask: AtomicUsize,
}

#[derive(Clone)]
pub struct FakeToolServer {
    pub addr: SocketAddr,
    state: Arc<State>,
}

impl FakeToolServer {
    pub async fn start() -> FakeToolServer {
        Self::start_at("127.0.0.1:0", false, false, false).await
    }

    /// A plain JSON-RPC handler: no `initialize`, no session.
    pub async fn plain() -> FakeToolServer {
        Self::start_at("127.0.0.1:0", true, false, false).await
    }

    /// Replies as SSE streams.
    pub async fn sse() -> FakeToolServer {
        Self::start_at("127.0.0.1:0", false, true, false).await
    }

    /// Offers no tools (fails the live check).
    pub async fn empty() -> FakeToolServer {
        Self::start_at("127.0.0.1:0", false, false, true).await
    }

    /// A plain handler on a given address (the load run's tool server).
    pub async fn plain_on(addr: &str) -> FakeToolServer {
        Self::start_at(addr, true, false, false).await
    }

    /// Speaks only the 2026-07-28 protocol (no `initialize`, no session).
    pub async fn stateless() -> FakeToolServer {
        Self::start_full("127.0.0.1:0", false, false, false, (true, false)).await
    }

    /// Speaks both eras, as the 2.x SDK's servers do; declares `resources` and `logging` too.
    pub async fn both() -> FakeToolServer {
        Self::start_full("127.0.0.1:0", false, false, false, (false, true)).await
    }

    async fn start_at(addr: &str, plain: bool, sse: bool, empty: bool) -> FakeToolServer {
        Self::start_full(addr, plain, sse, empty, (false, false)).await
    }

    async fn start_full(
        addr: &str,
        plain: bool,
        sse: bool,
        empty: bool,
        (stateless, both): (bool, bool),
    ) -> FakeToolServer {
        let state = Arc::new(State {
            mode: Mutex::new(ToolMode::Ok),
            plain,
            sse,
            sessions: Mutex::new(Vec::new()),
            calls: AtomicUsize::new(0),
            last_call: Mutex::new(Vec::new()),
            last_traceparent: Mutex::new(None),
            forget: AtomicBool::new(false),
            empty,
            more: AtomicBool::new(false),
            stateless,
            both,
            stateless_requests: AtomicUsize::new(0),
            answers: Mutex::new(Vec::new()),
            next_ask: AtomicUsize::new(0),
        });
        let addr = crate::accept::serve_fake(addr, state.clone(), serve).await;
        FakeToolServer { addr, state }
    }

    pub fn url(&self) -> String {
        format!("http://{}/mcp", self.addr)
    }

    pub fn set_mode(&self, m: ToolMode) {
        *self.state.mode.lock().unwrap() = m;
    }

    /// `tools/call` requests received.
    pub fn calls(&self) -> usize {
        self.state.calls.load(Ordering::SeqCst)
    }

    /// The body of the last `tools/call` request received, byte for byte.
    pub fn last_call(&self) -> Vec<u8> {
        self.state.last_call.lock().unwrap().clone()
    }

    /// The `traceparent` header of the last `tools/call` request received.
    pub fn last_traceparent(&self) -> Option<String> {
        self.state.last_traceparent.lock().unwrap().clone()
    }

    /// Requests received in the 2026-07-28 envelope (a stateless server's, all it accepts).
    pub fn stateless_requests(&self) -> usize {
        self.state.stateless_requests.load(Ordering::SeqCst)
    }

    /// The responses received to the server's own requests: (session, id, message).
    pub fn answers(&self) -> Vec<(String, Value, Value)> {
        self.state.answers.lock().unwrap().clone()
    }

    /// Starts offering a third tool, `shout`.
    pub fn add_tool(&self) {
        self.state.more.store(true, Ordering::SeqCst);
    }

    /// Forgets its sessions, as a restarted server does.
    pub fn forget_sessions(&self) {
        self.state.forget.store(true, Ordering::SeqCst);
        self.state.sessions.lock().unwrap().clear();
    }
}

fn tools() -> Value {
    json!([
        {"name": "echo", "description": "Echoes its text", "inputSchema": {"type": "object", "properties": {"text": {"type": "string"}}, "required": ["text"]}},
        {"name": "add", "description": "Adds two numbers", "inputSchema": {"type": "object", "properties": {"a": {"type": "number"}, "b": {"type": "number"}}, "required": ["a", "b"]}}
    ])
}

async fn serve(mut sock: TcpStream, st: Arc<State>) -> std::io::Result<()> {
    let mut buf = Vec::new();
    while let Some(req) = read_request(&mut sock, &mut buf).await {
        let msg = req.json();
        let id = msg.get("id").cloned();
        let method = msg["method"].as_str().unwrap_or_default().to_string();
        let Some(id) = id else {
            // A notification.
            sock.write_all(b"HTTP/1.1 202 Accepted\r\nContent-Length: 0\r\n\r\n")
                .await?;
            continue;
        };
        let stateless = st.stateless || st.both && in_2026_envelope(&req, &msg);
        let ok = |mut result: Value| {
            if stateless {
                result["resultType"] = json!("complete");
            }
            json!({"jsonrpc": "2.0", "id": id, "result": result})
        };
        let error = |code: i64, message: &str| json!({"jsonrpc": "2.0", "id": id, "error": {"code": code, "message": message}});
        if stateless {
            if let Some((code, why)) = stateless_refusal(&req, &msg, &method) {
                let mut e = error(code, why);
                if code == -32022 {
                    e["error"]["data"] = json!({"supported": ["2026-07-28"]});
                }
                reply(&mut sock, 400, &e, false, None).await?;
                continue;
            }
            st.stateless_requests.fetch_add(1, Ordering::SeqCst);
            if method == "server/discover" {
                reply(&mut sock, 200, &ok(discovered(st.both)), st.sse, None).await?;
                continue;
            }
        }
        if method == "initialize" {
            if st.plain {
                reply(
                    &mut sock,
                    200,
                    &error(-32601, "method not found"),
                    false,
                    None,
                )
                .await?;
            } else {
                let sid = format!("sess-{}", st.sessions.lock().unwrap().len() + 1);
                st.sessions.lock().unwrap().push(sid.clone());
                st.forget.store(false, Ordering::SeqCst);
                let result = json!({"protocolVersion": "2025-06-18", "capabilities": capabilities(st.both), "serverInfo": {"name": "fake-tools", "version": "1"}});
                reply(&mut sock, 200, &ok(result), st.sse, Some(&sid)).await?;
            }
            continue;
        }
        if !st.plain && !stateless {
            let sid = req.header("mcp-session-id").unwrap_or_default().to_string();
            if !st.sessions.lock().unwrap().contains(&sid) {
                let code = if sid.is_empty() { 400 } else { 404 };
                reply(
                    &mut sock,
                    code,
                    &error(-32000, "no such session"),
                    false,
                    None,
                )
                .await?;
                continue;
            }
        }
        if method.is_empty() && (msg.get("result").is_some() || msg.get("error").is_some()) {
            // An answer to one of our requests, in the session it was sent in.
            let sid = req.header("mcp-session-id").unwrap_or_default().to_string();
            st.answers.lock().unwrap().push((sid, id, msg.clone()));
            sock.write_all(b"HTTP/1.1 202 Accepted\r\nContent-Length: 0\r\n\r\n")
                .await?;
            continue;
        }
        let answer = match method.as_str() {
            "tools/list" if st.empty => ok(json!({"tools": []})),
            "tools/list" => {
                let mut t = tools();
                if st.more.load(Ordering::SeqCst) {
                    if let Some(a) = t.as_array_mut() {
                        a.push(json!({"name": "shout", "inputSchema": {"type": "object"}}));
                    }
                }
                ok(json!({"tools": t}))
            }
            "ping" => ok(json!({})),
            "logging/setLevel" if st.both && !stateless => ok(json!({})),
            "resources/list" => {
                ok(json!({"resources": [{"uri": "fake://readme", "name": "readme"}]}))
            }
            "tools/call" => {
                st.calls.fetch_add(1, Ordering::SeqCst);
                *st.last_call.lock().unwrap() = req.body.clone();
                *st.last_traceparent.lock().unwrap() = req.header("traceparent").map(str::to_owned);
                let mode = st.mode.lock().unwrap().clone();
                let args = &msg["params"]["arguments"];
                match mode {
                    ToolMode::Fail => {
                        reply(&mut sock, 500, &json!({"oops": true}), false, None).await?;
                        continue;
                    }
                    ToolMode::Hang => {
                        tokio::time::sleep(Duration::from_secs(3600)).await;
                        return Ok(());
                    }
                    ToolMode::NotJson => {
                        reply_text(&mut sock, 200, "<html>oops".into(), false, None).await?;
                        continue;
                    }
                    ToolMode::NotRpc => {
                        reply(&mut sock, 200, &json!({"ok": true}), false, None).await?;
                        continue;
                    }
                    ToolMode::Verbatim => {
                        let text =
                            format!(r#"{{"jsonrpc":"2.0","id":{id},"result":{VERBATIM_RESULT}}}"#);
                        reply_text(&mut sock, 200, text, st.sse, None).await?;
                        continue;
                    }
                    ToolMode::Progress => {
                        let token = &msg["params"]["_meta"]["progressToken"];
                        let text = args["text"].as_str().unwrap_or("");
                        let done = ok(json!({"content": [{"type": "text", "text": text}]}));
                        progress_stream(&mut sock, token, &done).await?;
                        continue;
                    }
                    ToolMode::Ask => {
                        let sid = req.header("mcp-session-id").unwrap_or_default().to_string();
                        match ask_the_client(&mut sock, &st.answers, &st.next_ask, &sid).await? {
                            Some(text) => {
                                let done = ok(json!({"content": [{"type": "text", "text": text}]}));
                                chunk(&mut sock, &format!("event: message\ndata: {done}\n\n"))
                                    .await?;
                                chunk(&mut sock, "").await?;
                                continue;
                            }
                            None => return Ok(()),
                        }
                    }
                    ToolMode::InputRequired => input_round(&id, &msg["params"]),
                    ToolMode::RpcError => error(-32602, "bad arguments for this tool"),
                    ToolMode::IsError => ok(
                        json!({"content": [{"type": "text", "text": "it broke"}], "isError": true}),
                    ),
                    ToolMode::Huge => ok(
                        json!({"content": [{"type": "text", "text": "x".repeat(6 * 1024 * 1024)}]}),
                    ),
                    ToolMode::Ok => match msg["params"]["name"].as_str() {
                        Some("echo") => ok(
                            json!({"content": [{"type": "text", "text": args["text"].as_str().unwrap_or("")}]}),
                        ),
                        Some("add") => match (args["a"].as_f64(), args["b"].as_f64()) {
                            (Some(a), Some(b)) => ok(
                                json!({"content": [{"type": "text", "text": (a + b).to_string()}]}),
                            ),
                            _ => ok(
                                json!({"content": [{"type": "text", "text": "a and b must be numbers"}], "isError": true}),
                            ),
                        },
                        _ => error(-32602, "unknown tool"),
                    },
                }
            }
            _ => error(-32601, "method not found"),
        };
        reply(&mut sock, 200, &answer, st.sse, None).await?;
    }
    Ok(())
}
