//! Chat completions through the real gateway: JSON and SSE field by field, large bodies,
//! aliases and tiers, usage kept or stripped, the tokenizer fallback, and bad input.

use serde_json::{json, Value};
use tollgate_filters::tokens;
use tollgate_testkit::*;

async fn one_provider() -> (FakeOpenAi, Gateway) {
    let fake = FakeOpenAi::start("alpha").await;
    let cfg = format!(
        "{FAST_TIMEOUTS}{}{}{}[aliases]\n\"small\" = \"alpha-2024-01-01\"\n",
        provider("p", &[&fake], ""),
        model("alpha-2024-01-01", "p", "economy", ""),
        model("beta-2024-01-01", "p", "powerful", ""),
    );
    let gw = Gateway::start(tollgate_bin!(), &cfg).await;
    (fake, gw)
}

#[tokio::test]
async fn a_json_reply_is_passed_on_field_by_field() {
    let (fake, gw) = one_provider().await;
    let r = gw
        .chat(json!({"model":"alpha-2024-01-01","messages":user("hi"),"temperature":0.5,"seed":3}))
        .await;
    assert_eq!(r.status, 200, "{}", r.text());
    assert!(r.header("x-request-id").unwrap().starts_with("req_"));
    assert!(r
        .header("content-type")
        .unwrap()
        .starts_with("application/json"));
    let v = r.json();
    assert!(v["id"].as_str().is_some_and(|s| !s.is_empty()));
    assert_eq!(v["object"], "chat.completion");
    assert!(v["created"].as_i64().is_some());
    assert_eq!(v["model"], "alpha-2024-01-01");
    assert_eq!(v["choices"][0]["index"], 0);
    assert_eq!(v["choices"][0]["message"]["role"], "assistant");
    assert_eq!(v["choices"][0]["message"]["content"], fake.reply_text());
    assert_eq!(v["choices"][0]["finish_reason"], "stop");
    let words = fake.reply_words() as u64;
    assert_eq!(v["usage"]["prompt_tokens"], FakeOpenAi::PROMPT_TOKENS);
    assert_eq!(v["usage"]["completion_tokens"], words);
    assert_eq!(
        v["usage"]["total_tokens"],
        FakeOpenAi::PROMPT_TOKENS + words
    );

    // The upstream saw its own model name, the extra parameters and no compression.
    let sent = &fake.requests()[0];
    assert_eq!(sent.path, "/v1/chat/completions");
    assert_eq!(sent.json()["model"], "up-alpha-2024-01-01");
    assert_eq!(sent.json()["seed"], 3);
    assert_eq!(sent.header("accept-encoding"), Some("identity"));
}

#[tokio::test]
async fn an_sse_stream_is_passed_on_field_by_field_with_usage_stripped() {
    let (fake, gw) = one_provider().await;
    let r = gw
        .chat(json!({"model":"alpha-2024-01-01","messages":user("hi"),"stream":true}))
        .await;
    assert_eq!(r.status, 200, "{}", r.text());
    assert!(r
        .header("content-type")
        .unwrap()
        .starts_with("text/event-stream"));
    assert!(r.header("x-request-id").is_some());
    // Every event line is `data: ` + a chunk, and the stream ends with [DONE].
    for line in r.text().lines().filter(|l| !l.is_empty()) {
        assert!(line.starts_with("data: "), "bad line {line:?}");
    }
    let data = r.sse_data();
    assert_eq!(data.last().unwrap(), "[DONE]");
    let chunks: Vec<Value> = data[..data.len() - 1]
        .iter()
        .map(|d| serde_json::from_str(d).unwrap())
        .collect();
    let mut text = String::new();
    for c in &chunks {
        assert_eq!(c["object"], "chat.completion.chunk");
        assert_eq!(c["model"], "alpha-2024-01-01");
        assert!(c["id"].is_string() && c["created"].is_i64());
        assert!(
            c.get("usage").is_none(),
            "usage chunk must be stripped: {c}"
        );
        if let Some(s) = c["choices"][0]["delta"]["content"].as_str() {
            text.push_str(s);
        }
    }
    assert_eq!(text, fake.reply_text());
    let last = chunks.last().unwrap();
    assert_eq!(last["choices"][0]["delta"], json!({}));
    assert_eq!(last["choices"][0]["finish_reason"], "stop");
    for c in &chunks[..chunks.len() - 1] {
        assert!(c["choices"][0]["finish_reason"].is_null());
    }
    // The gateway asked the upstream for usage even though the client did not.
    assert_eq!(
        fake.requests()[0].json()["stream_options"]["include_usage"],
        true
    );
}

