//! Cache breakpoints (issue 53): an Anthropic-kind request that opted in (the model's
//! `cache_breakpoints`, the key's or its organization's) and whose prompt is estimated above
//! `[routing] cache_breakpoint_min_tokens` reaches the provider with `cache_control` on its
//! last tool, last system block and last message block, unless the client marked something
//! itself; a raw client and the official `anthropic` Python SDK (`tests/sdk/anthropic_cache.py`),
//! which never mark, then read the cache on their second turn, billed at the cache rates. Bad
//! switches are refused by name. Claude Code, which marks its own: `tests/sdk_claude_code.rs`.

use serde_json::{json, Value};
use tollgate_testkit::anthropic::AnthropicMode;
use tollgate_testkit::*;

/// A system prompt of about 2,000 estimated tokens (one per 3 bytes of the body).
fn long_system() -> String {
    "You answer questions about the attached handbook. ".repeat(120)
}

/// `marked` (breakpoints on) and `plain` (off) on one fake Anthropic provider at Anthropic's
/// prices (per 1K: input 3, output 15, cache reads 0.3, five-minute writes 3.75).
fn config(a: &FakeAnthropic, routing: &str) -> String {
    let m = |id: &str, extra: &str| {
        format!("[[models]]\nid = \"{id}\"\nprovider = \"anth\"\ntier = \"powerful\"\ninput_credits_per_1k = 3\noutput_credits_per_1k = 15\ncache_read_credits_per_1k = 0.3\ncache_write_credits_per_1k = 3.75\nmax_output_tokens = 2000\n{extra}\n")
    };
    format!(
        "{FAST_TIMEOUTS}{routing}\n{}{}{}",
        anthropic_provider("anth", &[a], ""),
        m("marked", "cache_breakpoints = true"),
        m("plain", "")
    )
}

async fn messages(gw: &Gateway, key: &str, body: &Value) -> Response {
    let auth = format!("Bearer {key}");
    let headers = [
        ("Content-Type", "application/json"),
        ("Authorization", auth.as_str()),
        ("anthropic-version", "2023-06-01"),
    ];
    let r = request(
        gw.addr,
        "POST",
        "/v1/messages",
        &headers,
        body.to_string().as_bytes(),
    )
    .await;
    assert_eq!(r.status, 200, "{}", r.text());
    r
}

fn conversation(model: &str, system: &str) -> Value {
    json!({"model": model, "max_tokens": 100, "system": system,
        "tools": [{"name": "lookup", "description": "Find a page", "input_schema": {"type": "object"}},
                  {"name": "quote", "description": "Quote a page", "input_schema": {"type": "object"}}],
        "messages": [{"role": "user", "content": "What does chapter 2 say?"}]})
}

/// The marks of a body the provider received: (where, the mark).
fn marks(body: &Value) -> Vec<(String, Value)> {
    let mut out = Vec::new();
    let mut look = |at: String, b: &Value| {
        if let Some(m) = b.get("cache_control") {
            out.push((at, m.clone()));
        }
    };
    for (i, t) in body["tools"].as_array().into_iter().flatten().enumerate() {
        look(format!("tools[{i}]"), t);
    }
    for (i, b) in body["system"].as_array().into_iter().flatten().enumerate() {
        look(format!("system[{i}]"), b);
    }
    for (i, m) in body["messages"]
        .as_array()
        .into_iter()
        .flatten()
        .enumerate()
    {
        for (j, b) in m["content"].as_array().into_iter().flatten().enumerate() {
            look(format!("messages[{i}].content[{j}]"), b);
        }
    }
    out
}

fn last_sent(a: &FakeAnthropic) -> Value {
    a.requests().last().unwrap().json()
}

#[tokio::test]
async fn a_long_prompt_gets_marks_where_described_and_a_short_one_none() {
    let a = FakeAnthropic::start("c").await;
    let gw = Gateway::start(tollgate_bin!(), &config(&a, "")).await;
    let system = long_system();
    for stream in [false, true] {
        let mut body = conversation("marked", &system);
        body["stream"] = json!(stream);
        messages(&gw, &gw.key, &body).await;
        let sent = last_sent(&a);
        let ephemeral = json!({"type": "ephemeral"});
        let at: Vec<(String, Value)> = ["tools[1]", "system[0]", "messages[0].content[0]"]
            .iter()
            .map(|w| (w.to_string(), ephemeral.clone()))
            .collect();
        assert_eq!(marks(&sent), at, "stream {stream}: {sent}");
        // Everything else as the client sent it: the string system prompt and the message are
        // one text block each.
        assert_eq!(sent["system"][0]["text"], system.as_str());
        assert_eq!(
            sent["messages"][0]["content"][0]["text"],
            "What does chapter 2 say?"
        );
        assert_eq!(sent["tools"][1]["name"], "quote");
        assert!(sent["tools"][0].get("cache_control").is_none());
    }
    // Short: Anthropic would cache nothing, so no marks (and no write at its higher rate).
    messages(&gw, &gw.key, &conversation("marked", "Be brief.")).await;
    let sent = last_sent(&a);
    assert_eq!(marks(&sent), [], "{sent}");
    assert_eq!(sent["system"], "Be brief.");
}

