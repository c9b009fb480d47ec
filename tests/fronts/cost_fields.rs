//! Cost in every response: a metered reply's `usage.cost` is what the balance fell by, and
//! `usage.cost_details` its parts at the rates of the model used, on the three wire formats
//! (chat completions, Messages, Responses), JSON and streamed, to an OpenAI-compatible and an
//! Anthropic provider; `X-Credits-Charged` on JSON replies; nothing for a guest. The price keys
//! that follow providers: cached input, one-hour cache writes, reasoning shown. The official
//! `openai` and `anthropic` Python SDKs read the fields. Runs on SQLite, and on Postgres +
//! Redis when set.

use std::process::Command;

use serde_json::{json, Value};
use tollgate_testkit::anthropic::AnthropicMode;
use tollgate_testkit::openai::Mode;
use tollgate_testkit::*;

/// `claude` on an Anthropic provider at Anthropic's prices (per 1K: input 3, output 15, cache
/// reads 0.3, five-minute writes 3.75, one-hour writes 6); `gpt` on an OpenAI-compatible one
/// (input 1, output 2, cached input 0.5); `free`, a guest model.
fn config(a: &FakeAnthropic, o: &FakeOpenAi) -> String {
    format!(
        "{FAST_TIMEOUTS}{}{}{}{}{}",
        anthropic_provider("anth", &[a], ""),
        provider("oai", &[o], ""),
        "[[models]]\nid = \"claude\"\nprovider = \"anth\"\ntier = \"powerful\"\ninput_credits_per_1k = 3\noutput_credits_per_1k = 15\ncache_read_credits_per_1k = 0.3\ncache_write_credits_per_1k = 3.75\ncache_write_1h_credits_per_1k = 6\nmax_output_tokens = 2000\n\n",
        "[[models]]\nid = \"gpt\"\nprovider = \"oai\"\ntier = \"economy\"\ninput_credits_per_1k = 1\noutput_credits_per_1k = 2\ncached_input_credits_per_1k = 0.5\nmax_output_tokens = 2000\n\n",
        "[[models]]\nid = \"free\"\nprovider = \"oai\"\ntier = \"normal\"\ninput_credits_per_1k = 1\noutput_credits_per_1k = 2\nguest = true\n\n",
    )
}

/// A request to one of the three front doors.
#[derive(Clone, Copy, Debug)]
enum Door {
    Chat,
    Messages,
    Responses,
}

async fn send(gw: &Gateway, door: Door, model: &str, stream: bool) -> Response {
    let hi = json!([{"role": "user", "content": "Say hello"}]);
    let (path, body) = match door {
        Door::Chat => (
            "/v1/chat/completions",
            json!({"model": model, "messages": hi, "stream": stream,
                   "stream_options": if stream { json!({"include_usage": true}) } else { Value::Null }}),
        ),
        Door::Messages => (
            "/v1/messages",
            json!({"model": model, "max_tokens": 500, "messages": hi, "stream": stream}),
        ),
        Door::Responses => (
            "/v1/responses",
            json!({"model": model, "input": "Say hello", "stream": stream}),
        ),
    };
    let mut body = body;
    if body["stream_options"].is_null() {
        body.as_object_mut().unwrap().remove("stream_options");
    }
    let auth = format!("Bearer {}", gw.key);
    let headers = [
        ("Content-Type", "application/json"),
        ("Authorization", auth.as_str()),
        ("anthropic-version", "2023-06-01"),
    ];
    request(gw.addr, "POST", path, &headers, body.to_string().as_bytes()).await
}

/// The reply's usage object: the JSON reply's, or the final one of a stream (the chat usage
/// chunk, the Anthropic `message_delta`, the `response.completed` response's).
fn final_usage(door: Door, r: &Response, stream: bool) -> Value {
    assert_eq!(r.status, 200, "{}", r.text());
    if !stream {
        return r.json()["usage"].clone();
    }
    let events: Vec<Value> = r
        .sse_data()
        .iter()
        .filter(|d| *d != "[DONE]")
        .map(|d| serde_json::from_str(d).unwrap())
        .collect();
    let usage = match door {
        Door::Chat => events
            .iter()
            .rev()
            .find(|e| !e["usage"].is_null())
            .map(|e| {
                assert_eq!(e["choices"], json!([]), "the usage chunk: {e}");
                e["usage"].clone()
            }),
        Door::Messages => events
            .iter()
            .find(|e| e["type"] == "message_delta")
            .map(|e| e["usage"].clone()),
        Door::Responses => events
            .iter()
            .find(|e| e["type"] == "response.completed")
            .map(|e| e["response"]["usage"].clone()),
    };
    usage.unwrap_or_else(|| panic!("no final usage in {}", r.text()))
}

/// Thousandths of a µcr, from credits with up to nine decimals.
fn nanos(v: &Value) -> i64 {
    (v.as_f64().unwrap() * 1e9).round() as i64
}

