//! Streams that survive a cut through every front door and provider kind (docs/api.md, "Streams
//! that survive a cut"): an Anthropic provider continues a chat stream as a prefill; a
//! `/v1/messages` stream and a `/v1/responses` stream resume as one stream of their own
//! shape; the official `openai` and `anthropic` Python SDKs read a resumed stream without
//! raising (`tests/sdk/resume_sdk.py`).

use std::process::Command;

use serde_json::{json, Value};
use tollgate_filters::tokens;
use tollgate_testkit::*;

/// `m1` (economy) on OpenAI-compatible `a`, which dies after 3 words; `m2` on `b`;
/// `claude-1` (powerful) on Anthropic `c1`, which dies after 3 words; `claude-2` on `c2`. The
/// tiers of `m2` and `claude-2` decide which continues whom.
struct Setup {
    a: FakeOpenAi,
    b: FakeOpenAi,
    c1: FakeAnthropic,
    c2: FakeAnthropic,
    gw: Gateway,
}

async fn setup(tier_m2: &str, tier_c2: &str) -> Setup {
    let a = FakeOpenAi::builder("a")
        .mode(Mode::DieAfter(3))
        .start()
        .await;
    let b = FakeOpenAi::start("b").await;
    let (c1, c2) = (
        FakeAnthropic::start("c1").await,
        FakeAnthropic::start("c2").await,
    );
    c1.set_mode(AnthropicMode::DieAfter(3));
    let m = |id: &str, p: &str, tier: &str, i: u64, o: u64| {
        format!("[[models]]\nid = \"{id}\"\nprovider = \"{p}\"\ntier = \"{tier}\"\ninput_credits_per_1k = {i}\noutput_credits_per_1k = {o}\nmax_output_tokens = 1000\n\n")
    };
    let cfg = format!(
        "{FAST_TIMEOUTS}{}{}{}{}{}{}{}{}",
        provider("pa", &[&a], ""),
        provider("pb", &[&b], ""),
        anthropic_provider("pc1", &[&c1], ""),
        anthropic_provider("pc2", &[&c2], ""),
        m("m1", "pa", "economy", 1, 2),
        m("m2", "pb", tier_m2, 1, 2),
        m("claude-1", "pc1", "powerful", 3, 15),
        m("claude-2", "pc2", tier_c2, 3, 15),
    );
    let gw = Gateway::start(tollgate_bin!(), &cfg).await;
    Setup { a, b, c1, c2, gw }
}

async fn post(gw: &Gateway, path: &str, body: &Value) -> Response {
    let auth = format!("Bearer {}", gw.key);
    let headers = [
        ("Content-Type", "application/json"),
        ("Authorization", auth.as_str()),
        ("anthropic-version", "2023-06-01"),
        ("X-Tollgate-Resume", "on"),
    ];
    request(
        gw.addr,
        "POST",
        path,
        &headers,
        &serde_json::to_vec(body).unwrap(),
    )
    .await
}

/// Named events (`event:` and `data:`), comments left out.
fn events(r: &Response) -> Vec<(String, Value)> {
    r.text()
        .split("\n\n")
        .filter(|e| !e.trim().is_empty() && !e.starts_with(':'))
        .filter_map(|e| {
            let name = e.lines().find_map(|l| l.strip_prefix("event: "))?;
            let data = e.lines().find_map(|l| l.strip_prefix("data: "))?;
            Some((name.to_owned(), serde_json::from_str(data).unwrap()))
        })
        .collect()
}

