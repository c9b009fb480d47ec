//! A fake Anthropic Messages API provider, with the shapes of the public API reference: a text
//! message, two parallel `tool_use` blocks, prompt-cache usage, every stream event type
//! (`message_start`, `content_block_*`, `ping`, `message_delta`, `message_stop`), and the ways
//! it fails (an error status, 529 overloaded, an `overloaded_error` event first, death
//! mid-stream).

use std::net::SocketAddr;
use std::sync::{Arc, Mutex};

use serde_json::{json, Value};
use tokio::io::AsyncWriteExt;
use tokio::net::TcpStream;

use crate::openai::{read_request, write_chunk, write_json, Recorded};
use crate::prompt_cache::{CacheUsage, PromptCache};

/// The key the gateway's test environment gives [`anthropic_provider`]s.
pub const FAKE_ANTHROPIC_KEY: &str = "sk-ant-fake-0123";

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum AnthropicMode {
    /// A text reply, `end_turn`.
    Ok,
    /// Two parallel `tool_use` blocks (`get_weather` for Paris and for Tokyo) while the last
    /// user message carries no `tool_result`; a text reply once it does.
    Tools,
    /// Report these prompt-cache counts (cache writes, cache reads) besides `input_tokens`.
    Cache(u64, u64),
    /// Report cache writes by lifetime (five-minute, one-hour: `cache_creation`) and cache
    /// reads besides `input_tokens`.
    CacheByTtl(u64, u64, u64),
    /// Answer this status with Anthropic's error shape (529 is `overloaded_error`).
    Status(u16),
    /// Streams: a 200 and an `error` event (`overloaded_error`) before anything else; JSON: 529.
    OverloadedEvent,
    /// Streams: die after this many text deltas.
    DieAfter(usize),
    /// Streams: an `error` event (`api_error`) after this many text deltas.
    ErrorAfter(usize),
    /// Streams: go silent after this many text deltas.
    StallAfter(usize),
    /// A text reply whose prompt counts come from a prompt cache kept across requests, as
    /// Anthropic's works (`prompt_cache.rs`): its marks write prefixes, later requests read
    /// them. [`FakeAnthropic::cache_usage`] tells what each request was billed as.
    PromptCache,
    /// A prompt cache of this fake's own ([`crate::prefix_cache`], over `system` then the
    /// messages): the longest prompt it answered before that this one begins with is reported
    /// as `cache_read_input_tokens`, the rest as `input_tokens`.
    PrefixCache,
}

struct State {
    mode: Mutex<AnthropicMode>,
    requests: Mutex<Vec<Recorded>>,
    /// Keep what was received (tests); the load run's fake does not.
    record: bool,
    words: Vec<String>,
    cache: Mutex<PromptCache>,
    /// What each request of [`AnthropicMode::PromptCache`] was billed as, in order.
    cache_usage: Mutex<Vec<CacheUsage>>,
    /// The prompts answered in [`AnthropicMode::PrefixCache`].
    seen: crate::prefix_cache::Seen,
}

/// A running fake Anthropic provider; it serves until the test's runtime ends.
#[derive(Clone)]
pub struct FakeAnthropic {
    pub addr: SocketAddr,
    state: Arc<State>,
}

impl FakeAnthropic {
    /// `input_tokens` the fake reports (besides any cache counts).
    pub const INPUT_TOKENS: u64 = 13;

    pub async fn start(name: &str) -> FakeAnthropic {
        Self::start_on(name, "127.0.0.1:0", true).await
    }

    /// On a given address; `record: false` keeps nothing of the requests (the load run's fake).
    pub async fn start_on(name: &str, addr: &str, record: bool) -> FakeAnthropic {
        let state = Arc::new(State {
            mode: Mutex::new(AnthropicMode::Ok),
            requests: Mutex::new(Vec::new()),
            record,
            words: format!("Claude {name} says hello , nice day")
                .split(' ')
                .map(|w| format!("{w} "))
                .collect(),
            cache: Mutex::default(),
            cache_usage: Mutex::default(),
            seen: Default::default(),
        });
        let addr = crate::accept::serve_fake(addr, state.clone(), serve).await;
        FakeAnthropic { addr, state }
    }

    pub fn url(&self) -> String {
        format!("http://{}", self.addr)
    }

    pub fn set_mode(&self, m: AnthropicMode) {
        *self.state.mode.lock().unwrap() = m;
    }

    /// Messages requests received (health checks excluded).
    pub fn requests(&self) -> Vec<Recorded> {
        self.state.requests.lock().unwrap().clone()
    }

    /// The prompt counts reported for each request of [`AnthropicMode::PromptCache`], in order.
    pub fn cache_usage(&self) -> Vec<CacheUsage> {
        self.state.cache_usage.lock().unwrap().clone()
    }

    pub fn count(&self) -> usize {
        self.state.requests.lock().unwrap().len()
    }

    /// The text reply, whole.
    pub fn reply_text(&self) -> String {
        self.state.words.concat()
    }