/// Asserts the cost fields of `usage` and returns `usage.cost` in µcr: the parts, summed and
/// rounded up once, are the cost.
fn cost_of(usage: &Value) -> i64 {
    let cost = micros(&usage["cost"]);
    let d = &usage["cost_details"];
    let parts: i64 = ["input", "output", "cache_read", "cache_write"]
        .iter()
        .map(|k| nanos(&d[k]))
        .sum();
    assert_eq!(
        (parts + 999) / 1000,
        cost,
        "the parts add up to the cost: {usage}"
    );
    cost
}

#[tokio::test]
async fn every_reply_tells_its_cost_and_it_is_what_the_balance_fell_by() {
    let (a, o) = (
        FakeAnthropic::start("c").await,
        FakeOpenAi::start("g").await,
    );
    let gw = Gateway::start(tollgate_bin!(), &config(&a, &o)).await;
    for door in [Door::Chat, Door::Messages, Door::Responses] {
        for model in ["gpt", "claude"] {
            for stream in [false, true] {
                let case = format!("{door:?} to {model}, stream {stream}");
                let before = gw.balance(&gw.key).await;
                let r = send(&gw, door, model, stream).await;
                let usage = final_usage(door, &r, stream);
                let cost = cost_of(&usage);
                let fell = before - gw.balance(&gw.key).await;
                assert!(cost > 0, "{case}: {usage}");
                assert_eq!(cost, fell, "{case}: {usage}");
                let header = r.header("x-credits-charged");
                if stream {
                    assert_eq!(header, None, "{case}: unknown when the head went out");
                } else {
                    let h: f64 = header.expect("X-Credits-Charged").parse().unwrap();
                    assert_eq!(micros(&json!(h)), cost, "{case}");
                }
            }
        }
    }
}

#[tokio::test]
async fn a_guest_is_told_no_cost() {
    let (a, o) = (
        FakeAnthropic::start("c").await,
        FakeOpenAi::start("g").await,
    );
    let gw = Gateway::start(tollgate_bin!(), &config(&a, &o)).await;
    let hi = json!([{"role": "user", "content": "hi"}]);
    let r = gw
        .chat_as(None, &json!({"model": "free", "messages": hi}))
        .await;
    assert_eq!(r.status, 200, "{}", r.text());
    assert!(r.json()["usage"].get("cost").is_none(), "{}", r.text());
    assert_eq!(r.header("x-credits-charged"), None);
    let body = json!({"model": "free", "messages": hi, "stream": true,
                      "stream_options": {"include_usage": true}});
    let r = gw.chat_as(None, &body).await;
    assert!(r.text().contains("\"usage\""), "{}", r.text());
    assert!(!r.text().contains("\"cost\""), "{}", r.text());

    // The price list shows every rate a reply's cost_details is priced at, each falling back
    // as settlement does (a one-hour write to the five-minute rate, that to the input rate).
    let p = get(gw.addr, "/v1/models/pricing").await.json();
    let rates = |id: &str| {
        let m = p["data"]
            .as_array()
            .unwrap()
            .iter()
            .find(|m| m["id"] == id)
            .unwrap()
            .clone();
        [
            m["cached_input_credits_per_1k"].clone(),
            m["cache_write_credits_per_1k"].clone(),
            m["cache_write_1h_credits_per_1k"].clone(),
        ]
    };
    assert_eq!(rates("claude"), [json!(0.3), json!(3.75), json!(6.0)]);
    assert_eq!(rates("gpt"), [json!(0.5), json!(1.0), json!(1.0)]);
    assert_eq!(rates("free"), [json!(1.0), json!(1.0), json!(1.0)]);
}

#[tokio::test]
async fn cached_input_is_billed_at_its_rate_and_reasoning_as_output_and_shown() {
    let (a, o) = (
        FakeAnthropic::start("c").await,
        FakeOpenAi::start("g").await,
    );
    o.set_mode(Mode::Cached(1024, 40));
    let gw = Gateway::start(tollgate_bin!(), &config(&a, &o)).await;
    let words = o.reply_words() as i64;
    // 11 uncached prompt tokens at 1 credit per 1K, 1,024 cached at 0.5, the words and 40
    // reasoning tokens at 2.
    let expected = 11 * 1_000 + 1_024 * 500 + (words + 40) * 2_000;
    for stream in [false, true] {
        let before = gw.balance(&gw.key).await;
        let r = send(&gw, Door::Chat, "gpt", stream).await;
        let usage = final_usage(Door::Chat, &r, stream);
        assert_eq!(before - gw.balance(&gw.key).await, expected, "{usage}");
        assert_eq!(cost_of(&usage), expected);
        assert_eq!(
            nanos(&usage["cost_details"]["cache_read"]),
            1_024 * 500 * 1_000
        );
        assert_eq!(usage["prompt_tokens_details"]["cached_tokens"], 1024);
        assert_eq!(usage["completion_tokens_details"]["reasoning_tokens"], 40);
        let row = &gw.usage(&gw.key).await["recent"][0];
        assert_eq!(micros(&row["credits"]), expected);
    }
    // The Responses API shows the same parts in its own names.
    let r = send(&gw, Door::Responses, "gpt", false).await;
    let usage = &r.json()["usage"];
    assert_eq!(
        usage["input_tokens_details"]["cached_tokens"], 1024,
        "{usage}"
    );
    assert_eq!(
        usage["output_tokens_details"]["reasoning_tokens"], 40,
        "{usage}"
    );
    assert_eq!(cost_of(usage), expected);
}

