//! A fake OpenAI-compatible provider over plain TCP, so every failure a real provider can show
//! (refusals, 5xx, 429, hangs, slow streams, error events, death mid-stream, no usage) is one
//! `set_mode` away. The tests start it with [`FakeOpenAi::start`]; the benchmarks build a
//! quiet, fixed-size one with [`FakeOpenAi::builder`].

use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use serde_json::{json, Value};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

#[derive(Debug, Clone, PartialEq)]
pub enum Mode {
    /// Answer normally (JSON or SSE as asked).
    Ok,
    /// Answer with this status and an error body.
    Status(u16),
    /// Accept the request and never answer.
    Hang,
    /// Stream normally but wait this long before every chunk.
    Slow(Duration),
    /// Stream an error object as the first event.
    ErrorFirst,
    /// Stream this many chunks, then drop the connection.
    DieAfter(usize),
    /// Stream this many chunks, then go silent.
    StallAfter(usize),
    /// Stream this many chunks, then an error event (and close).
    ErrorAfter(usize),
    /// Stream as [`Mode::Slow`], then drop the connection after this many chunks (the load
    /// run's streams cut at half their length).
    SlowThenDie(Duration, usize),
    /// Send a 200 SSE head, then nothing.
    SilentStream,
    /// Never report usage (JSON or stream).
    NoUsage,
    /// Answer 200 with a body that is not JSON.
    Garbage,
    /// Answer normally but report these token counts (prompt, completion), however absurd.
    Usage(u64, u64),
    /// Answer normally, reporting this many more prompt tokens read from the prompt cache
    /// (`prompt_tokens_details.cached_tokens`) and this many more completion tokens of
    /// reasoning (`completion_tokens_details.reasoning_tokens`), as OpenAI's models do.
    Cached(u64, u64),
    /// Stream this many content chunks of 16 KiB each, as fast as the gateway takes them.
    Huge(usize),
    /// Stream normally, but wait this long before the first content chunk (a known time to
    /// first token).
    FirstAfter(Duration),
    /// Answer normally, with a prompt cache of this fake's own ([`crate::prefix_cache`]): the
    /// prompt counted by [`crate::prefix_cache::tokens`], and the longest prompt this fake
    /// answered before that the request's messages begin with reported as read from the
    /// cache (`prompt_tokens_details.cached_tokens`).
    PrefixCache,
}

/// A chat request as the fake received it.
#[derive(Debug, Clone)]
pub struct Recorded {
    pub method: String,
    pub path: String,
    pub headers: Vec<(String, String)>,
    pub body: Vec<u8>,
}

impl Recorded {
    pub fn json(&self) -> Value {
        serde_json::from_slice(&self.body).unwrap_or(Value::Null)
    }
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(k, _)| k.eq_ignore_ascii_case(name))
            .map(|(_, v)| v.as_str())
    }
}

struct FakeState {
    name: String,
    mode: Mutex<Mode>,
    healthy: AtomicBool,
    requests: Mutex<Vec<Recorded>>,
    /// The `Host` header of each health check received.
    health_checks: Mutex<Vec<String>>,
    /// Keep every request for assertions (tests); off for load runs.
    record: bool,
    /// Words of the reply; each is one stream chunk.
    words: Vec<String>,
    /// Stream a call of the request's first tool (its arguments split across deltas) instead
    /// of text, as JSON replies always do.
    stream_tool_calls: AtomicBool,
    /// The prompts answered in [`Mode::PrefixCache`].
    seen: crate::prefix_cache::Seen,
}

/// A running fake provider; it serves until the test's runtime ends.
#[derive(Clone)]
pub struct FakeOpenAi {
    pub addr: SocketAddr,
    state: Arc<FakeState>,
}

/// How a [`FakeOpenAi`] starts: where it listens, how long its reply is, whether it records.
pub struct FakeOpenAiBuilder {
    name: String,
    listen: String,
    words: Option<usize>,
    record: bool,
    mode: Mode,
}

impl FakeOpenAiBuilder {
    /// Listen on this address (default: a free port on 127.0.0.1).
    pub fn listen(mut self, addr: &str) -> Self {
        self.listen = addr.to_string();
        self
    }