#[tokio::test]
async fn an_anthropic_provider_continues_a_chat_stream_as_a_prefill() {
    let s = setup("normal", "economy").await;
    let before = s.gw.balance(&s.gw.key).await;
    let body = json!({"model":"m1","messages":user("Say hello"),"stream":true,
        "stream_options":{"include_usage":true}});
    let r = post(&s.gw, "/v1/chat/completions", &body).await;
    assert!(
        r.text().contains(": resumed on claude-2\n\n"),
        "{}",
        r.text()
    );
    let data = r.sse_data();
    assert_eq!(
        data.iter().filter(|d| *d == "[DONE]").count(),
        1,
        "{}",
        r.text()
    );
    let chunks: Vec<Value> = data
        .iter()
        .filter(|d| *d != "[DONE]")
        .map(|d| serde_json::from_str(d).unwrap())
        .collect();
    let text: String = chunks
        .iter()
        .filter_map(|c| c["choices"][0]["delta"]["content"].as_str())
        .collect();
    let first = "Hello from a ";
    assert_eq!(text, format!("{first}{}", s.c2.reply_text()));
    assert!(
        chunks.iter().all(|c| c["id"] == chunks[0]["id"]),
        "{}",
        r.text()
    );
    // The prefill: the partial answer, without its trailing space (Anthropic refuses one).
    let asked = s.c2.requests().last().unwrap().json();
    let turns = asked["messages"].as_array().unwrap();
    assert_eq!(
        turns.last().unwrap(),
        &json!({"role":"assistant","content":"Hello from a"})
    );
    let messages = serde_json::to_string(&body["messages"]).unwrap();
    let (p1, c1) = (
        tokens::count_prompt_json(&messages),
        tokens::count_text(first),
    );
    let (p2, c2) = (FakeAnthropic::INPUT_TOKENS, s.c2.reply_words());
    let charge = (p1 * 1_000 + c1 * 2_000 + p2 * 3_000 + c2 * 15_000) as i64;
    assert_eq!(before - s.gw.balance(&s.gw.key).await, charge);
    let usage = &chunks.last().unwrap()["usage"];
    assert_eq!(
        (
            usage["prompt_tokens"].as_u64(),
            usage["completion_tokens"].as_u64()
        ),
        (Some(p1 + p2), Some(c1 + c2))
    );
    assert_eq!(s.b.chat_count(), 0);
    drop((s.a, s.c1));
}

#[tokio::test]
async fn a_messages_stream_resumes_as_one_message() {
    let s = setup("normal", "powerful").await;
    let before = s.gw.balance(&s.gw.key).await;
    let body = json!({"model":"claude-1","max_tokens":100,"stream":true,
        "messages":[{"role":"user","content":"Say hello"}]});
    let r = post(&s.gw, "/v1/messages", &body).await;
    assert_eq!(r.status, 200, "{}", r.text());
    assert!(
        r.text().contains(": resumed on claude-2\n\n"),
        "{}",
        r.text()
    );
    let ev = events(&r);
    let count = |n: &str| ev.iter().filter(|(e, _)| e == n).count();
    assert_eq!(
        (
            count("message_start"),
            count("message_stop"),
            count("error")
        ),
        (1, 1, 0),
        "{}",
        r.text()
    );
    assert_eq!(
        count("content_block_start"),
        1,
        "one text block: {}",
        r.text()
    );
    let text: String = ev
        .iter()
        .filter(|(e, _)| e == "content_block_delta")
        .map(|(_, d)| {
            assert_eq!(d["index"], 0);
            d["delta"]["text"].as_str().unwrap()
        })
        .collect();
    assert_eq!(text, format!("Claude c1 says {}", s.c2.reply_text()));
    let asked = s.c2.requests().last().unwrap().json();
    assert_eq!(
        asked["messages"].as_array().unwrap().last().unwrap()["content"],
        "Claude c1 says"
    );
    // The closing usage is both legs'; the charge each leg's at its rates (the same here).
    let delta = &ev.iter().find(|(e, _)| e == "message_delta").unwrap().1;
    let c1 = tokens::count_text("Claude c1 says ");
    let out = c1 + s.c2.reply_words();
    assert_eq!(delta["usage"]["output_tokens"], out, "{delta}");
    let row = s.gw.usage(&s.gw.key).await["recent"][0].clone();
    let p = row["prompt_tokens"].as_i64().unwrap();
    assert_eq!(
        before - s.gw.balance(&s.gw.key).await,
        p * 3_000 + out as i64 * 15_000
    );
    drop((s.a, s.b, s.c1));
}

