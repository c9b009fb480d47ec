//! Provider kind `anthropic` behind the OpenAI chat API: the request translated to the
//! Messages API (path, headers, system, tools, `max_tokens` always sent), the reply and every
//! stream event translated back, parallel tool calls, prompt-cache tokens counted and billed at
//! their rates, Anthropic's failures failed over across kinds, and what cannot be translated
//! refused before anything is held. Runs on SQLite and on Postgres + Redis when set.

use serde_json::{json, Value};
use tollgate_testkit::*;

/// Rates: input 3, output 15 credits per 1K; cache reads 0.3, cache writes 3.75.
fn claude(extra: &str) -> String {
    format!("[[models]]\nid = \"claude-x-2025-01-01\"\nprovider = \"anth\"\nupstream_model = \"claude-x-latest\"\ntier = \"powerful\"\ninput_credits_per_1k = 3\noutput_credits_per_1k = 15\ncache_read_credits_per_1k = 0.3\ncache_write_credits_per_1k = 3.75\nmax_output_tokens = 2000\n{extra}\n")
}

fn gpt() -> String {
    "[[models]]\nid = \"gpt-x-2025-01-01\"\nprovider = \"oai\"\ntier = \"powerful\"\ninput_credits_per_1k = 1\noutput_credits_per_1k = 2\nmax_output_tokens = 2000\n\n".to_string()
}

async fn gateway(a: &FakeAnthropic, o: &FakeOpenAi, claude_first: bool) -> Gateway {
    let models = if claude_first {
        format!("{}{}", claude(""), gpt())
    } else {
        format!("{}{}", gpt(), claude(""))
    };
    let cfg = format!(
        "{FAST_TIMEOUTS}{}{}{models}",
        anthropic_provider("anth", &[a], ""),
        provider("oai", &[o], ""),
    );
    Gateway::start(tollgate_bin!(), &cfg).await
}

/// µcr at claude's rates (3, 15, 0.3 and 3.75 credits per 1K: µcr per token ×1,000).
fn claude_cost(prompt: i64, cache_write: i64, cache_read: i64, output: i64) -> i64 {
    prompt * 3_000 + cache_write * 3_750 + cache_read * 300 + output * 15_000
}

fn sse_data(text: &str) -> Vec<String> {
    text.lines()
        .filter_map(|l| l.strip_prefix("data: "))
        .map(str::to_owned)
        .collect()
}

#[tokio::test]
async fn a_json_reply_is_translated_and_charged_exactly() {
    let (a, o) = (
        FakeAnthropic::start("a").await,
        FakeOpenAi::start("o").await,
    );
    let gw = gateway(&a, &o, true).await;
    let before = gw.balance(&gw.key).await;
    let r = gw
        .chat(json!({"model":"claude-x-2025-01-01","max_tokens":300,"stop":"END","temperature":1.6,
            "messages":[{"role":"system","content":"Be brief."},{"role":"developer","content":"Use English."},{"role":"user","content":"hi"}]}))
        .await;
    assert_eq!(r.status, 200, "{}", r.text());
    let v = r.json();
    assert_eq!(v["object"], "chat.completion");
    assert_eq!(v["model"], "claude-x-2025-01-01");
    assert_eq!(v["choices"][0]["message"]["content"], a.reply_text());
    assert_eq!(v["choices"][0]["finish_reason"], "stop");
    let words = a.reply_words() as i64;
    assert_eq!(v["usage"]["prompt_tokens"], FakeAnthropic::INPUT_TOKENS);
    assert_eq!(v["usage"]["completion_tokens"], words);
    // What went upstream: the Messages API, our key for it, the version, the translation.
    let up = a.requests().pop().unwrap();
    assert_eq!(up.path, "/v1/messages");
    assert_eq!(up.header("x-api-key"), Some(FAKE_ANTHROPIC_KEY));
    assert_eq!(up.header("anthropic-version"), Some("2023-06-01"));
    assert_eq!(up.header("authorization"), None);
    let b = up.json();
    assert_eq!(b["model"], "claude-x-latest");
    assert_eq!(b["max_tokens"], 300);
    assert_eq!(b["system"], "Be brief.\n\nUse English.");
    assert_eq!(
        b["messages"],
        json!([{"role":"user","content":[{"type":"text","text":"hi"}]}])
    );
    assert_eq!(b["stop_sequences"], json!(["END"]));
    assert_eq!(b["temperature"], 1.0, "clamped to Anthropic's range");
    let charged = before - gw.balance(&gw.key).await;
    assert_eq!(
        charged,
        claude_cost(FakeAnthropic::INPUT_TOKENS as i64, 0, 0, words)
    );
    // Without max_tokens the model's most is sent: the Messages API requires one.
    gw.chat(json!({"model":"claude-x-2025-01-01","messages":user("hi")}))
        .await;
    assert_eq!(a.requests().pop().unwrap().json()["max_tokens"], 2000);
}