#[tokio::test]
async fn the_usage_chunk_is_kept_when_asked() {
    let (fake, gw) = one_provider().await;
    let r = gw
        .chat(json!({"model":"alpha-2024-01-01","messages":user("hi"),"stream":true,"stream_options":{"include_usage":true}}))
        .await;
    let data = r.sse_data();
    let usage: Vec<Value> = data
        .iter()
        .filter(|d| d.as_str() != "[DONE]")
        .map(|d| serde_json::from_str::<Value>(d).unwrap())
        .filter(|c| c.get("usage").is_some_and(|u| !u.is_null()))
        .collect();
    assert_eq!(usage.len(), 1);
    assert_eq!(
        usage[0]["usage"]["completion_tokens"],
        fake.reply_words() as u64
    );
    assert_eq!(usage[0]["choices"], json!([]));
}

#[tokio::test]
async fn a_three_megabyte_body_is_forwarded_intact() {
    let (fake, gw) = one_provider().await;
    let big: String = (0..3 * 1024 * 1024)
        .map(|i| (b'a' + (i % 26) as u8) as char)
        .collect();
    let r = gw
        .chat(json!({"model":"alpha-2024-01-01","messages":user(&big)}))
        .await;
    assert_eq!(r.status, 200, "{}", r.text());
    let sent = fake.requests()[0].json();
    assert_eq!(sent["messages"][0]["content"].as_str().unwrap(), big);
    // Streams too.
    let r = gw
        .chat(json!({"model":"alpha-2024-01-01","messages":user(&big),"stream":true}))
        .await;
    assert_eq!(r.status, 200);
    assert_eq!(
        fake.requests()[1].json()["messages"][0]["content"]
            .as_str()
            .unwrap()
            .len(),
        big.len()
    );
}

#[tokio::test]
async fn aliases_and_tiers_resolve_to_served_models() {
    let (fake, gw) = one_provider().await;
    let r = gw
        .chat(json!({"model":"small","messages":user("hi")}))
        .await;
    assert_eq!(r.json()["model"], "alpha-2024-01-01");
    assert_eq!(fake.requests()[0].json()["model"], "up-alpha-2024-01-01");
    let r = gw
        .chat(json!({"model":"powerful","messages":user("hi")}))
        .await;
    assert_eq!(r.json()["model"], "beta-2024-01-01");
    let r = gw
        .chat(json!({"model":"economy","messages":user("hi"),"stream":true}))
        .await;
    let first: Value = serde_json::from_str(&r.sse_data()[0]).unwrap();
    assert_eq!(first["model"], "alpha-2024-01-01");
}

#[tokio::test]
async fn the_tokenizer_counts_when_upstream_omits_usage() {
    let (fake, gw) = one_provider().await;
    fake.set_mode(Mode::NoUsage);
    let prompt = "Count me with a real tokenizer, please: 東京は大きい都市です。";
    let messages = user(prompt);
    let expected_prompt = tokens::count_prompt(&messages);
    let expected_completion = tokens::count_text(&fake.reply_text());
    let r = gw
        .chat(json!({"model":"alpha-2024-01-01","messages":messages}))
        .await;
    let v = r.json();
    assert_eq!(v["usage"]["prompt_tokens"], expected_prompt);
    assert_eq!(v["usage"]["completion_tokens"], expected_completion);
    assert_ne!(
        expected_completion,
        fake.reply_text().chars().count() as u64
    );

    // Streamed: the client asked for usage, the upstream sent none, the gateway counts it.
    let r = gw
        .chat(json!({"model":"alpha-2024-01-01","messages":messages,"stream":true,"stream_options":{"include_usage":true}}))
        .await;
    let data = r.sse_data();
    assert_eq!(data.last().unwrap(), "[DONE]");
    let usage: Value = serde_json::from_str(&data[data.len() - 2]).unwrap();
    assert_eq!(usage["usage"]["prompt_tokens"], expected_prompt);
    assert_eq!(usage["usage"]["completion_tokens"], expected_completion);
    assert_eq!(
        usage["usage"]["total_tokens"],
        expected_prompt + expected_completion
    );
}