#[tokio::test]
async fn a_clients_own_marks_are_untouched_and_none_are_added() {
    let a = FakeAnthropic::start("c").await;
    let gw = Gateway::start(tollgate_bin!(), &config(&a, "")).await;
    let mut body = conversation("marked", "");
    let own = json!({"type": "ephemeral", "ttl": "1h"});
    body["system"] = json!([{"type": "text", "text": long_system(), "cache_control": own}]);
    messages(&gw, &gw.key, &body).await;
    let sent = last_sent(&a);
    assert_eq!(marks(&sent), [("system[0]".to_string(), own)], "{sent}");
    assert_eq!(sent["messages"][0]["content"], "What does chapter 2 say?");
}

#[tokio::test]
async fn a_chat_completions_client_gets_them_on_an_anthropic_model() {
    let a = FakeAnthropic::start("c").await;
    let gw = Gateway::start(tollgate_bin!(), &config(&a, "")).await;
    let body = json!({"model": "marked", "messages": [
        {"role": "system", "content": long_system()},
        {"role": "user", "content": "What does chapter 2 say?"}],
        "tools": [{"type": "function", "function": {"name": "lookup", "parameters": {"type": "object"}}}]});
    let r = gw.chat(body).await;
    assert_eq!(r.status, 200, "{}", r.text());
    let sent = last_sent(&a);
    let at: Vec<String> = marks(&sent).into_iter().map(|m| m.0).collect();
    assert_eq!(
        at,
        ["tools[0]", "system[0]", "messages[0].content[0]"],
        "{sent}"
    );
}

#[tokio::test]
async fn off_unless_the_model_the_key_or_its_organization_opted_in() {
    let a = FakeAnthropic::start("c").await;
    let gw = Gateway::start(
        tollgate_bin!(),
        &config(&a, "[routing]\ncache_breakpoint_min_tokens = 1500\n"),
    )
    .await;
    let body = conversation("plain", &long_system());
    let marked = |a: &FakeAnthropic| !marks(&last_sent(a)).is_empty();
    messages(&gw, &gw.key, &body).await;
    assert!(!marked(&a), "no one opted in");

    // The key.
    let r = gw
        .api_as(
            &gw.key,
            "POST",
            "/api/v1/keys",
            &json!({"name": "k", "cache_breakpoints": true}),
        )
        .await;
    assert_eq!(r.status, 201, "{}", r.text());
    assert_eq!(r.json()["cache_breakpoints"], true);
    let (id, key) = (
        r.json()["id"].as_str().unwrap().to_owned(),
        r.json()["key"].as_str().unwrap().to_owned(),
    );
    messages(&gw, &key, &body).await;
    assert!(marked(&a), "the key opted in");
    let path = format!("/api/v1/keys/{id}");
    let r = gw
        .api_as(
            &gw.key,
            "PATCH",
            &path,
            &json!({"cache_breakpoints": false}),
        )
        .await;
    assert_eq!(r.status, 200, "{}", r.text());
    messages(&gw, &key, &body).await;
    assert!(!marked(&a), "the key opted out");
    // The threshold is the config's: this prompt is above 1,024 and below 1,500 tokens.
    gw.api_as(&gw.key, "PATCH", &path, &json!({"cache_breakpoints": true}))
        .await;
    let mid = conversation("plain", &"words. ".repeat(500));
    messages(&gw, &key, &mid).await;
    assert!(!marked(&a), "below cache_breakpoint_min_tokens");

    // The organization: its keys, not its members' own.
    let (_, owner) = gw.signup(&unique_email()).await;
    let r = gw
        .api_as(&owner, "POST", "/api/v1/orgs", &json!({"name": "Cached"}))
        .await;
    assert_eq!(r.status, 201, "{}", r.text());
    let org = r.json()["id"].as_str().unwrap().to_owned();
    gw.admin_credits(&org, 100.0).await;
    let r = gw
        .api_as(
            &owner,
            "POST",
            "/api/v1/keys",
            &json!({"name": "o", "organization_id": org}),
        )
        .await;
    assert_eq!(r.status, 201, "{}", r.text());
    let org_key = r.json()["key"].as_str().unwrap().to_owned();
    messages(&gw, &org_key, &body).await;
    assert!(!marked(&a), "the organization has not opted in");
    let path = format!("/api/v1/orgs/{org}");
    let r = gw
        .api_as(&owner, "PATCH", &path, &json!({"cache_breakpoints": true}))
        .await;
    assert_eq!(r.status, 200, "{}", r.text());
    assert_eq!(r.json()["cache_breakpoints"], true);
    assert_eq!(r.json()["log_payloads"], false);
    let shown = gw.api_as(&owner, "GET", &path, &json!({})).await.json();
    assert_eq!(shown["cache_breakpoints"], true);
    messages(&gw, &org_key, &body).await;
    assert!(marked(&a), "the organization opted in");
    messages(&gw, &gw.key, &body).await;
    assert!(!marked(&a), "a key of another account");
}

