//! A tool server of both eras (as the 2.x SDK's are) spoken to in each agent's era (issue 30,
//! conformance through `/mcp/{slug}`): a 2025 agent's call goes in a 2025 session, so the
//! server's sampling and elicitation requests reach that agent on its call's stream (answered
//! through either instance) and its result keeps the 2025 shape; `logging/setLevel`, gone in
//! 2026, is passed through for it; a 2026 agent's call goes statelessly. And `/mcp/{slug}`
//! declares the server's own capabilities at `server/discover` and `initialize`, `/mcp` the
//! tools alone.

use serde_json::{json, Value};
use tollgate_testkit::*;

use crate::asks::{answer, pair, post, Stream, SSE};
use crate::common::{gateway, live_service, rpc, uniq, MCP_OPEN};

const V: &str = "2026-07-28";

/// A request as a 2026-07-28 client sends it: its `_meta` and routing headers.
async fn call_2026(gw: &Gateway, path: &str, method: &str, mut params: Value) -> Response {
    params["_meta"] = json!({"io.modelcontextprotocol/protocolVersion": V,
        "io.modelcontextprotocol/clientCapabilities": {},
        "io.modelcontextprotocol/clientInfo": {"name": "t", "version": "1"}});
    let body = json!({"jsonrpc": "2.0", "id": 9, "method": method, "params": params}).to_string();
    let auth = format!("Bearer {}", gw.key);
    let mut headers = vec![
        ("Authorization", auth.as_str()),
        ("Content-Type", "application/json"),
        ("Accept", SSE),
        ("Mcp-Method", method),
        ("MCP-Protocol-Version", V),
    ];
    let name = params["name"].as_str().map(str::to_owned);
    if let Some(n) = &name {
        headers.push(("Mcp-Name", n));
    }
    request(gw.addr, "POST", path, &headers, body.as_bytes()).await
}

