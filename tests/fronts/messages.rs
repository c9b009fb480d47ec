//! `POST /v1/messages`: Anthropic's Messages API in front, routed and billed like chat: to an
//! Anthropic provider nearly as sent (blocks the gateway does not interpret pass through), or
//! translated to an OpenAI-compatible provider and back; errors in Anthropic's shape; bad input
//! refused with nothing charged; `count_tokens` from the tokenizer.

use serde_json::{json, Value};
use tollgate_testkit::*;

fn config(a: &FakeAnthropic, o: &FakeOpenAi) -> String {
    format!(
        "{FAST_TIMEOUTS}{}{}{}{}",
        anthropic_provider("anth", &[a], ""),
        provider("oai", &[o], ""),
        "[[models]]\nid = \"claude-x-2025-01-01\"\nprovider = \"anth\"\nupstream_model = \"claude-x-latest\"\ntier = \"powerful\"\ninput_credits_per_1k = 3\noutput_credits_per_1k = 15\nmax_output_tokens = 2000\n\n",
        "[[models]]\nid = \"gpt-x-2025-01-01\"\nprovider = \"oai\"\ntier = \"economy\"\ninput_credits_per_1k = 1\noutput_credits_per_1k = 2\nmax_output_tokens = 2000\n\n",
    )
}

async fn messages(gw: &Gateway, body: &Value, key: Option<&str>) -> Response {
    let b = serde_json::to_vec(body).unwrap();
    let mut headers = vec![
        ("Content-Type", "application/json"),
        ("anthropic-version", "2023-06-01"),
    ];
    if let Some(k) = key {
        headers.push(("x-api-key", k));
    }
    request(gw.addr, "POST", "/v1/messages", &headers, &b).await
}

/// The Anthropic error shape, with this status and type.
fn anthropic_error(r: &Response, status: u16, ty: &str) -> Value {
    assert_eq!(r.status, status, "{}", r.text());
    let v = r.json();
    assert_eq!(v["type"], "error", "{v}");
    assert_eq!(v["error"]["type"], ty, "{v}");
    assert!(v["error"]["message"]
        .as_str()
        .is_some_and(|m| !m.is_empty()));
    v
}

fn events(text: &str) -> Vec<(String, Value)> {
    let mut out = Vec::new();
    let mut name = String::new();
    for line in text.lines() {
        if let Some(n) = line.strip_prefix("event: ") {
            name = n.to_string();
        } else if let Some(d) = line.strip_prefix("data: ") {
            out.push((name.clone(), serde_json::from_str(d).unwrap()));
        }
    }
    out
}

#[tokio::test]
async fn to_an_anthropic_provider_the_request_passes_through_and_is_charged() {
    let (a, o) = (
        FakeAnthropic::start("a").await,
        FakeOpenAi::start("o").await,
    );
    let gw = Gateway::start(tollgate_bin!(), &config(&a, &o)).await;
    let before = gw.balance(&gw.key).await;
    let body = json!({"model":"claude-x-2025-01-01","max_tokens":1500,"top_k":5,
        "thinking":{"type":"enabled","budget_tokens":1024},
        "system":[{"type":"text","text":"You are terse.","cache_control":{"type":"ephemeral"}}],
        "messages":[{"role":"user","content":[{"type":"text","text":"hi","cache_control":{"type":"ephemeral"}}]}]});
    let r = messages(&gw, &body, Some(&gw.key)).await;
    assert_eq!(r.status, 200, "{}", r.text());
    let v = r.json();
    assert_eq!(v["type"], "message");
    assert_eq!(v["model"], "claude-x-2025-01-01");
    // Thinking was asked for: Claude's thinking block and its signature come back as sent.
    assert_eq!(
        v["content"][0],
        json!({"type": "thinking", "thinking": tollgate_testkit::anthropic::THOUGHT,
               "signature": tollgate_testkit::anthropic::SIGNATURE})
    );
    assert_eq!(v["content"][1]["text"], a.reply_text());
    assert_eq!(v["stop_reason"], "end_turn");
    let up = a.requests().pop().unwrap().json();
    let mut expected = body.clone();
    expected["model"] = json!("claude-x-latest");
    assert_eq!(up, expected, "everything but the model passes through");
    let words = a.reply_words() as i64;
    let cost = FakeAnthropic::INPUT_TOKENS as i64 * 3_000 + words * 15_000;
    assert_eq!(before - gw.balance(&gw.key).await, cost);
    // The stream passes through too, event by event, with our model name.
    let mut s = body.clone();
    s["stream"] = json!(true);
    let r = messages(&gw, &s, Some(&gw.key)).await;
    assert_eq!(r.status, 200, "{}", r.text());
    let evs = events(&r.text());
    let names: Vec<&str> = evs.iter().map(|(n, _)| n.as_str()).collect();
    assert_eq!(names.first(), Some(&"message_start"));
    assert!(names.contains(&"ping"));
    assert_eq!(&names[names.len() - 2..], ["message_delta", "message_stop"]);
    assert_eq!(evs[0].1["message"]["model"], "claude-x-2025-01-01");
    let text: String = evs
        .iter()
        .filter_map(|(_, d)| d["delta"]["text"].as_str())
        .collect();
    assert_eq!(text, a.reply_text());
}