    /// Output tokens of the text reply (one per word).
    pub fn reply_words(&self) -> u64 {
        self.state.words.len() as u64
    }
}

/// A `[[providers]]` block of kind `anthropic` over these fakes, with a key.
pub fn anthropic_provider(name: &str, fakes: &[&FakeAnthropic], extra: &str) -> String {
    let eps: Vec<String> = fakes.iter().map(|f| format!("\"{}\"", f.url())).collect();
    format!(
        "[[providers]]\nname = \"{name}\"\nkind = \"anthropic\"\nendpoints = [{}]\napi_key_env = \"TOLLGATE_TEST_ANTHROPIC_KEY\"\n{extra}\n",
        eps.join(", ")
    )
}

/// A Messages body's prompt as the prefix cache sees it: `system`, then each message.
pub fn prompt_of(body: &Value) -> Value {
    let mut prompt = vec![body["system"].clone()];
    prompt.extend(body["messages"].as_array().cloned().unwrap_or_default());
    Value::Array(prompt)
}

fn sse(name: &str, data: Value) -> Vec<u8> {
    format!("event: {name}\ndata: {data}\n\n").into_bytes()
}

/// The thinking block the fake writes when asked to think, and its signature.
pub const THOUGHT: &str = "The user wants a greeting.";
pub const SIGNATURE: &str = "EqQBCgIYAhIMfakeSignature";

fn wants_tools(body: &Value) -> bool {
    let has_tools = body["tools"].as_array().is_some_and(|t| !t.is_empty());
    let last = body["messages"].as_array().and_then(|m| m.last());
    let answered = last
        .and_then(|m| m["content"].as_array())
        .is_some_and(|blocks| blocks.iter().any(|b| b["type"] == "tool_result"));
    has_tools && !answered
}

