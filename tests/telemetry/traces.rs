use std::time::Duration;

use serde_json::{json, Value};
use tollgate_testkit::*;

use super::*;

/// Kinds as OTLP numbers them.
const SERVER: i64 = 2;
const CLIENT: i64 = 3;
const INTERNAL: i64 = 1;

fn attr<'a>(span: &'a Value, key: &str) -> &'a Value {
    &span["attributes"][key]
}

#[tokio::test]
async fn a_streamed_request_that_fails_over_is_one_trace_continuing_the_clients() {
    let Some(py) = python() else { return };
    let collector = Collector::start(&py, CollectorMode::Up).await;
    let (a, b, gw) = two_providers(&telemetry(&collector.endpoint(), 0.0, "")).await;
    a.set_mode(Mode::Status(503));
    let prompt = "the secret prompt text 7f3a";
    let parent = client_traceparent("01");
    let r = chat_with(
        &gw,
        &json!({"model": "econ-a", "stream": true, "messages": user(prompt)}),
        &[("traceparent", &parent), ("tracestate", "vendor=abc")],
    )
    .await;
    assert_eq!(r.status, 200, "{}", r.text());
    assert!(r.text().contains("[DONE]"));

    // Both providers were sent the client's trace, each under its own attempt's span.
    let sent: Vec<String> = [&a, &b]
        .iter()
        .map(|f| {
            let req = f.requests().into_iter().last().expect("a request");
            assert_eq!(req.header("tracestate"), Some("vendor=abc"));
            req.header("traceparent").expect("a traceparent").to_owned()
        })
        .collect();
    for tp in &sent {
        assert!(tp.starts_with(&format!("00-{CLIENT_TRACE}-")), "{tp}");
        assert!(tp.ends_with("-01"), "sampled: {tp}");
    }
    assert_ne!(sent[0], sent[1], "each attempt is its own span");

    let spans = spans_at_least(&collector, 4).await;
    let trace = of_trace(&spans, CLIENT_TRACE);
    assert_eq!(
        trace.len(),
        4,
        "server, two attempts, settlement: {spans:#?}"
    );
    let server = trace
        .iter()
        .find(|s| s["kind"] == SERVER)
        .expect("a server span");
    assert_eq!(
        server["parent_span_id"], CLIENT_SPAN,
        "under the client's span"
    );
    assert_eq!(server["name"], "chat econ-a");
    assert_eq!(server["trace_state"], "vendor=abc");
    assert_eq!(server["resource"]["service.name"], "tollgate");
    for (k, v) in [
        ("gen_ai.operation.name", json!("chat")),
        ("gen_ai.request.model", json!("econ-a")),
        ("gen_ai.response.model", json!("econ-b")),
        ("gen_ai.provider.name", json!("openai")),
        ("tollgate.provider", json!("pb")),
        ("http.request.method", json!("POST")),
        ("http.route", json!("/v1/chat/completions")),
        ("http.response.status_code", json!(200)),
        ("tollgate.account.id", json!(gw.user_id)),
    ] {
        assert_eq!(attr(server, k), &v, "{k}: {server:#}");
    }
    assert!(attr(server, "gen_ai.usage.input_tokens").as_i64().unwrap() > 0);
    assert!(attr(server, "gen_ai.usage.output_tokens").as_i64().unwrap() > 0);
    assert!(attr(server, "tollgate.cost.credits").as_f64().unwrap() > 0.0);
    assert!(attr(server, "tollgate.key.id")
        .as_str()
        .is_some_and(|k| !k.is_empty()));
    assert!(attr(server, "gen_ai.server.time_to_first_token")
        .as_f64()
        .is_some());

    let mut legs: Vec<&&Value> = trace.iter().filter(|s| s["kind"] == CLIENT).collect();
    legs.sort_by_key(|s| s["start"].as_u64());
    assert_eq!(legs.len(), 2);
    let server_id = server["span_id"].as_str().unwrap();
    for (leg, tp) in legs.iter().zip(&sent) {
        assert_eq!(leg["parent_span_id"], server_id);
        let id = leg["span_id"].as_str().unwrap();
        assert!(
            tp.contains(id),
            "the provider was sent the leg's span {id}: {tp}"
        );
    }
    assert_eq!(attr(legs[0], "tollgate.attempt.outcome"), "failover");
    assert_eq!(attr(legs[0], "tollgate.failover.reason"), "5xx");
    assert_eq!(attr(legs[0], "gen_ai.request.model"), "econ-a");
    assert_eq!(legs[0]["status_code"], 2, "a failed attempt is an error");
    assert_eq!(attr(legs[1], "tollgate.attempt.outcome"), "served");
    assert_eq!(attr(legs[1], "tollgate.attempt.continuation"), false);
    assert_eq!(attr(legs[1], "server.address"), "127.0.0.1");
    let settle = trace
        .iter()
        .find(|s| s["kind"] == INTERNAL)
        .expect("a settlement span");
    assert_eq!(settle["parent_span_id"], server_id);

    // Nothing exported carries the key, any key, or the prompt.
    let raw = String::from_utf8_lossy(&collector.raw()).into_owned();
    let decoded = serde_json::to_string(&spans).unwrap();
    for text in [&raw, &decoded] {
        assert!(!text.contains(&gw.key), "the key was exported");
        assert!(!text.contains("tg_"), "a key was exported");
        assert!(!text.contains(prompt), "the prompt was exported");
        assert!(!text.contains(&b.reply_text()), "the reply was exported");
    }
}