#[tokio::test]
async fn bad_switches_are_refused_by_name_and_change_nothing() {
    let a = FakeAnthropic::start("c").await;
    let gw = Gateway::start(tollgate_bin!(), &config(&a, "")).await;
    let r = gw
        .api_as(&gw.key, "POST", "/api/v1/keys", &json!({"name": "k"}))
        .await;
    let id = r.json()["id"].as_str().unwrap().to_owned();
    let org = gw
        .api_as(&gw.key, "POST", "/api/v1/orgs", &json!({"name": "O"}))
        .await
        .json()["id"]
        .as_str()
        .unwrap()
        .to_owned();
    let key_path = format!("/api/v1/keys/{id}");
    let org_path = format!("/api/v1/orgs/{org}");
    for path in [&key_path, &org_path] {
        for bad in [json!("yes"), json!(1), Value::Null, json!({"on": true})] {
            let r = gw
                .api_as(&gw.key, "PATCH", path, &json!({"cache_breakpoints": bad}))
                .await;
            let v = r.error(400, "invalid_request");
            let message = v["error"]["message"].as_str().unwrap();
            assert!(
                message.starts_with("cache_breakpoints: "),
                "{path} {bad}: {message}"
            );
        }
        // A bad switch beside a good one: neither is written.
        let r = gw
            .api_as(
                &gw.key,
                "PATCH",
                path,
                &json!({"log_payloads": true, "cache_breakpoints": "on"}),
            )
            .await;
        r.error(400, "invalid_request");
    }
    let r = gw
        .api_as(
            &gw.key,
            "POST",
            "/api/v1/keys",
            &json!({"name": "k2", "cache_breakpoints": "yes"}),
        )
        .await;
    assert!(r.error(400, "invalid_request")["error"]["message"]
        .as_str()
        .unwrap()
        .starts_with("cache_breakpoints: "));
    let r = gw.api_as(&gw.key, "PATCH", &org_path, &json!({})).await;
    r.error(400, "invalid_request");
    // The organization's switch is not a person's: /auth/me refuses it by name.
    let r = gw
        .api_as(
            &gw.key,
            "PATCH",
            "/api/v1/auth/me",
            &json!({"cache_breakpoints": true}),
        )
        .await;
    assert!(r.error(400, "invalid_request")["error"]["message"]
        .as_str()
        .unwrap()
        .starts_with("cache_breakpoints: "));
    // Nothing changed, and the service is healthy.
    let keys = gw
        .api_as(&gw.key, "GET", "/api/v1/keys", &json!({}))
        .await
        .json();
    let k = keys["data"]
        .as_array()
        .unwrap()
        .iter()
        .find(|k| k["id"] == id.as_str())
        .unwrap()
        .clone();
    assert_eq!(k["cache_breakpoints"], false);
    assert_eq!(k["log_payloads"], false);
    let shown = gw
        .api_as(&gw.key, "GET", &org_path, &json!({}))
        .await
        .json();
    assert_eq!(shown["cache_breakpoints"], false);
    assert_eq!(shown["log_payloads"], false);
    assert!(gw.is_healthy().await);
    assert_eq!(a.count(), 0);
}

/// What a request billed as `u` with `output` tokens costs at `marked`'s rates, in µcr.
fn cost(u: CacheUsage, output: u64) -> i64 {
    (u.input * 3_000 + u.write * 3_750 + u.read * 300 + output * 15_000) as i64
}