#[tokio::test]
async fn a_responses_stream_resumes_as_one_response() {
    let s = setup("economy", "powerful").await;
    let body = json!({"model":"m1","input":"Say hello","stream":true});
    let r = post(&s.gw, "/v1/responses", &body).await;
    assert_eq!(r.status, 200, "{}", r.text());
    assert!(r.text().contains(": resumed on m2\n\n"), "{}", r.text());
    let ev = events(&r);
    for (i, (name, data)) in ev.iter().enumerate() {
        assert_eq!(data["type"], name.as_str());
        assert_eq!(data["sequence_number"], i, "{}", r.text());
    }
    let count = |n: &str| ev.iter().filter(|(e, _)| e == n).count();
    assert_eq!(
        (
            count("response.created"),
            count("response.completed"),
            count("response.failed")
        ),
        (1, 1, 0)
    );
    let text: String = ev
        .iter()
        .filter(|(e, _)| e == "response.output_text.delta")
        .map(|(_, d)| d["delta"].as_str().unwrap())
        .collect();
    let expected = format!("Hello from a {}", s.b.reply_text());
    assert_eq!(text, expected);
    let done = &ev.last().unwrap().1["response"];
    assert_eq!(done["output"][0]["content"][0]["text"], expected, "{done}");
    assert!(done["usage"]["output_tokens"].as_u64().unwrap() > s.b.reply_words() as u64);
    drop((s.a, s.c1, s.c2));
}

#[tokio::test]
async fn the_official_python_sdks_stream_across_a_resume() {
    let Some(py) = python_with("import openai, anthropic") else {
        return skip(
            "no Python with the openai and anthropic packages; run ./dev test to set one up",
        );
    };
    let s = setup("economy", "powerful").await;
    let script = format!("{}/tests/sdk/resume_sdk.py", env!("CARGO_MANIFEST_DIR"));
    let (base, key) = (format!("http://{}", s.gw.addr), s.gw.key.clone());
    let (expect_chat, expect_messages) = (
        format!("Hello from a {}", s.b.reply_text()),
        format!("Claude c1 says {}", s.c2.reply_text()),
    );
    let out = tokio::task::spawn_blocking(move || {
        Command::new(py)
            .arg(script)
            .env("TOLLGATE_BASE", base)
            .env("TOLLGATE_API_KEY", key)
            .env("EXPECT_CHAT", expect_chat)
            .env("EXPECT_MESSAGES", expect_messages)
            .output()
    })
    .await
    .unwrap()
    .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    assert!(
        out.status.success() && stdout.contains("sdk: all passed"),
        "stdout:\n{stdout}\nstderr:\n{}\ngateway:\n{}",
        String::from_utf8_lossy(&out.stderr),
        s.gw.log()
    );
}

#[tokio::test]
async fn a_bad_opt_in_is_refused_in_each_front_door_s_shape() {
    let s = setup("normal", "powerful").await;
    let auth = format!("Bearer {}", s.gw.key);
    let cases = [
        (
            "/v1/messages",
            json!({"model":"claude-1","max_tokens":10,"stream":true,"messages":[{"role":"user","content":"hi"}],"tollgate":{"resume":1}}),
        ),
        (
            "/v1/responses",
            json!({"model":"m1","input":"hi","stream":true,"tollgate":"on"}),
        ),
    ];
    for (path, body) in cases {
        let headers = [
            ("Authorization", auth.as_str()),
            ("anthropic-version", "2023-06-01"),
        ];
        let r = request(
            s.gw.addr,
            "POST",
            path,
            &headers,
            body.to_string().as_bytes(),
        )
        .await;
        assert_eq!(r.status, 400, "{path}: {}", r.text());
        let v = r.json();
        let message = v["error"]["message"].as_str().unwrap();
        assert!(message.starts_with("tollgate"), "{path}: {v}");
        if path == "/v1/messages" {
            assert_eq!(v["type"], "error", "Anthropic's shape: {v}");
        }
    }
    let headers = [
        ("Authorization", auth.as_str()),
        ("X-Tollgate-Resume", "yes please"),
    ];
    let body = json!({"model":"m1","input":"hi","stream":true});
    let r = request(
        s.gw.addr,
        "POST",
        "/v1/responses",
        &headers,
        body.to_string().as_bytes(),
    )
    .await;
    assert_eq!(r.status, 400, "{}", r.text());
    assert_eq!(
        s.a.chat_count() + s.c1.count(),
        0,
        "nothing reached a provider"
    );
}
