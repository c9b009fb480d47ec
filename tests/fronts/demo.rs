//! The built-in demo provider (`kind = "demo"`): a fresh gateway with no provider key and no
//! network serves a chat request end to end (JSON and stream, usage reported, charged, in the
//! usage list), the model says it is a demo in `/v1/models`, and a tier or a failover never
//! lands on it.

use serde_json::json;
use tollgate_testkit::*;

const DEMO: &str = "[[providers]]\nname = \"demo\"\nkind = \"demo\"\n\n[[models]]\nid = \"demo\"\nprovider = \"demo\"\ntier = \"economy\"\ninput_credits_per_1k = 1\noutput_credits_per_1k = 1\nguest = true\n";

#[tokio::test]
async fn the_demo_model_answers_without_a_provider_and_is_billed_like_any_other() {
    // A real provider that is down, in the same tier: the demo is never its failover.
    let down = format!(
        "{}{}",
        "[[providers]]\nname = \"down\"\nendpoints = [\"http://127.0.0.1:9\"]\n",
        model("real-2024-01-01", "down", "economy", "")
    );
    let gw = Gateway::start(tollgate_bin!(), &format!("{FAST_TIMEOUTS}{DEMO}{down}")).await;
    let (_uid, key) = gw.signup(&unique_email()).await;
    let before = gw.balance(&key).await;
    let ask = json!({"model": "demo", "messages": user("what is a gateway"), "max_tokens": 200});
    let r = gw.chat_as(Some(&key), &ask).await;
    assert_eq!(r.status, 200, "{}", r.text());
    let v = r.json();
    let text = v["choices"][0]["message"]["content"]
        .as_str()
        .unwrap()
        .to_string();
    assert!(
        text.contains("demo model") && text.contains("\"what is a gateway\""),
        "{text}"
    );
    assert_eq!(v["model"], "demo");
    let usage = v["usage"].clone();
    assert!(usage["completion_tokens"].as_u64().unwrap() > 10, "{usage}");
    // Deterministic.
    let again = gw.chat_as(Some(&key), &ask).await.json();
    assert_eq!(again["choices"][0]["message"]["content"], text.as_str());
    // Charged at its rates (1 credit per 1K tokens both ways), in the usage list.
    let tokens = usage["total_tokens"].as_i64().unwrap();
    assert_eq!(before - gw.balance(&key).await, 2 * tokens * 1000);
    let rows = gw.usage(&key).await["recent"].as_array().unwrap().clone();
    assert_eq!(rows.len(), 2);
    assert_eq!(
        (rows[0]["model_used"].as_str(), rows[0]["provider"].as_str()),
        (Some("demo"), Some("demo"))
    );
    // Streamed word by word, with usage when asked.
    let r = gw
        .chat_as(
            Some(&key),
            &json!({"model": "demo", "messages": user("hi"), "stream": true,
        "stream_options": {"include_usage": true}}),
        )
        .await;
    assert_eq!(r.status, 200, "{}", r.text());
    let data = r.sse_data();
    assert_eq!(data.last().map(String::as_str), Some("[DONE]"));
    let words = data
        .iter()
        .filter(|d| d.contains("\"content\":\"") && !d.contains("\"content\":\"\""))
        .count();
    assert!(words > 10, "{data:?}");
    assert!(data.iter().any(|d| d.contains("\"usage\":{")), "{data:?}");
    // A guest may try it too.
    let r = gw
        .chat_as(None, &json!({"model": "demo", "messages": user("hi")}))
        .await;
    assert_eq!(r.status, 200, "{}", r.text());
    // /v1/models names it a demo.
    let models = get(gw.addr, "/v1/models").await.json();
    let demo = models["data"]
        .as_array()
        .unwrap()
        .iter()
        .find(|m| m["id"] == "demo")
        .unwrap()
        .clone();
    assert_eq!(
        (demo["demo"].as_bool(), demo["owned_by"].as_str()),
        (Some(true), Some("tollgate-demo"))
    );
    // The economy tier and the real model fail over among real providers only: 502/503, never
    // a canned reply.
    for m in ["economy", "real-2024-01-01"] {
        let r = gw
            .chat_as(Some(&key), &json!({"model": m, "messages": user("hi")}))
            .await;
        assert!(r.status >= 500, "{m}: {}", r.text());
        assert!(!r.text().contains("demo model"), "{m}: {}", r.text());
    }
    // Bad input to the demo's own endpoint: a clear error, the gateway still healthy.
    let r = request(gw.addr, "POST", "/_demo/v1/chat/completions", &[], b"{nope").await;
    r.error(400, "invalid_request");
    assert!(gw.is_healthy().await);
}

/// The shipped default config, minus its `[server]` and `[storage]` (the testkit's own ports
/// and ledger): what `./dev run` serves on a fresh machine.
fn shipped_config() -> String {
    let text = std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/conf/tollgate.toml"))
        .unwrap();
    let mut out = String::new();
    let mut skip = false;
    for line in text.lines() {
        if line.starts_with('[') {
            skip = line == "[server]" || line == "[storage]";
        }
        if !skip {
            out.push_str(line);
            out.push('\n');
        }
    }
    out
}

#[tokio::test]
async fn the_shipped_config_serves_the_demo_with_no_key_and_no_network() {
    let gw = Gateway::start_opts(
        tollgate_bin!(),
        &shipped_config(),
        Opts {
            // The shipped [plans.*] sections, not the testkit's.
            plans: Some(String::new()),
            ..Opts::default()
        },
    )
    .await;
    let (_uid, key) = gw.signup(&unique_email()).await;
    let r = gw
        .chat_as(
            Some(&key),
            &json!({"model": "demo", "messages": user("hello"), "stream": true}),
        )
        .await;
    assert_eq!(r.status, 200, "{}", r.text());
    let text: String = r
        .sse_data()
        .iter()
        .filter_map(|d| serde_json::from_str::<serde_json::Value>(d).ok())
        .filter_map(|v| {
            v["choices"][0]["delta"]["content"]
                .as_str()
                .map(str::to_owned)
        })
        .collect();
    assert!(
        text.contains("demo model") && text.contains("\"hello\""),
        "{text}"
    );
    let rows = gw.usage(&key).await["recent"].as_array().unwrap().clone();
    assert_eq!(rows.len(), 1);
    assert_eq!(rows[0]["model_used"], "demo");
    assert!(rows[0]["credits"].as_f64().unwrap() > 0.0);
    // The dashboard is there to sign up in.
    let page = get(gw.addr, "/dashboard").await;
    assert_eq!(page.status, 200);
    assert!(page.text().contains("<html"), "{}", page.text());
}