    /// Reply with `n` words, one stream chunk each (default: a short greeting naming the fake).
    pub fn words(mut self, n: usize) -> Self {
        self.words = Some(n);
        self
    }

    /// Do not keep the requests (a load run would otherwise grow without bound).
    pub fn quiet(mut self) -> Self {
        self.record = false;
        self
    }

    /// Start in this mode (default [`Mode::Ok`]).
    pub fn mode(mut self, mode: Mode) -> Self {
        self.mode = mode;
        self
    }

    pub async fn start(self) -> FakeOpenAi {
        let name = self.name;
        let state = Arc::new(FakeState {
            words: match self.words {
                Some(n) => (0..n).map(|i| format!("tok{i} ")).collect(),
                None => format!("Hello from {name} , have a nice day")
                    .split(' ')
                    .map(|w| format!("{w} "))
                    .collect(),
            },
            name,
            mode: Mutex::new(self.mode),
            healthy: AtomicBool::new(true),
            requests: Mutex::new(Vec::new()),
            health_checks: Mutex::new(Vec::new()),
            record: self.record,
            stream_tool_calls: AtomicBool::new(false),
            seen: Default::default(),
        });
        let addr = crate::accept::serve_fake(&self.listen, state.clone(), serve_conn).await;
        FakeOpenAi { addr, state }
    }
}

impl FakeOpenAi {
    /// Prompt tokens the fake reports in every usage object.
    pub const PROMPT_TOKENS: u64 = 11;

    /// A recording fake on a free port, answering normally.
    pub async fn start(name: &str) -> FakeOpenAi {
        Self::builder(name).start().await
    }

    pub fn builder(name: &str) -> FakeOpenAiBuilder {
        FakeOpenAiBuilder {
            name: name.to_string(),
            listen: "127.0.0.1:0".to_string(),
            words: None,
            record: true,
            mode: Mode::Ok,
        }
    }

    pub fn url(&self) -> String {
        format!("http://{}", self.addr)
    }

    pub fn set_mode(&self, m: Mode) {
        *self.state.mode.lock().unwrap() = m;
    }

    /// What the health-check path (any GET) answers: 200, or 503 when unhealthy.
    pub fn set_healthy(&self, ok: bool) {
        self.state.healthy.store(ok, Ordering::SeqCst);
    }

    /// Streams answer a request that offers tools with a call of the first one (arguments in
    /// pieces), until the conversation carries a tool's result.
    pub fn set_stream_tool_calls(&self, on: bool) {
        self.state.stream_tool_calls.store(on, Ordering::SeqCst);
    }

    /// Health checks received so far.
    pub fn health_checks(&self) -> usize {
        self.state.health_checks.lock().unwrap().len()
    }

    /// The `Host` header of every health check received so far.
    pub fn health_check_hosts(&self) -> Vec<String> {
        self.state.health_checks.lock().unwrap().clone()
    }

    /// Chat requests received (health checks excluded).
    pub fn requests(&self) -> Vec<Recorded> {
        self.state.requests.lock().unwrap().clone()
    }

    pub fn chat_count(&self) -> usize {
        self.state.requests.lock().unwrap().len()
    }

    /// The whole reply text.
    pub fn reply_text(&self) -> String {
        self.state.words.concat()
    }

    /// Words of the reply: its completion tokens, and its content chunks when streamed.
    pub fn reply_words(&self) -> usize {
        self.state.words.len()
    }
}

/// The `messages` of a chat request: one user turn.
pub fn user(content: &str) -> Value {
    json!([{"role": "user", "content": content}])
}