#[tokio::test]
async fn a_stream_translates_every_event_and_reports_usage() {
    let (a, o) = (
        FakeAnthropic::start("a").await,
        FakeOpenAi::start("o").await,
    );
    let gw = gateway(&a, &o, true).await;
    let before = gw.balance(&gw.key).await;
    let r = gw
        .chat(json!({"model":"claude-x-2025-01-01","stream":true,"stream_options":{"include_usage":true},"messages":user("hi")}))
        .await;
    assert_eq!(r.status, 200, "{}", r.text());
    let data = sse_data(&r.text());
    assert_eq!(data.last().map(String::as_str), Some("[DONE]"));
    let chunks: Vec<Value> = data[..data.len() - 1]
        .iter()
        .map(|d| serde_json::from_str(d).unwrap())
        .collect();
    let text: String = chunks
        .iter()
        .filter_map(|c| c["choices"][0]["delta"]["content"].as_str())
        .collect();
    assert_eq!(text, a.reply_text());
    assert!(chunks.iter().all(|c| c["model"] == "claude-x-2025-01-01"));
    let finishes: Vec<&Value> = chunks
        .iter()
        .filter(|c| !c["choices"][0]["finish_reason"].is_null())
        .map(|c| &c["choices"][0]["finish_reason"])
        .collect();
    assert_eq!(finishes, [&json!("stop")]);
    let usage = &chunks.last().unwrap()["usage"];
    let words = a.reply_words() as i64;
    assert_eq!(usage["prompt_tokens"], FakeAnthropic::INPUT_TOKENS);
    assert_eq!(usage["completion_tokens"], words);
    assert_eq!(a.requests().pop().unwrap().json()["stream"], true);
    let charged = before - gw.balance(&gw.key).await;
    assert_eq!(
        charged,
        claude_cost(FakeAnthropic::INPUT_TOKENS as i64, 0, 0, words)
    );
}

#[tokio::test]
async fn two_parallel_tool_calls_come_back_whole_in_json_and_stream() {
    let (a, o) = (
        FakeAnthropic::start("a").await,
        FakeOpenAi::start("o").await,
    );
    let gw = gateway(&a, &o, true).await;
    a.set_mode(AnthropicMode::Tools);
    let tools = json!([{"type":"function","function":{"name":"get_weather","description":"Weather in a city",
        "parameters":{"type":"object","properties":{"city":{"type":"string"}},"required":["city"]}}}]);
    let body = json!({"model":"claude-x-2025-01-01","messages":user("weather in Paris and Tokyo?"),"tools":tools,"tool_choice":"required"});
    let r = gw.chat(body.clone()).await;
    assert_eq!(r.status, 200, "{}", r.text());
    let v = r.json();
    assert_eq!(v["choices"][0]["finish_reason"], "tool_calls");
    let calls = v["choices"][0]["message"]["tool_calls"].as_array().unwrap();
    assert_eq!(calls.len(), 2);
    for (call, (id, city)) in calls
        .iter()
        .zip([("toolu_01", "Paris"), ("toolu_02", "Tokyo")])
    {
        assert_eq!(call["id"], id);
        assert_eq!(call["type"], "function");
        assert_eq!(call["function"]["name"], "get_weather");
        let args: Value =
            serde_json::from_str(call["function"]["arguments"].as_str().unwrap()).unwrap();
        assert_eq!(args, json!({"city": city}));
    }
    let up = a.requests().pop().unwrap().json();
    assert_eq!(up["tool_choice"], json!({"type":"any"}));
    assert_eq!(up["tools"][0]["name"], "get_weather");
    assert_eq!(up["tools"][0]["input_schema"]["required"], json!(["city"]));

    let mut stream_body = body.clone();
    stream_body["stream"] = json!(true);
    let r = gw.chat(stream_body).await;
    assert_eq!(r.status, 200, "{}", r.text());
    let mut args = [String::new(), String::new()];
    let mut ids = [None, None];
    let mut finish = None;
    for d in sse_data(&r.text()).iter().filter(|d| *d != "[DONE]") {
        let c: Value = serde_json::from_str(d).unwrap();
        for tc in c["choices"][0]["delta"]["tool_calls"]
            .as_array()
            .into_iter()
            .flatten()
        {
            let i = tc["index"].as_u64().unwrap() as usize;
            if let Some(id) = tc["id"].as_str() {
                ids[i] = Some(id.to_string());
            }
            args[i].push_str(tc["function"]["arguments"].as_str().unwrap_or(""));
        }
        if let Some(f) = c["choices"][0]["finish_reason"].as_str() {
            finish = Some(f.to_string());
        }
    }
    assert_eq!(ids, [Some("toolu_01".into()), Some("toolu_02".into())]);
    assert_eq!(
        serde_json::from_str::<Value>(&args[0]).unwrap(),
        json!({"city":"Paris"})
    );
    assert_eq!(
        serde_json::from_str::<Value>(&args[1]).unwrap(),
        json!({"city":"Tokyo"})
    );
    assert_eq!(finish.as_deref(), Some("tool_calls"));

    // The round trip: the tool results go back as tool_result blocks in one user turn.
    let mut round = body.clone();
    round["messages"] = json!([
        {"role":"user","content":"weather in Paris and Tokyo?"},
        {"role":"assistant","content":null,"tool_calls":calls},
        {"role":"tool","tool_call_id":"toolu_01","content":"18C"},
        {"role":"tool","tool_call_id":"toolu_02","content":"22C"},
    ]);
    let r = gw.chat(round).await;
    assert_eq!(r.status, 200, "{}", r.text());
    assert_eq!(r.json()["choices"][0]["finish_reason"], "stop");
    let up = a.requests().pop().unwrap().json();
    let msgs = up["messages"].as_array().unwrap();
    assert_eq!(msgs.len(), 3, "{up}");
    assert_eq!(msgs[1]["content"][0]["type"], "tool_use");
    assert_eq!(msgs[1]["content"][0]["input"], json!({"city":"Paris"}));
    assert_eq!(msgs[2]["role"], "user");
    assert_eq!(
        msgs[2]["content"][0],
        json!({"type":"tool_result","tool_use_id":"toolu_01","content":"18C"})
    );
    assert_eq!(msgs[2]["content"][1]["tool_use_id"], "toolu_02");
}