#[tokio::test]
async fn to_an_openai_provider_the_request_and_reply_are_translated() {
    let (a, o) = (
        FakeAnthropic::start("a").await,
        FakeOpenAi::start("o").await,
    );
    let gw = Gateway::start(tollgate_bin!(), &config(&a, &o)).await;
    let before = gw.balance(&gw.key).await;
    let body = json!({"model":"gpt-x-2025-01-01","max_tokens":100,"system":"Be brief.",
        "messages":[{"role":"user","content":"hi"}]});
    // Bearer works as well as x-api-key.
    let b = serde_json::to_vec(&body).unwrap();
    let auth = format!("Bearer {}", gw.key);
    let r = request(
        gw.addr,
        "POST",
        "/v1/messages",
        &[("Authorization", &auth)],
        &b,
    )
    .await;
    assert_eq!(r.status, 200, "{}", r.text());
    let v = r.json();
    assert_eq!(v["type"], "message");
    assert_eq!(v["role"], "assistant");
    assert_eq!(v["model"], "gpt-x-2025-01-01");
    assert_eq!(v["content"][0]["type"], "text");
    assert!(v["content"][0]["text"]
        .as_str()
        .unwrap()
        .starts_with("Hello from o"));
    assert_eq!(v["stop_reason"], "end_turn");
    let up = o.requests().pop().unwrap();
    assert_eq!(up.path, "/v1/chat/completions");
    let ub = up.json();
    assert_eq!(
        ub["messages"][0],
        json!({"role":"system","content":"Be brief."})
    );
    assert_eq!(ub["max_tokens"], 100);
    let (p, c) = (
        v["usage"]["input_tokens"].as_i64().unwrap(),
        v["usage"]["output_tokens"].as_i64().unwrap(),
    );
    assert_eq!(before - gw.balance(&gw.key).await, p * 1_000 + c * 2_000);
    // A stream comes back as Anthropic's events.
    let mut s = body.clone();
    s["stream"] = json!(true);
    let r = messages(&gw, &s, Some(&gw.key)).await;
    assert_eq!(r.status, 200, "{}", r.text());
    let evs = events(&r.text());
    let names: Vec<&str> = evs.iter().map(|(n, _)| n.as_str()).collect();
    assert_eq!(names[0], "message_start");
    assert_eq!(names[1], "content_block_start");
    assert_eq!(
        &names[names.len() - 3..],
        ["content_block_stop", "message_delta", "message_stop"]
    );
    let text: String = evs
        .iter()
        .filter_map(|(_, d)| d["delta"]["text"].as_str())
        .collect();
    assert!(text.starts_with("Hello from o"), "{text}");
    let delta = &evs[evs.len() - 2].1;
    assert_eq!(delta["delta"]["stop_reason"], "end_turn");
    assert!(delta["usage"]["output_tokens"].as_u64().unwrap() > 0);
}

