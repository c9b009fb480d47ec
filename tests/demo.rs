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