#[tokio::test]
async fn a_client_that_never_marks_reads_the_cache_on_its_second_turn_at_the_read_rate() {
    let a = FakeAnthropic::start("c").await;
    a.set_mode(AnthropicMode::PromptCache);
    let gw = Gateway::start(tollgate_bin!(), &config(&a, "")).await;
    let words = a.reply_words();
    let mut body = conversation("marked", &long_system());
    for turn in 0..2 {
        let before = gw.balance(&gw.key).await;
        let r = messages(&gw, &gw.key, &body).await;
        let u = a.cache_usage()[turn];
        match turn {
            0 => assert!(u.write > 0 && u.read == 0, "turn 1 writes: {u:?}"),
            _ => assert!(u.read > 0, "turn 2 reads what turn 1 wrote: {u:?}"),
        }
        // The usage row is the fake's counts at the model's rates, and the reply says so.
        let row = &gw.usage(&gw.key).await["recent"][0];
        assert_eq!(
            micros(&row["credits"]),
            cost(u, words),
            "turn {turn}: {u:?}"
        );
        assert_eq!(before - gw.balance(&gw.key).await, cost(u, words));
        let usage = &r.json()["usage"];
        assert_eq!(usage["cache_read_input_tokens"], u.read, "{usage}");
        assert_eq!(usage["cache_creation_input_tokens"], u.write, "{usage}");
        // The next turn: the reply and a new question.
        let answer = r.json()["content"].clone();
        let m = body["messages"].as_array_mut().unwrap();
        m.push(json!({"role": "assistant", "content": answer}));
        m.push(json!({"role": "user", "content": "And chapter 3?"}));
    }
    let turn2 = a.cache_usage()[1];
    // The second turn read the tools, the system prompt and the first question: more than
    // half its prompt came from the cache.
    assert!(turn2.read > turn2.input + turn2.write, "{turn2:?}");
    // The same conversation on a model that did not opt in: nothing marked, nothing read.
    body["model"] = json!("plain");
    messages(&gw, &gw.key, &body).await;
    let u = *a.cache_usage().last().unwrap();
    assert_eq!((u.read, u.write), (0, 0), "{u:?}");
}

#[tokio::test]
async fn the_official_anthropic_sdk_reads_the_cache_on_its_second_turn_without_marking() {
    let Some(py) = python_with("import anthropic") else {
        return skip("no Python with the anthropic package; run ./dev test to set one up");
    };
    let a = FakeAnthropic::start("c").await;
    a.set_mode(AnthropicMode::PromptCache);
    let gw = Gateway::start(tollgate_bin!(), &config(&a, "")).await;
    let before = gw.balance(&gw.key).await;
    let script = format!(
        "{}/tests/sdk/anthropic_cache.py",
        env!("CARGO_MANIFEST_DIR")
    );
    let (url, key) = (format!("http://{}", gw.addr), gw.key.clone());
    let out = tokio::task::spawn_blocking(move || {
        std::process::Command::new(py)
            .arg(script)
            .env("TOLLGATE_URL", url)
            .env("TOLLGATE_API_KEY", key)
            .output()
    })
    .await
    .unwrap()
    .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    assert!(
        out.status.success() && stdout.contains("sdk: all passed"),
        "SDK script failed\nstdout:\n{stdout}\nstderr:\n{}\ngateway:\n{}",
        String::from_utf8_lossy(&out.stderr),
        gw.log()
    );
    // The SDK never marked: every mark the fake saw was the gateway's.
    for r in a.requests() {
        let sent = r.json();
        assert_eq!(marks(&sent).len(), 3, "{sent}");
    }
    let told = |name: &str| -> Vec<u64> {
        stdout
            .lines()
            .filter_map(|l| l.strip_prefix(name))
            .map(|v| v.trim().parse().unwrap())
            .collect()
    };
    let usage = a.cache_usage();
    assert_eq!(
        told("READ="),
        usage.iter().map(|u| u.read).collect::<Vec<_>>()
    );
    assert_eq!(
        told("WRITE="),
        usage.iter().map(|u| u.write).collect::<Vec<_>>()
    );
    // What the SDK read as the cost is the fake's counts at the rates, and the balance's fall.
    let costs: Vec<i64> = stdout
        .lines()
        .filter_map(|l| l.strip_prefix("COST="))
        .map(|c| micros(&json!(c.trim().parse::<f64>().unwrap())))
        .collect();
    let words = a.reply_words();
    let expected: Vec<i64> = usage.iter().map(|u| cost(*u, words)).collect();
    assert_eq!(costs, expected);
    assert_eq!(
        before - gw.balance(&gw.key).await,
        expected.iter().sum::<i64>()
    );
}