#[tokio::test]
async fn a_tool_call_has_its_span_and_the_tool_server_is_sent_the_trace() {
    let Some(py) = python() else { return };
    let collector = Collector::start(&py, CollectorMode::Up).await;
    let fake = FakeOpenAi::start("p").await;
    let cfg = format!(
        "{}[mcp]\nallow_private_upstreams = true\ncall_timeout = 2\n{}",
        one_model_config(&fake, "m-2024-01-01"),
        telemetry(&collector.endpoint(), 1.0, "")
    );
    let gw = Gateway::start(tollgate_bin!(), &cfg).await;
    let tools = FakeToolServer::start().await;
    let slug = format!("tr-{}", &unique_email()[1..9]);
    let (_, dev_key) = gw.signup(&unique_email()).await;
    let r = gw
        .api_as(
            &dev_key,
            "POST",
            "/api/v1/mcp/services",
            &json!({"slug": slug, "upstream_url": tools.url(), "default_credits": 2}),
        )
        .await;
    assert_eq!(r.status, 201, "{}", r.text());
    let approve = format!("/api/v1/admin/mcp/services/{slug}/approve");
    assert_eq!(
        gw.api_as(ADMIN_TOKEN, "POST", &approve, &json!({}))
            .await
            .status,
        200
    );

    let auth = format!("Bearer {}", gw.key);
    let parent = client_traceparent("01");
    let call = json!({"jsonrpc": "2.0", "id": 1, "method": "tools/call",
        "params": {"name": format!("{slug}__echo"), "arguments": {"text": "tool secret 91c"}}});
    let r = request(
        gw.addr,
        "POST",
        "/mcp",
        &[
            ("Authorization", &auth),
            ("Content-Type", "application/json"),
            ("Accept", "application/json, text/event-stream"),
            ("traceparent", &parent),
        ],
        call.to_string().as_bytes(),
    )
    .await;
    assert_eq!(r.status, 200, "{}", r.text());
    assert!(r.json()["result"].is_object(), "{}", r.text());
    let tp = tools
        .last_traceparent()
        .expect("the tool server got a traceparent");
    assert!(tp.starts_with(&format!("00-{CLIENT_TRACE}-")), "{tp}");

    let spans = collector
        .wait_for(Duration::from_secs(10), |s| {
            s.iter().any(|x| x["name"] == "execute_tool echo")
        })
        .await;
    let trace = of_trace(&spans, CLIENT_TRACE);
    let tool = trace
        .iter()
        .find(|s| s["name"] == "execute_tool echo")
        .unwrap_or_else(|| panic!("no tool span: {spans:#?}"));
    assert_eq!(tool["kind"], CLIENT);
    assert!(tp.contains(tool["span_id"].as_str().unwrap()), "{tp}");
    assert_eq!(attr(tool, "gen_ai.operation.name"), "execute_tool");
    assert_eq!(attr(tool, "gen_ai.tool.name"), "echo");
    assert_eq!(attr(tool, "tollgate.tool_server.slug"), slug.as_str());
    assert_eq!(attr(tool, "tollgate.tool.price_credits"), 2);
    assert_eq!(attr(tool, "tollgate.tool.outcome"), "ok");
    let server = trace
        .iter()
        .find(|s| s["kind"] == SERVER)
        .expect("the call's server span");
    assert_eq!(server["name"], format!("tools/call {slug}__echo"));
    assert_eq!(tool["parent_span_id"], server["span_id"]);
    let raw = String::from_utf8_lossy(&collector.raw()).into_owned();
    assert!(!raw.contains("tg_") && !raw.contains("tool secret 91c"));
}