#[tokio::test]
async fn cache_tokens_count_in_the_prompt_and_are_billed_at_their_rates() {
    let (a, o) = (
        FakeAnthropic::start("a").await,
        FakeOpenAi::start("o").await,
    );
    let gw = gateway(&a, &o, true).await;
    a.set_mode(AnthropicMode::Cache(100, 1000));
    let words = a.reply_words() as i64;
    let input = FakeAnthropic::INPUT_TOKENS as i64;
    for stream in [false, true] {
        let before = gw.balance(&gw.key).await;
        let r = gw
            .chat(json!({"model":"claude-x-2025-01-01","stream":stream,"stream_options":{"include_usage":true},"messages":user("hi")}))
            .await;
        assert_eq!(r.status, 200, "{}", r.text());
        let usage = if stream {
            let data = sse_data(&r.text());
            serde_json::from_str::<Value>(&data[data.len() - 2]).unwrap()["usage"].clone()
        } else {
            r.json()["usage"].clone()
        };
        assert_eq!(
            usage["prompt_tokens"],
            input + 1100,
            "stream {stream}: {usage}"
        );
        assert_eq!(usage["completion_tokens"], words);
        let charged = before - gw.balance(&gw.key).await;
        assert_eq!(
            charged,
            claude_cost(input, 100, 1000, words),
            "stream {stream}"
        );
    }
    let u = gw.usage(&gw.key).await;
    assert_eq!(u["recent"][0]["prompt_tokens"], input + 1100);
}

#[tokio::test]
async fn an_overloaded_anthropic_fails_over_to_an_openai_sibling_and_back() {
    let (a, o) = (
        FakeAnthropic::start("a").await,
        FakeOpenAi::start("o").await,
    );
    let gw = gateway(&a, &o, true).await;
    // An error event before any text, and a 529: both fail over to the OpenAI-compatible sibling.
    a.set_mode(AnthropicMode::OverloadedEvent);
    for stream in [true, false] {
        let before = gw.balance(&gw.key).await;
        let r = gw
            .chat(json!({"model":"claude-x-2025-01-01","stream":stream,"messages":user("hi")}))
            .await;
        assert_eq!(r.status, 200, "{}", r.text());
        let text = r.text();
        assert!(text.contains("gpt-x-2025-01-01"), "{text}");
        assert!(!text.contains("claude-x"), "{text}");
        let u = gw.usage(&gw.key).await;
        let row = &u["recent"][0];
        assert_eq!(row["model_used"], "gpt-x-2025-01-01");
        let p = row["prompt_tokens"].as_i64().unwrap();
        let c = row["completion_tokens"].as_i64().unwrap();
        assert_eq!(before - gw.balance(&gw.key).await, p * 1_000 + c * 2_000);
    }
    // The other way: the OpenAI-compatible model fails, Claude serves.
    let gw2 = gateway(&a, &o, false).await;
    a.set_mode(AnthropicMode::Ok);
    o.set_mode(Mode::Status(500));
    let r = gw2
        .chat(json!({"model":"gpt-x-2025-01-01","stream":true,"messages":user("hi")}))
        .await;
    assert_eq!(r.status, 200, "{}", r.text());
    assert!(r.text().contains("claude-x-2025-01-01"));
}