#[tokio::test]
async fn a_server_of_both_eras_is_spoken_to_in_each_agents_era() {
    let (_f, one, two) = pair(10).await;
    let tools = FakeToolServer::both().await;
    tools.set_mode(ToolMode::Ask);
    let slug = uniq("eras");
    let (_, dev_key) = live_service(&one, &slug, &tools.url(), 5).await;
    let path = format!("/mcp/{slug}");
    let before = (one.balance(&one.key).await, one.balance(&dev_key).await);

    // A 2025 agent: the server asks it on the call's stream; the answers reach the server's
    // session through either instance.
    let stateless_before = tools.stateless_requests();
    let mut s = Stream::call(one.addr, &path, &one.key, "echo", SSE).await;
    let sampling = s.next().await;
    assert_eq!(sampling["method"], "sampling/createMessage", "{sampling}");
    let sampled =
        json!({"role": "assistant", "content": {"type": "text", "text": "hi"}, "model": "m"});
    let r = post(two.addr, &path, &one.key, &answer(&sampling["id"], sampled)).await;
    assert_eq!(r.status, 202, "{}", r.text());
    let elicit = s.next().await;
    assert_eq!(elicit["method"], "elicitation/create", "{elicit}");
    let elicited = json!({"action": "accept", "content": {"name": "Ada"}});
    let r = post(one.addr, &path, &one.key, &answer(&elicit["id"], elicited)).await;
    assert_eq!(r.status, 202, "{}", r.text());
    let done = s.next().await;
    assert_eq!(done["id"], 9, "{done}");
    let text: Value =
        serde_json::from_str(done["result"]["content"][0]["text"].as_str().unwrap()).unwrap();
    assert_eq!(text["elicited"]["content"]["name"], "Ada", "{text}");
    // The 2025 shape: no `resultType`; and nothing went in the 2026 envelope.
    assert!(done["result"].get("resultType").is_none(), "{done}");
    assert_eq!(tools.stateless_requests(), stateless_before);
    let answers = tools.answers();
    assert_eq!(answers.len(), 2, "{answers:?}");
    assert!(answers.iter().all(|(sid, _, _)| sid.starts_with("sess-")));

    // The method 2026 removed is passed through for a 2025 agent, refused to a 2026 one.
    let v = rpc(
        &one,
        &path,
        &one.key,
        "logging/setLevel",
        json!({"level": "info"}),
    )
    .await;
    assert_eq!(v["result"], json!({}), "{v}");
    let r = call_2026(&one, &path, "logging/setLevel", json!({"level": "info"})).await;
    assert_eq!(r.status, 404, "{}", r.text());
    assert_eq!(r.json()["error"]["code"], -32601);

    // A 2026 agent: spoken to statelessly; the result in that era's shape.
    tools.set_mode(ToolMode::Ok);
    let args = json!({"name": "echo", "arguments": {"text": "new"}});
    let r = call_2026(&one, &path, "tools/call", args).await;
    assert_eq!(r.status, 200, "{}", r.text());
    assert_eq!(r.json()["result"]["content"][0]["text"], "new");
    assert_eq!(r.json()["result"]["resultType"], "complete");
    assert!(tools.stateless_requests() > stateless_before);
    // And a 2025 agent again, on the other instance (its own 2025 session): the 2025 shape.
    let v = rpc(
        &two,
        &path,
        &one.key,
        "tools/call",
        json!({"name": "echo", "arguments": {"text": "old"}}),
    )
    .await;
    assert_eq!(v["result"]["content"][0]["text"], "old", "{v}");
    assert!(v["result"].get("resultType").is_none(), "{v}");

    // Three calls, each charged once; the developer paid 80% (rounded up) of each (the other
    // instance's round written a moment later).
    let mut spent = (0, 0);
    for _ in 0..50 {
        spent = (
            before.0 - one.balance(&one.key).await,
            one.balance(&dev_key).await - before.1,
        );
        if spent == (15_000_000, 12_000_000) {
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    }
    assert_eq!(spent, (15_000_000, 12_000_000));
}

#[tokio::test]
async fn one_services_endpoint_declares_the_servers_capabilities() {
    let gw = gateway(MCP_OPEN).await;
    let both = FakeToolServer::both().await;
    let old = FakeToolServer::start().await;
    let (slug, old_slug) = (uniq("caps"), uniq("capsold"));
    live_service(&gw, &slug, &both.url(), 1).await;
    live_service(&gw, &old_slug, &old.url(), 1).await;
    let init = json!({"protocolVersion": "2025-11-25", "capabilities": {},
        "clientInfo": {"name": "t", "version": "1"}});
    // Resource subscriptions to a 2025 agent (`resources/subscribe` is passed through), not to
    // a 2026 one (`subscriptions/listen` is not offered).
    let server_2025 = json!({"tools": {"listChanged": false}, "resources": {"subscribe": true},
        "logging": {}});
    let server_2026 = json!({"tools": {"listChanged": false}, "resources": {}, "logging": {}});
    let tools_only = json!({"tools": {"listChanged": false}});
    for (path, want_2026, want_2025) in [
        (format!("/mcp/{slug}"), &server_2026, &server_2025),
        (format!("/mcp/{old_slug}"), &tools_only, &tools_only),
        ("/mcp".to_owned(), &tools_only, &tools_only),
    ] {
        let r = call_2026(&gw, &path, "server/discover", json!({})).await;
        assert_eq!(r.status, 200, "{}", r.text());
        assert_eq!(&r.json()["result"]["capabilities"], want_2026, "{path}");
        let v = rpc(&gw, &path, &gw.key, "initialize", init.clone()).await;
        assert_eq!(&v["result"]["capabilities"], want_2025, "{path}: {v}");
    }
    // What is declared is passed through: the server's resources.
    let r = call_2026(&gw, &format!("/mcp/{slug}"), "resources/list", json!({})).await;
    assert_eq!(
        r.json()["result"]["resources"][0]["uri"],
        "fake://readme",
        "{}",
        r.text()
    );
}