pub(crate) async fn read_request(sock: &mut TcpStream, buf: &mut Vec<u8>) -> Option<Recorded> {
    loop {
        if let Some(end) = find(buf, b"\r\n\r\n") {
            let head = String::from_utf8_lossy(&buf[..end]).to_string();
            let mut lines = head.split("\r\n");
            let mut first = lines.next()?.split(' ');
            let method = first.next()?.to_string();
            let path = first.next()?.to_string();
            let headers: Vec<(String, String)> = lines
                .filter_map(|l| l.split_once(':'))
                .map(|(k, v)| (k.trim().to_string(), v.trim().to_string()))
                .collect();
            let len: usize = headers
                .iter()
                .find(|(k, _)| k.eq_ignore_ascii_case("content-length"))
                .and_then(|(_, v)| v.parse().ok())
                .unwrap_or(0);
            while buf.len() < end + 4 + len {
                buf.reserve(256 * 1024);
                let n = sock.read_buf(buf).await.ok()?;
                if n == 0 {
                    return None;
                }
            }
            let body = buf[end + 4..end + 4 + len].to_vec();
            buf.drain(..end + 4 + len);
            return Some(Recorded {
                method,
                path,
                headers,
                body,
            });
        }
        buf.reserve(16 * 1024);
        let n = sock.read_buf(buf).await.ok()?;
        if n == 0 {
            return None;
        }
    }
}

fn find(h: &[u8], n: &[u8]) -> Option<usize> {
    h.windows(n.len()).position(|w| w == n)
}

pub(crate) async fn write_json(
    sock: &mut TcpStream,
    status: u16,
    body: &[u8],
) -> std::io::Result<()> {
    // Head and body in one write, as HTTP servers send a small reply (two writes cost every
    // client a second read and wakeup, and the benchmarks' proxies two).
    let mut reply = format!(
        "HTTP/1.1 {status} X\r\nContent-Type: application/json\r\nContent-Length: {}\r\n\r\n",
        body.len()
    )
    .into_bytes();
    reply.extend_from_slice(body);
    sock.write_all(&reply).await
}

pub(crate) async fn write_chunk(sock: &mut TcpStream, data: &[u8]) -> std::io::Result<()> {
    let mut out = format!("{:x}\r\n", data.len()).into_bytes();
    out.extend_from_slice(data);
    out.extend_from_slice(b"\r\n");
    sock.write_all(&out).await
}

fn event(v: Value) -> Vec<u8> {
    format!("data: {v}\n\n").into_bytes()
}