#[tokio::test]
async fn unknown_model_is_404() {
    let (fake, gw) = one_provider().await;
    let r = gw
        .chat(json!({"model":"gpt-17","messages":user("hi")}))
        .await;
    let v = r.error(404, "model_not_found");
    assert!(v["error"]["message"].as_str().unwrap().contains("gpt-17"));
    assert_eq!(fake.chat_count(), 0);
}

#[tokio::test]
async fn every_bad_request_is_a_named_400_and_the_gateway_stays_healthy() {
    let (fake, gw) = one_provider().await;
    let m = user("hi");
    let cases: Vec<(Value, &str)> = vec![
        (json!({"messages": m}), "model"),
        (json!({"model": 7, "messages": m}), "model"),
        (json!({"model": "alpha-2024-01-01"}), "messages"),
        (
            json!({"model": "alpha-2024-01-01", "messages": []}),
            "messages",
        ),
        (
            json!({"model": "alpha-2024-01-01", "messages": [{"role":"robot","content":"x"}]}),
            "messages[0].role",
        ),
        (
            json!({"model": "alpha-2024-01-01", "messages": [{"role":"user"}]}),
            "messages[0].content",
        ),
        (
            json!({"model": "alpha-2024-01-01", "messages": m, "temperature": 2.1}),
            "temperature",
        ),
        (
            json!({"model": "alpha-2024-01-01", "messages": m, "temperature": -1}),
            "temperature",
        ),
        (
            json!({"model": "alpha-2024-01-01", "messages": m, "max_tokens": 0}),
            "max_tokens",
        ),
        (
            json!({"model": "alpha-2024-01-01", "messages": m, "max_tokens": 2.5}),
            "max_tokens",
        ),
        (
            json!({"model": "alpha-2024-01-01", "messages": m, "max_tokens": "10"}),
            "max_tokens",
        ),
        (
            json!({"model": "alpha-2024-01-01", "messages": m, "stream": "true"}),
            "stream",
        ),
        (
            json!({"model": "alpha-2024-01-01", "messages": m, "tools": "f"}),
            "tools",
        ),
        (
            json!({"model": "alpha-2024-01-01", "messages": m, "tools": [{"type":"function","function":{}}]}),
            "tools[0].function.name",
        ),
        (
            json!({"model": "alpha-2024-01-01", "messages": m, "tool_choice": "sometimes"}),
            "tool_choice",
        ),
        (json!({"model": "a".repeat(300), "messages": m}), "model"),
        (
            json!({"model": "alpha-2024-01-01", "messages": m, "n": 0}),
            "n",
        ),
        (
            json!({"model": "alpha-2024-01-01", "messages": m, "n": 500}),
            "n",
        ),
    ];
    for (body, field) in cases {
        let r = gw.chat(body.clone()).await;
        let v = r.error(400, "invalid_request");
        let msg = v["error"]["message"].as_str().unwrap();
        assert!(msg.starts_with(&format!("{field}:")), "{body} -> {msg}");
    }
    // Malformed JSON, a non-object, an empty body.
    for raw in [&b"{\"model\": "[..], b"[]", b""] {
        let r = request(
            gw.addr,
            "POST",
            "/v1/chat/completions",
            &[("Content-Type", "application/json")],
            raw,
        )
        .await;
        let v = r.error(400, "invalid_request");
        assert!(v["error"]["message"].as_str().unwrap().starts_with("body:"));
    }
    // Over max_body_bytes (8 MiB in tests), refused from Content-Length before reading it.
    // Only the head is sent: the gateway must answer without waiting for 9 MiB.
    let head = format!(
        "POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nContent-Length: {}\r\n\r\n",
        9 * 1024 * 1024
    );
    let r = raw_request(gw.addr, head.as_bytes()).await;
    let v = r.error(400, "invalid_request");
    assert!(v["error"]["message"].as_str().unwrap().contains("limit"));
    // Unknown paths and methods.
    get(gw.addr, "/v2/nothing").await.error(404, "not_found");
    get(gw.addr, "/v1/chat/completions")
        .await
        .error(405, "invalid_request");

    assert_eq!(fake.chat_count(), 0, "nothing reached the upstream");
    assert!(gw.is_healthy().await);
    assert_eq!(
        gw.chat(json!({"model":"alpha-2024-01-01","messages":m}))
            .await
            .status,
        200
    );
}

