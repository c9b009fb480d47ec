//! A tool server's progress and log notifications during a call reach an agent that takes an
//! event stream (its `Accept`), in order, before the call's response as the stream's last event
//! (with or without a `progressToken`: log messages need none); an agent that takes no stream
//! gets its one JSON reply. Charged the same either way.

use serde_json::{json, Value};
use tollgate_testkit::*;

use crate::common::{gateway, live_service, uniq, MCP_OPEN};

async fn call(gw: &Gateway, token: Option<i64>, extra: &[(&str, &str)], meta: Value) -> Response {
    let mut params = json!({"name": "echo", "arguments": {"text": "hi"}, "_meta": meta});
    if let Some(t) = token {
        params["_meta"]["progressToken"] = json!(t);
    }
    let body =
        json!({"jsonrpc": "2.0", "id": 5, "method": "tools/call", "params": params}).to_string();
    let auth = format!("Bearer {}", gw.key);
    let mut headers = vec![
        ("Authorization", auth.as_str()),
        ("Content-Type", "application/json"),
    ];
    headers.extend_from_slice(extra);
    let slug = extra
        .iter()
        .find(|(k, _)| *k == "X-Slug")
        .map(|(_, v)| *v)
        .unwrap_or_default();
    request(
        gw.addr,
        "POST",
        &format!("/mcp/{slug}"),
        &headers,
        body.as_bytes(),
    )
    .await
}

/// The events of an SSE answer, as JSON.
fn events(r: &Response) -> Vec<Value> {
    r.sse_data()
        .iter()
        .map(|d| serde_json::from_str(d).unwrap())
        .collect()
}

#[tokio::test]
async fn progress_and_log_notifications_reach_the_agent_before_the_response() {
    let gw = gateway(MCP_OPEN).await;
    let tools = FakeToolServer::sse().await;
    tools.set_mode(ToolMode::Progress);
    let slug = uniq("prog");
    live_service(&gw, &slug, &tools.url(), 2).await;
    let before = gw.balance(&gw.key).await;
    let sse = [
        ("Accept", "application/json, text/event-stream"),
        ("X-Slug", slug.as_str()),
    ];

    let r = call(&gw, Some(17), &sse, json!({})).await;
    assert_eq!(r.status, 200, "{}", r.text());
    assert!(r
        .header("content-type")
        .unwrap()
        .starts_with("text/event-stream"));
    let ev = events(&r);
    let methods: Vec<&str> = ev
        .iter()
        .map(|e| e["method"].as_str().unwrap_or("response"))
        .collect();
    assert_eq!(
        methods,
        [
            "notifications/progress",
            "notifications/message",
            "notifications/progress",
            "response"
        ],
        "{ev:?}"
    );
    assert_eq!(ev[0]["params"]["progressToken"], 17);
    assert_eq!(ev[2]["params"]["progress"], 2);
    assert_eq!(ev[3]["id"], 5);
    assert_eq!(ev[3]["result"]["content"][0]["text"], "hi");
    assert_eq!(before - gw.balance(&gw.key).await, 2_000_000);

    // No progressToken, an event-stream Accept: what the server sent still reaches the agent
    // (the conformance suite's logging scenario calls so), the response last.
    let r = call(&gw, None, &sse, json!({})).await;
    assert!(r
        .header("content-type")
        .unwrap()
        .starts_with("text/event-stream"));
    let ev = events(&r);
    assert_eq!(ev[1]["method"], "notifications/message", "{ev:?}");
    assert_eq!(ev.last().unwrap()["result"]["content"][0]["text"], "hi");
    // No event-stream Accept: one JSON reply, the notifications dropped.
    let r = call(&gw, Some(3), &[("X-Slug", slug.as_str())], json!({})).await;
    assert_eq!(r.json()["result"]["content"][0]["text"], "hi");
    assert_eq!(before - gw.balance(&gw.key).await, 6_000_000);

    // A 2026-07-28 client: the same stream, its response in that era's shape.
    let meta = json!({"io.modelcontextprotocol/protocolVersion": "2026-07-28", "io.modelcontextprotocol/clientCapabilities": {}});
    let h = [
        ("Accept", "application/json, text/event-stream"),
        ("X-Slug", slug.as_str()),
        ("MCP-Protocol-Version", "2026-07-28"),
        ("Mcp-Method", "tools/call"),
        ("Mcp-Name", "echo"),
    ];
    let r = call(&gw, Some(9), &h, meta).await;
    let ev = events(&r);
    assert_eq!(ev.len(), 4, "{}", r.text());
    assert_eq!(ev[3]["result"]["resultType"], "complete");
    assert_eq!(before - gw.balance(&gw.key).await, 8_000_000);
}