#[tokio::test]
async fn tools_work_both_ways() {
    let (a, o) = (
        FakeAnthropic::start("a").await,
        FakeOpenAi::start("o").await,
    );
    let gw = Gateway::start(tollgate_bin!(), &config(&a, &o)).await;
    let tools = json!([{"name":"get_weather","description":"Weather","input_schema":{"type":"object","properties":{"city":{"type":"string"}}}}]);
    // To OpenAI: the tool call comes back as a tool_use block.
    let r = messages(
        &gw,
        &json!({"model":"gpt-x-2025-01-01","max_tokens":100,"tools":tools,"tool_choice":{"type":"any"},"messages":[{"role":"user","content":"weather?"}]}),
        Some(&gw.key),
    )
    .await;
    assert_eq!(r.status, 200, "{}", r.text());
    let v = r.json();
    assert_eq!(v["stop_reason"], "tool_use");
    let block = v["content"]
        .as_array()
        .unwrap()
        .iter()
        .find(|b| b["type"] == "tool_use")
        .unwrap()
        .clone();
    assert_eq!(block["name"], "get_weather");
    assert_eq!(block["input"], json!({"city":"Paris"}));
    let up = o.requests().pop().unwrap().json();
    assert_eq!(up["tools"][0]["function"]["name"], "get_weather");
    assert_eq!(up["tool_choice"], "required");
    // The result goes back as a tool message.
    let r = messages(
        &gw,
        &json!({"model":"gpt-x-2025-01-01","max_tokens":100,"tools":tools,"messages":[
            {"role":"user","content":"weather?"},
            {"role":"assistant","content":[block]},
            {"role":"user","content":[{"type":"tool_result","tool_use_id":"call_1","content":"18C"}]}]}),
        Some(&gw.key),
    )
    .await;
    assert_eq!(r.status, 200, "{}", r.text());
    let up = o.requests().pop().unwrap().json();
    let msgs = up["messages"].as_array().unwrap();
    assert_eq!(msgs[1]["tool_calls"][0]["function"]["name"], "get_weather");
    assert_eq!(
        msgs[2],
        json!({"role":"tool","tool_call_id":"call_1","content":"18C"})
    );
    // To Anthropic: two parallel tool_use blocks pass through.
    a.set_mode(AnthropicMode::Tools);
    let r = messages(
        &gw,
        &json!({"model":"claude-x-2025-01-01","max_tokens":100,"tools":tools,"stream":true,"messages":[{"role":"user","content":"weather?"}]}),
        Some(&gw.key),
    )
    .await;
    assert_eq!(r.status, 200, "{}", r.text());
    let evs = events(&r.text());
    let starts: Vec<&Value> = evs
        .iter()
        .filter(|(n, d)| n == "content_block_start" && d["content_block"]["type"] == "tool_use")
        .map(|(_, d)| d)
        .collect();
    assert_eq!(starts.len(), 2);
}

#[tokio::test]
async fn errors_are_in_anthropics_shape_and_bad_input_costs_nothing() {
    let (a, o) = (
        FakeAnthropic::start("a").await,
        FakeOpenAi::start("o").await,
    );
    let gw = Gateway::start(tollgate_bin!(), &config(&a, &o)).await;
    let before = gw.balance(&gw.key).await;
    let ok = json!({"model":"claude-x-2025-01-01","max_tokens":10,"messages":[{"role":"user","content":"hi"}]});
    anthropic_error(&messages(&gw, &ok, None).await, 401, "authentication_error");
    anthropic_error(
        &messages(&gw, &ok, Some("tg_wrong")).await,
        401,
        "authentication_error",
    );
    let mut unknown = ok.clone();
    unknown["model"] = json!("no-such-model");
    anthropic_error(
        &messages(&gw, &unknown, Some(&gw.key)).await,
        404,
        "not_found_error",
    );
    let bad = [
        (
            json!({"model":"claude-x-2025-01-01","messages":[{"role":"user","content":"hi"}]}),
            "max_tokens",
        ),
        (
            json!({"model":"claude-x-2025-01-01","max_tokens":10,"messages":[{"role":"robot","content":"hi"}]}),
            "role",
        ),
        (
            json!({"model":"claude-x-2025-01-01","max_tokens":10,"messages":[{"role":"user","content":[{"type":"text"}]}]}),
            "text",
        ),
        (
            json!({"model":"claude-x-2025-01-01","max_tokens":10,"messages":[{"role":"user","content":[{"type":"image"}]}]}),
            "source",
        ),
        (
            json!({"model":"claude-x-2025-01-01","max_tokens":10,"messages":[]}),
            "messages",
        ),
        (
            json!({"model":"claude-x-2025-01-01","max_tokens":0,"messages":[{"role":"user","content":"hi"}]}),
            "max_tokens",
        ),
    ];
    for (body, field) in bad {
        let v = anthropic_error(
            &messages(&gw, &body, Some(&gw.key)).await,
            400,
            "invalid_request_error",
        );
        assert!(
            v["error"]["message"].as_str().unwrap().contains(field),
            "{field}: {v}"
        );
    }
    for raw in [&b"{\"model\":"[..], b"[]", b""] {
        let r = request(
            gw.addr,
            "POST",
            "/v1/messages",
            &[("x-api-key", &gw.key)],
            raw,
        )
        .await;
        anthropic_error(&r, 400, "invalid_request_error");
    }
    // Oversized: past max_body_bytes (8 MiB in tests), refused from Content-Length alone.
    let head = format!(
        "POST /v1/messages HTTP/1.1\r\nHost: x\r\nx-api-key: {}\r\nContent-Length: {}\r\n\r\n",
        gw.key,
        9 * 1024 * 1024
    );
    let v = anthropic_error(
        &raw_request(gw.addr, head.as_bytes()).await,
        400,
        "invalid_request_error",
    );
    assert!(v["error"]["message"].as_str().unwrap().contains("limit"));
    assert_eq!(a.count() + o.chat_count(), 0);
    assert_eq!(gw.balance(&gw.key).await, before);
    assert_eq!(
        gw.usage(&gw.key).await["recent"].as_array().unwrap().len(),
        0
    );
    assert!(gw.is_healthy().await);
}