async fn serve(mut sock: TcpStream, st: Arc<State>) -> std::io::Result<()> {
    let mut buf = Vec::new();
    while let Some(req) = read_request(&mut sock, &mut buf).await {
        if req.method == "GET" {
            write_json(&mut sock, 200, b"{\"data\":[]}").await?;
            continue;
        }
        let body = req.json();
        if st.record {
            st.requests.lock().unwrap().push(req);
        }
        let mode = st.mode.lock().unwrap().clone();
        let stream = body["stream"].as_bool().unwrap_or(false);
        let model = body["model"].as_str().unwrap_or("?").to_string();
        let limit = body["max_tokens"].as_u64().unwrap_or(u64::MAX) as usize;
        let words: Vec<String> = st.words.iter().take(limit).cloned().collect();
        let (cache_write, cache_read) = match mode {
            AnthropicMode::Cache(w, r) => (w, r),
            AnthropicMode::CacheByTtl(five, hour, r) => (five + hour, r),
            _ => (0, 0),
        };
        let (mut input, mut cache_read) = (FakeAnthropic::INPUT_TOKENS, cache_read);
        if mode == AnthropicMode::PrefixCache {
            let (prompt, cached) = st.seen.answer(&prompt_of(&body));
            (input, cache_read) = (prompt - cached, cached);
        }
        let status = match mode {
            AnthropicMode::Status(s) => Some(s),
            AnthropicMode::OverloadedEvent if !stream => Some(529),
            _ => None,
        };
        if let Some(s) = status {
            let ty = match s {
                400 => "invalid_request_error",
                401 => "authentication_error",
                429 => "rate_limit_error",
                529 => "overloaded_error",
                _ => "api_error",
            };
            let b = json!({"type":"error","error":{"type": ty, "message": format!("fake anthropic says {s}")}});
            write_json(&mut sock, s, b.to_string().as_bytes()).await?;
            continue;
        }
        let tools = mode == AnthropicMode::Tools && wants_tools(&body);
        let output = if tools { 40 } else { words.len() as u64 };
        let mut usage = json!({"input_tokens": input, "output_tokens": output,
            "cache_creation_input_tokens": cache_write, "cache_read_input_tokens": cache_read});
        if mode == AnthropicMode::PromptCache {
            let u = st.cache.lock().unwrap().serve(&body);
            st.cache_usage.lock().unwrap().push(u);
            usage["input_tokens"] = json!(u.input);
            usage["cache_creation_input_tokens"] = json!(u.write);
            usage["cache_read_input_tokens"] = json!(u.read);
        }
        if let AnthropicMode::CacheByTtl(five, hour, _) = mode {
            usage["cache_creation"] =
                json!({"ephemeral_5m_input_tokens": five, "ephemeral_1h_input_tokens": hour});
        }
        let stop = if tools {
            "tool_use"
        } else if words.len() < st.words.len() {
            "max_tokens"
        } else {
            "end_turn"
        };
        let tool_blocks = [("toolu_01", "Paris"), ("toolu_02", "Tokyo")];
        // Asked to think (`thinking` enabled or adaptive): a thinking block with its signature
        // comes first, as Claude's do.
        let thinks = matches!(
            body["thinking"]["type"].as_str(),
            Some("enabled" | "adaptive")
        );
        let first = usize::from(thinks);
        if !stream {
            let mut content = vec![];
            if thinks {
                content.push(json!({"type":"thinking","thinking": THOUGHT,"signature": SIGNATURE}));
            }
            content.extend([
                json!({"type":"text","text": if tools { "Let me check both.".to_string() } else { words.concat() }}),
            ]);
            if tools {
                for (id, city) in tool_blocks {
                    content.push(json!({"type":"tool_use","id": id,"name":"get_weather","input":{"city": city}}));
                }
            }
            let reply = json!({"id":"msg_fake","type":"message","role":"assistant","model": model,
                "content": content, "stop_reason": stop, "stop_sequence": null, "usage": usage});
            write_json(&mut sock, 200, reply.to_string().as_bytes()).await?;
            continue;
        }
        sock.write_all(b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nTransfer-Encoding: chunked\r\n\r\n")
            .await?;
        if mode == AnthropicMode::OverloadedEvent {
            let e =
                json!({"type":"error","error":{"type":"overloaded_error","message":"Overloaded"}});
            write_chunk(&mut sock, &sse("error", e)).await?;
            sock.write_all(b"0\r\n\r\n").await?;
            continue;
        }
        let mut start_usage = usage.clone();
        start_usage["output_tokens"] = json!(1);
        let start = json!({"type":"message_start","message":{"id":"msg_fake","type":"message","role":"assistant",
            "model": model, "content": [], "stop_reason": null, "stop_sequence": null, "usage": start_usage}});
        write_chunk(&mut sock, &sse("message_start", start)).await?;
        if thinks {
            let block = |t: &str, v: Value| sse(t, v);
            write_chunk(&mut sock, &block("content_block_start", json!({"type":"content_block_start","index":0,"content_block":{"type":"thinking","thinking":""}}))).await?;
            write_chunk(&mut sock, &block("content_block_delta", json!({"type":"content_block_delta","index":0,"delta":{"type":"thinking_delta","thinking": THOUGHT}}))).await?;
            write_chunk(&mut sock, &block("content_block_delta", json!({"type":"content_block_delta","index":0,"delta":{"type":"signature_delta","signature": SIGNATURE}}))).await?;
            write_chunk(
                &mut sock,
                &block(
                    "content_block_stop",
                    json!({"type":"content_block_stop","index":0}),
                ),
            )
            .await?;
        }
        write_chunk(&mut sock, &sse("content_block_start", json!({"type":"content_block_start","index":first,"content_block":{"type":"text","text":""}}))).await?;
        write_chunk(&mut sock, &sse("ping", json!({"type":"ping"}))).await?;
        let text: Vec<String> = if tools {
            vec!["Let me check both.".into()]
        } else {
            words.clone()
        };
        for (i, w) in text.iter().enumerate() {
            if mode == AnthropicMode::DieAfter(i) {
                return Ok(());
            }
            if mode == AnthropicMode::StallAfter(i) {
                tokio::time::sleep(std::time::Duration::from_secs(3600)).await;
                return Ok(());
            }
            if mode == AnthropicMode::ErrorAfter(i) {
                let e = json!({"type":"error","error":{"type":"api_error","message":"Internal server error"}});
                write_chunk(&mut sock, &sse("error", e)).await?;
                sock.write_all(b"0\r\n\r\n").await?;
                return Ok(());
            }
            let d = json!({"type":"content_block_delta","index":first,"delta":{"type":"text_delta","text": w}});
            write_chunk(&mut sock, &sse("content_block_delta", d)).await?;
        }
        write_chunk(
            &mut sock,
            &sse(
                "content_block_stop",
                json!({"type":"content_block_stop","index":first}),
            ),
        )
        .await?;
        if tools {
            for (k, (id, city)) in tool_blocks.iter().enumerate() {
                let index = first + k + 1;
                let start = json!({"type":"content_block_start","index": index,"content_block":{"type":"tool_use","id": id,"name":"get_weather","input":{}}});
                write_chunk(&mut sock, &sse("content_block_start", start)).await?;
                for part in ["{\"city\": ", &format!("\"{city}\"}}")] {
                    let d = json!({"type":"content_block_delta","index": index,"delta":{"type":"input_json_delta","partial_json": part}});
                    write_chunk(&mut sock, &sse("content_block_delta", d)).await?;
                }
                write_chunk(
                    &mut sock,
                    &sse(
                        "content_block_stop",
                        json!({"type":"content_block_stop","index": index}),
                    ),
                )
                .await?;
            }
        }
        let delta = json!({"type":"message_delta","delta":{"stop_reason": stop,"stop_sequence": null},"usage":{"output_tokens": output}});
        write_chunk(&mut sock, &sse("message_delta", delta)).await?;
        write_chunk(
            &mut sock,
            &sse("message_stop", json!({"type":"message_stop"})),
        )
        .await?;
        sock.write_all(b"0\r\n\r\n").await?;
    }
    Ok(())
}