#[tokio::test]
async fn upstream_rejection_of_the_request_reaches_the_client() {
    let (fake, gw) = one_provider().await;
    fake.set_mode(Mode::Status(400));
    let r = gw
        .chat(json!({"model":"alpha-2024-01-01","messages":user("hi")}))
        .await;
    let v = r.error(400, "invalid_request");
    assert!(v["error"]["message"]
        .as_str()
        .unwrap()
        .contains("alpha says 400"));
}

#[tokio::test]
async fn unparseable_upstream_reply_is_a_502() {
    let (fake, gw) = one_provider().await;
    fake.set_mode(Mode::Garbage);
    let r = gw
        .chat(json!({"model":"alpha-2024-01-01","messages":user("hi")}))
        .await;
    r.error(502, "upstream_error");
    assert!(gw.is_healthy().await);
}

#[tokio::test]
async fn a_hostile_prompt_counted_by_the_tokenizer_never_stalls_the_service() {
    // 300 KB of one letter is one BPE piece (quadratic to merge). With no usage from the
    // upstream the gateway counts it itself: in bounded segments, off the proxy threads.
    let (fake, gw) = one_provider().await;
    fake.set_mode(Mode::NoUsage);
    let prompt = "a".repeat(300_000);
    let mut chats = Vec::new();
    for stream in [false, true, false, true] {
        let body = json!({"model":"alpha-2024-01-01","messages":user(&prompt),"stream":stream});
        let addr = gw.addr;
        let key = gw.key.clone();
        chats.push(tokio::spawn(async move {
            let b = serde_json::to_vec(&body).unwrap();
            let auth = format!("Bearer {key}");
            request(
                addr,
                "POST",
                "/v1/chat/completions",
                &[("Authorization", &auth)],
                &b,
            )
            .await
        }));
    }
    // Probed from a thread of its own: the fake provider shares this test's runtime, and its
    // parsing of the 300 KB bodies must not be what the probe measures.
    let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let probe = {
        let (stop, addr) = (stop.clone(), gw.addr);
        std::thread::spawn(move || {
            let rt = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
                .unwrap();
            rt.block_on(async {
                let mut slowest = std::time::Duration::ZERO;
                while !stop.load(std::sync::atomic::Ordering::Relaxed) {
                    let t = std::time::Instant::now();
                    assert_eq!(get(addr, "/healthz").await.status, 200);
                    slowest = slowest.max(t.elapsed());
                    tokio::time::sleep(std::time::Duration::from_millis(5)).await;
                }
                slowest
            })
        })
    };
    while !chats.iter().all(|c| c.is_finished()) {
        tokio::time::sleep(std::time::Duration::from_millis(5)).await;
    }
    stop.store(true, std::sync::atomic::Ordering::Relaxed);
    let slowest = probe.join().unwrap();
    // Counting these prompts on a proxy thread stalls it for seconds; a loaded shared machine
    // (a benchmark beside the tests) delays a probe by a tenth of one: the bound tells them apart.
    assert!(
        slowest < std::time::Duration::from_millis(1000),
        "/healthz took {slowest:?} while prompts were counted"
    );
    for c in chats {
        let r = c.await.unwrap();
        assert_eq!(r.status, 200, "{}", r.text());
    }
    let u = gw.usage(&gw.key).await;
    for row in u["recent"].as_array().unwrap() {
        let p = row["prompt_tokens"].as_i64().unwrap();
        assert!(p > 10_000 && p < 300_000, "counted {p} prompt tokens");
    }
}