#[tokio::test]
async fn every_upstream_overloaded_is_529_overloaded_error() {
    let (a, o) = (
        FakeAnthropic::start("a").await,
        FakeOpenAi::start("o").await,
    );
    let cfg = format!(
        "{FAST_TIMEOUTS}{}{}",
        anthropic_provider("anth", &[&a], ""),
        "[[models]]\nid = \"claude-x-2025-01-01\"\nprovider = \"anth\"\ntier = \"powerful\"\ninput_credits_per_1k = 3\noutput_credits_per_1k = 15\n\n",
    );
    let _ = o;
    let gw = Gateway::start(tollgate_bin!(), &cfg).await;
    let before = gw.balance(&gw.key).await;
    a.set_mode(AnthropicMode::OverloadedEvent);
    for stream in [false, true] {
        let body = json!({"model":"claude-x-2025-01-01","max_tokens":10,"stream":stream,"messages":[{"role":"user","content":"hi"}]});
        anthropic_error(
            &messages(&gw, &body, Some(&gw.key)).await,
            529,
            "overloaded_error",
        );
    }
    assert_eq!(gw.balance(&gw.key).await, before);
    // The OpenAI surface keeps SPEC.md's 502 for the same failure.
    gw.chat(json!({"model":"claude-x-2025-01-01","messages":user("hi")}))
        .await
        .error(502, "upstream_error");
}

#[tokio::test]
async fn count_tokens_answers_from_the_tokenizer() {
    let (a, o) = (
        FakeAnthropic::start("a").await,
        FakeOpenAi::start("o").await,
    );
    let gw = Gateway::start(tollgate_bin!(), &config(&a, &o)).await;
    let count = |body: Value| {
        let (addr, key) = (gw.addr, gw.key.clone());
        async move {
            let b = serde_json::to_vec(&body).unwrap();
            request(
                addr,
                "POST",
                "/v1/messages/count_tokens",
                &[("x-api-key", &key)],
                &b,
            )
            .await
        }
    };
    let short =
        count(json!({"model":"claude-x-2025-01-01","messages":[{"role":"user","content":"hi"}]}))
            .await;
    assert_eq!(short.status, 200, "{}", short.text());
    let long = count(json!({"model":"claude-x-2025-01-01","system":"You are a helpful assistant.","messages":[{"role":"user","content":"hello there, how are you today?"}]})).await;
    let (s, l) = (
        short.json()["input_tokens"].as_u64().unwrap(),
        long.json()["input_tokens"].as_u64().unwrap(),
    );
    assert!(s > 0 && l > s, "{s} {l}");
    anthropic_error(
        &count(json!({"model":"nope","messages":[{"role":"user","content":"hi"}]})).await,
        404,
        "not_found_error",
    );
    anthropic_error(
        &count(json!({"model":"claude-x-2025-01-01","messages":"hi"})).await,
        400,
        "invalid_request_error",
    );
    assert_eq!(a.count() + o.chat_count(), 0);
}