#[tokio::test]
async fn a_death_mid_stream_ends_with_an_error_event_and_charges_what_was_delivered() {
    let (a, o) = (
        FakeAnthropic::start("a").await,
        FakeOpenAi::start("o").await,
    );
    let gw = gateway(&a, &o, true).await;
    a.set_mode(AnthropicMode::DieAfter(3));
    let before = gw.balance(&gw.key).await;
    let r = gw
        .chat(json!({"model":"claude-x-2025-01-01","stream":true,"messages":user("hi")}))
        .await;
    assert_eq!(r.status, 200);
    let data = sse_data(&r.text());
    assert!(!data.iter().any(|d| d == "[DONE]"));
    let last: Value = serde_json::from_str(data.last().unwrap()).unwrap();
    assert_eq!(last["error"]["type"], "upstream_error");
    assert!(
        gw.balance(&gw.key).await < before,
        "what was delivered is charged"
    );
    assert!(gw.is_healthy().await);
}

#[tokio::test]
async fn a_provider_400_is_the_clients_and_a_provider_401_is_ours() {
    let (a, o) = (
        FakeAnthropic::start("a").await,
        FakeOpenAi::start("o").await,
    );
    let gw = gateway(&a, &o, true).await;
    o.set_mode(Mode::Status(500));
    a.set_mode(AnthropicMode::Status(400));
    let v = gw
        .chat(json!({"model":"claude-x-2025-01-01","messages":user("hi")}))
        .await
        .error(400, "invalid_request");
    assert!(
        v["error"]["message"]
            .as_str()
            .unwrap()
            .contains("fake anthropic says 400"),
        "{v}"
    );
    a.set_mode(AnthropicMode::Status(401));
    gw.chat(json!({"model":"claude-x-2025-01-01","messages":user("hi")}))
        .await
        .error(502, "upstream_error");
}

#[tokio::test]
async fn what_the_messages_api_cannot_carry_is_refused_before_any_hold() {
    let (a, o) = (
        FakeAnthropic::start("a").await,
        FakeOpenAi::start("o").await,
    );
    let gw = gateway(&a, &o, true).await;
    let before = gw.balance(&gw.key).await;
    for (field, value) in [
        ("n", json!(2)),
        ("logprobs", json!(true)),
        (
            "response_format",
            json!({"type":"json_schema","json_schema":{"name":"x","schema":{}}}),
        ),
        ("seed", json!(7)),
    ] {
        let mut body = json!({"model":"claude-x-2025-01-01","messages":user("hi")});
        body[field] = value;
        let v = gw.chat(body).await.error(400, "invalid_request");
        assert!(
            v["error"]["message"].as_str().unwrap().contains(field),
            "{v}"
        );
    }
    assert_eq!(a.count(), 0);
    assert_eq!(gw.balance(&gw.key).await, before);
    assert_eq!(
        gw.usage(&gw.key).await["recent"].as_array().unwrap().len(),
        0
    );
    // Neutral values are accepted and dropped.
    let r = gw
        .chat(json!({"model":"claude-x-2025-01-01","messages":user("hi"),"n":1,"logprobs":false,"presence_penalty":0}))
        .await;
    assert_eq!(r.status, 200, "{}", r.text());
}

#[tokio::test]
async fn a_later_claude_candidate_that_cannot_take_the_request_is_skipped() {
    let (a, o) = (
        FakeAnthropic::start("a").await,
        FakeOpenAi::start("o").await,
    );
    let gw = gateway(&a, &o, false).await;
    o.set_mode(Mode::Status(500));
    let before = gw.balance(&gw.key).await;
    // n = 2 is fine for the OpenAI-compatible first candidate; Claude cannot do it.
    let v = gw
        .chat(json!({"model":"gpt-x-2025-01-01","n":2,"messages":user("hi")}))
        .await
        .error(502, "upstream_error");
    assert!(
        v["error"]["message"]
            .as_str()
            .unwrap()
            .contains("claude-x-2025-01-01"),
        "{v}"
    );
    assert_eq!(a.count(), 0);
    assert_eq!(gw.balance(&gw.key).await, before);
}