#[tokio::test]
async fn one_hour_cache_writes_are_accepted_and_billed_at_their_own_rate() {
    let (a, o) = (
        FakeAnthropic::start("c").await,
        FakeOpenAi::start("g").await,
    );
    a.set_mode(AnthropicMode::CacheByTtl(100, 200, 50));
    let gw = Gateway::start(tollgate_bin!(), &config(&a, &o)).await;
    let words = a.reply_words() as i64;
    let expected = FakeAnthropic::INPUT_TOKENS as i64 * 3_000
        + 100 * 3_750
        + 200 * 6_000
        + 50 * 300
        + words * 15_000;
    let body = json!({"model": "claude", "max_tokens": 500, "system": [
        {"type": "text", "text": "A long document.", "cache_control": {"type": "ephemeral", "ttl": "1h"}}],
        "messages": [{"role": "user", "content": "Summarize"}]});
    for stream in [false, true] {
        let mut body = body.clone();
        body["stream"] = json!(stream);
        let before = gw.balance(&gw.key).await;
        let auth = format!("Bearer {}", gw.key);
        let headers = [
            ("Content-Type", "application/json"),
            ("Authorization", auth.as_str()),
        ];
        let r = request(
            gw.addr,
            "POST",
            "/v1/messages",
            &headers,
            body.to_string().as_bytes(),
        )
        .await;
        let usage = final_usage(Door::Messages, &r, stream);
        assert_eq!(before - gw.balance(&gw.key).await, expected, "{usage}");
        assert_eq!(cost_of(&usage), expected);
        assert_eq!(
            nanos(&usage["cost_details"]["cache_write"]),
            (100 * 3_750 + 200 * 6_000) * 1_000
        );
        // The cache lifetime reached Anthropic as the client wrote it.
        let sent = a.requests().last().unwrap().json();
        assert_eq!(sent["system"][0]["cache_control"]["ttl"], "1h");
    }
    // A lifetime Anthropic does not offer is refused, naming the field, and costs nothing.
    let mut bad = body.clone();
    bad["system"][0]["cache_control"]["ttl"] = json!("2h");
    let before = gw.balance(&gw.key).await;
    let auth = format!("Bearer {}", gw.key);
    let headers = [
        ("Content-Type", "application/json"),
        ("Authorization", auth.as_str()),
    ];
    let r = request(
        gw.addr,
        "POST",
        "/v1/messages",
        &headers,
        bad.to_string().as_bytes(),
    )
    .await;
    assert_eq!(r.status, 400, "{}", r.text());
    assert!(r.text().contains("cache_control.ttl"), "{}", r.text());
    assert_eq!(gw.balance(&gw.key).await, before);
}

#[tokio::test]
async fn the_official_python_sdks_read_the_cost_fields() {
    let Some(py) = python_with("import openai, anthropic") else {
        return skip(
            "no Python with the openai and anthropic packages; run ./dev test to set one up",
        );
    };
    let (a, o) = (
        FakeAnthropic::start("c").await,
        FakeOpenAi::start("g").await,
    );
    let gw = Gateway::start(tollgate_bin!(), &config(&a, &o)).await;
    let before = gw.balance(&gw.key).await;
    let script = format!("{}/tests/sdk/cost_fields.py", env!("CARGO_MANIFEST_DIR"));
    let (url, key) = (format!("http://{}", gw.addr), gw.key.clone());
    let out = tokio::task::spawn_blocking(move || {
        Command::new(py)
            .arg(script)
            .env("TOLLGATE_URL", url)
            .env("TOLLGATE_API_KEY", key)
            .output()
    })
    .await
    .unwrap()
    .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        out.status.success() && stdout.contains("sdk: all passed"),
        "SDK script failed\nstdout:\n{stdout}\nstderr:\n{stderr}\ngateway:\n{}",
        gw.log()
    );
    // What the SDKs read, summed, is what the balance fell by.
    let told: i64 = stdout
        .lines()
        .filter_map(|l| l.strip_prefix("COST="))
        .map(|c| micros(&json!(c.trim().parse::<f64>().unwrap())))
        .sum();
    assert_eq!(told, before - gw.balance(&gw.key).await, "{stdout}");
}