async fn serve_conn(mut sock: TcpStream, st: Arc<FakeState>) -> std::io::Result<()> {
    let mut buf = Vec::new();
    while let Some(req) = read_request(&mut sock, &mut buf).await {
        if req.method == "GET" {
            let host = req.header("host").unwrap_or("").to_string();
            st.health_checks.lock().unwrap().push(host);
            let ok = st.healthy.load(Ordering::SeqCst);
            let body = json!({"object":"list","data":[]}).to_string();
            write_json(&mut sock, if ok { 200 } else { 503 }, body.as_bytes()).await?;
            continue;
        }
        let body = req.json();
        let embeddings = req.path.ends_with("/v1/embeddings");
        let native_responses = req.path.ends_with("/v1/responses");
        let req_path_legacy =
            req.path.ends_with("/v1/completions") && !req.path.ends_with("/chat/completions");
        if st.record {
            st.requests.lock().unwrap().push(req);
        }
        let mode = st.mode.lock().unwrap().clone();
        let model = body["model"].as_str().unwrap_or("?").to_string();
        let stream = body["stream"].as_bool().unwrap_or(false);
        let usage_asked = body["stream_options"]["include_usage"]
            .as_bool()
            .unwrap_or(false);
        // Like a real model, never produce more than max_tokens (one token per word here).
        let limit = body["max_tokens"].as_u64().unwrap_or(u64::MAX) as usize;
        let words: Vec<String> = st.words.iter().take(limit).cloned().collect();
        let completion = words.len() as u64;
        let usage = match mode {
            Mode::Usage(p, c) => {
                json!({"prompt_tokens": p, "completion_tokens": c, "total_tokens": p.saturating_add(c)})
            }
            Mode::PrefixCache => {
                let (p, cached) = st.seen.answer(&body["messages"]);
                json!({"prompt_tokens": p, "completion_tokens": completion, "total_tokens": p + completion,
                    "prompt_tokens_details": {"cached_tokens": cached}})
            }
            Mode::Cached(cached, reasoning) => {
                let (p, c) = (FakeOpenAi::PROMPT_TOKENS + cached, completion + reasoning);
                json!({"prompt_tokens": p, "completion_tokens": c, "total_tokens": p + c,
                    "prompt_tokens_details": {"cached_tokens": cached, "audio_tokens": 0},
                    "completion_tokens_details": {"reasoning_tokens": reasoning, "audio_tokens": 0}})
            }
            _ => {
                json!({"prompt_tokens": FakeOpenAi::PROMPT_TOKENS, "completion_tokens": completion, "total_tokens": FakeOpenAi::PROMPT_TOKENS + completion})
            }
        };
        match &mode {
            Mode::Status(code) => {
                let b =
                    json!({"error":{"message": format!("{} says {code}", st.name), "type":"x"}})
                        .to_string();
                write_json(&mut sock, *code, b.as_bytes()).await?;
                continue;
            }
            Mode::Hang => {
                tokio::time::sleep(Duration::from_secs(3600)).await;
                return Ok(());
            }
            Mode::Garbage => {
                write_json(&mut sock, 200, b"<html>oops</html>").await?;
                continue;
            }
            _ => {}
        }
        if native_responses {
            let reported = mode != Mode::NoUsage;
            crate::responses::answer(
                &mut sock,
                &body,
                &words,
                FakeOpenAi::PROMPT_TOKENS,
                reported,
            )
            .await?;
            continue;
        }
        if req_path_legacy {
            let cut = words.len() < st.words.len();
            let reported = (mode != Mode::NoUsage).then(|| usage.clone());
            crate::legacy::answer(&mut sock, &body, &words, cut, reported).await?;
            continue;
        }
        if embeddings {
            let tokens = match mode {
                Mode::Usage(p, _) => Some(p),
                _ => None,
            };
            let r = crate::embeddings::reply(&body, tokens, mode != Mode::NoUsage);
            write_json(&mut sock, 200, r.to_string().as_bytes()).await?;
            continue;
        }
        // Calls the first tool until the conversation carries a tool's result.
        let answered = body["messages"]
            .as_array()
            .and_then(|m| m.last())
            .is_some_and(|m| m["role"] == "tool");
        let tool = body["tools"][0]["function"]["name"]
            .as_str()
            .filter(|_| !answered)
            .map(str::to_owned);
        if let (false, Some(tool)) = (stream, tool.clone()) {
            let reply = json!({
                "id": "chatcmpl-fake", "object": "chat.completion", "created": 1_700_000_000, "model": model,
                "choices": [{"index": 0, "finish_reason": "tool_calls", "message": {"role": "assistant", "content": null,
                    "tool_calls": [{"id": "call_1", "type": "function", "function": {"name": tool, "arguments": "{\"city\":\"Paris\"}"}}]}}],
                "usage": usage,
            });
            write_json(&mut sock, 200, reply.to_string().as_bytes()).await?;
            continue;
        }
        // A structured-output request gets JSON text (the usage still counts the words).
        let structured = body["response_format"]["type"] != Value::Null
            && body["response_format"]["type"] != "text";
        let text = if structured {
            r#"{"city":"Paris"}"#.to_owned()
        } else {
            words.concat()
        };
        if !stream {
            let mut reply = json!({
                "id": "chatcmpl-fake", "object": "chat.completion", "created": 1_700_000_000,
                "model": model,
                "choices": [{"index": 0, "message": {"role": "assistant", "content": text}, "finish_reason": if words.len() < st.words.len() { "length" } else { "stop" }}],
            });
            if mode != Mode::NoUsage {
                reply["usage"] = usage.clone();
            }
            write_json(&mut sock, 200, reply.to_string().as_bytes()).await?;
            continue;
        }
        sock.write_all(b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nTransfer-Encoding: chunked\r\n\r\n")
            .await?;
        if mode == Mode::SilentStream {
            tokio::time::sleep(Duration::from_secs(3600)).await;
            return Ok(());
        }
        if mode == Mode::ErrorFirst {
            write_chunk(
                &mut sock,
                &event(json!({"error":{"message":"overloaded","type":"server_error"}})),
            )
            .await?;
            sock.write_all(b"0\r\n\r\n").await?;
            continue;
        }
        let chunk = |delta: Value, finish: Value| {
            event(
                json!({"id":"chatcmpl-fake","object":"chat.completion.chunk","created":1_700_000_000,"model":model,
                "choices":[{"index":0,"delta":delta,"finish_reason":finish}]}),
            )
        };
        write_chunk(
            &mut sock,
            &chunk(json!({"role":"assistant","content":""}), Value::Null),
        )
        .await?;
        let stream_call = tool.filter(|_| st.stream_tool_calls.load(Ordering::SeqCst));
        if let Some(tool) = stream_call {
            let call = |f: Value, first: bool| {
                let mut c = json!({"index": 0, "function": f});
                if first {
                    c["id"] = json!("call_1");
                    c["type"] = json!("function");
                }
                chunk(json!({"tool_calls": [c]}), Value::Null)
            };
            write_chunk(
                &mut sock,
                &call(json!({"name": tool, "arguments": ""}), true),
            )
            .await?;
            for piece in ["{\"city\":", "\"Paris\"}"] {
                write_chunk(&mut sock, &call(json!({"arguments": piece}), false)).await?;
                // Cut inside the call's arguments.
                if matches!(mode, Mode::DieAfter(_)) {
                    return Ok(());
                }
            }
            write_chunk(&mut sock, &chunk(json!({}), json!("tool_calls"))).await?;
            if usage_asked && mode != Mode::NoUsage {
                write_chunk(&mut sock, &event(json!({"id":"chatcmpl-fake","object":"chat.completion.chunk","created":1_700_000_000,"model":model,"choices":[],"usage":usage}))).await?;
            }
            write_chunk(&mut sock, b"data: [DONE]\n\n").await?;
            sock.write_all(b"0\r\n\r\n").await?;
            continue;
        }
        if structured {
            write_chunk(&mut sock, &chunk(json!({"content": text}), Value::Null)).await?;
            write_chunk(&mut sock, &chunk(json!({}), json!("stop"))).await?;
            if usage_asked && mode != Mode::NoUsage {
                write_chunk(&mut sock, &event(json!({"id":"chatcmpl-fake","object":"chat.completion.chunk","created":1_700_000_000,"model":model,"choices":[],"usage":usage}))).await?;
            }
            write_chunk(&mut sock, b"data: [DONE]\n\n").await?;
            sock.write_all(b"0\r\n\r\n").await?;
            continue;
        }
        if let Mode::Huge(n) = mode {
            let text = "x".repeat(16 * 1024);
            for _ in 0..n {
                write_chunk(&mut sock, &chunk(json!({"content": text}), Value::Null)).await?;
            }
        }
        for (i, w) in words.iter().enumerate() {
            match &mode {
                Mode::DieAfter(n) if i == *n => return Ok(()),
                Mode::StallAfter(n) if i == *n => {
                    tokio::time::sleep(Duration::from_secs(3600)).await;
                    return Ok(());
                }
                Mode::ErrorAfter(n) if i == *n => {
                    let e = json!({"error":{"message":"upstream fell over","type":"server_error"}});
                    write_chunk(&mut sock, &event(e)).await?;
                    sock.write_all(b"0\r\n\r\n").await?;
                    return Ok(());
                }
                Mode::Slow(d) => tokio::time::sleep(*d).await,
                Mode::FirstAfter(d) if i == 0 => tokio::time::sleep(*d).await,
                Mode::SlowThenDie(_, n) if i == *n => return Ok(()),
                Mode::SlowThenDie(d, _) => tokio::time::sleep(*d).await,
                _ => {}
            }
            write_chunk(&mut sock, &chunk(json!({"content": w}), Value::Null)).await?;
        }
        write_chunk(&mut sock, &chunk(json!({}), json!("stop"))).await?;
        if usage_asked && mode != Mode::NoUsage {
            write_chunk(&mut sock, &event(json!({"id":"chatcmpl-fake","object":"chat.completion.chunk","created":1_700_000_000,"model":model,"choices":[],"usage":usage}))).await?;
        }
        write_chunk(&mut sock, b"data: [DONE]\n\n").await?;
        sock.write_all(b"0\r\n\r\n").await?;
    }
    Ok(())
}