#[tokio::test]
async fn an_anthropic_client_fails_over_across_kinds_both_ways() {
    let (a, o) = (
        FakeAnthropic::start("a").await,
        FakeOpenAi::start("o").await,
    );
    let tier = |first: &str, second: &str| {
        format!(
            "{FAST_TIMEOUTS}{}{}{first}{second}",
            anthropic_provider("anth", &[&a], ""),
            provider("oai", &[&o], ""),
        )
    };
    let claude = "[[models]]\nid = \"claude-x-2025-01-01\"\nprovider = \"anth\"\ntier = \"powerful\"\ninput_credits_per_1k = 3\noutput_credits_per_1k = 15\n\n";
    let gpt = "[[models]]\nid = \"gpt-p-2025-01-01\"\nprovider = \"oai\"\ntier = \"powerful\"\ninput_credits_per_1k = 1\noutput_credits_per_1k = 2\n\n";
    let gw = Gateway::start(tollgate_bin!(), &tier(claude, gpt)).await;
    a.set_mode(AnthropicMode::OverloadedEvent);
    for stream in [false, true] {
        let before = gw.balance(&gw.key).await;
        let body = json!({"model":"claude-x-2025-01-01","max_tokens":50,"stream":stream,"messages":[{"role":"user","content":"hi"}]});
        let r = messages(&gw, &body, Some(&gw.key)).await;
        assert_eq!(r.status, 200, "{}", r.text());
        let model = if stream {
            events(&r.text())[0].1["message"]["model"].clone()
        } else {
            r.json()["model"].clone()
        };
        assert_eq!(model, "gpt-p-2025-01-01", "stream {stream}");
        let row = gw.usage(&gw.key).await["recent"][0].clone();
        assert_eq!(row["model_used"], "gpt-p-2025-01-01");
        let (p, c) = (
            row["prompt_tokens"].as_i64().unwrap(),
            row["completion_tokens"].as_i64().unwrap(),
        );
        assert_eq!(
            before - gw.balance(&gw.key).await,
            p * 1_000 + c * 2_000,
            "at the sibling's rates"
        );
    }
    // The other way: the OpenAI-compatible model fails, Claude serves the Anthropic client.
    let gw = Gateway::start(tollgate_bin!(), &tier(gpt, claude)).await;
    a.set_mode(AnthropicMode::Ok);
    o.set_mode(Mode::Status(500));
    let before = gw.balance(&gw.key).await;
    let body = json!({"model":"gpt-p-2025-01-01","max_tokens":50,"messages":[{"role":"user","content":"hi"}]});
    let r = messages(&gw, &body, Some(&gw.key)).await;
    assert_eq!(r.status, 200, "{}", r.text());
    assert_eq!(r.json()["model"], "claude-x-2025-01-01");
    let words = a.reply_words() as i64;
    let cost = FakeAnthropic::INPUT_TOKENS as i64 * 3_000 + words * 15_000;
    assert_eq!(before - gw.balance(&gw.key).await, cost);
}

#[tokio::test]
async fn guests_reach_guest_models_only_and_count_tokens_refuses_garbage() {
    let (a, o) = (
        FakeAnthropic::start("a").await,
        FakeOpenAi::start("o").await,
    );
    let cfg = format!(
        "{}[[models]]\nid = \"claude-free-2025-01-01\"\nprovider = \"anth\"\ntier = \"economy\"\ninput_credits_per_1k = 1\noutput_credits_per_1k = 1\nguest = true\n\n",
        config(&a, &o)
    );
    let gw = Gateway::start(tollgate_bin!(), &cfg).await;
    let body = |m: &str| json!({"model": m, "max_tokens": 10, "messages": [{"role":"user","content":"hi"}]});
    let r = messages(&gw, &body("claude-free-2025-01-01"), None).await;
    assert_eq!(r.status, 200, "{}", r.text());
    assert_eq!(r.json()["type"], "message");
    anthropic_error(
        &messages(&gw, &body("claude-x-2025-01-01"), None).await,
        401,
        "authentication_error",
    );
    for raw in [&b"{"[..], b"[]", b""] {
        let r = request(
            gw.addr,
            "POST",
            "/v1/messages/count_tokens",
            &[("x-api-key", &gw.key)],
            raw,
        )
        .await;
        anthropic_error(&r, 400, "invalid_request_error");
    }
}
