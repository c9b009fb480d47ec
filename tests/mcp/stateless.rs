//! A 2026-07-28 (stateless) client on `/mcp` and `/mcp/{slug}` (issue 30, part): no
//! `initialize`; `server/discover` answered by the gateway; every request's `_meta` and routing
//! headers checked as the specification says (400 -32602, 400 -32020, 400 -32022 with the
//! versions spoken, 404 -32601 for the methods the era removed); results with `resultType`,
//! lists with `ttlMs` and `cacheScope`; calls charged exactly as a 2025 client's; 2025 clients
//! unchanged beside them.

use serde_json::{json, Value};
use tollgate_testkit::*;

use crate::common::{gateway, live_service, uniq, MCP_OPEN};

const V: &str = "2026-07-28";

fn meta() -> Value {
    json!({"io.modelcontextprotocol/protocolVersion": V,
           "io.modelcontextprotocol/clientCapabilities": {},
           "io.modelcontextprotocol/clientInfo": {"name": "t", "version": "1"}})
}

/// A request as a 2026 client sends it, with these headers on top of its own.
async fn call(
    gw: &Gateway,
    path: &str,
    method: &str,
    params: Value,
    extra: &[(&str, &str)],
) -> Response {
    let body = json!({"jsonrpc": "2.0", "id": 9, "method": method, "params": params}).to_string();
    let auth = format!("Bearer {}", gw.key);
    let mut headers = vec![
        ("Authorization", auth.as_str()),
        ("Content-Type", "application/json"),
        ("Accept", "application/json, text/event-stream"),
        ("Mcp-Method", method),
    ];
    if !extra.iter().any(|(k, _)| *k == "MCP-Protocol-Version") {
        headers.push(("MCP-Protocol-Version", V));
    }
    headers.extend_from_slice(extra);
    request(gw.addr, "POST", path, &headers, body.as_bytes()).await
}

fn rpc_error(r: &Response, status: u16, code: i64) -> Value {
    assert_eq!(r.status, status, "{}", r.text());
    let v = r.json();
    assert_eq!(v["id"], 9, "{v}");
    assert_eq!(v["error"]["code"], code, "{v}");
    v
}

#[tokio::test]
async fn a_stateless_client_discovers_lists_and_calls_and_is_charged_exactly() {
    let gw = gateway(MCP_OPEN).await;
    let tools = FakeToolServer::start().await;
    let slug = uniq("era");
    let (_, dev_key) = live_service(&gw, &slug, &tools.url(), 3).await;

    for path in ["/mcp".to_string(), format!("/mcp/{slug}")] {
        let r = call(&gw, &path, "server/discover", json!({"_meta": meta()}), &[]).await;
        assert_eq!(r.status, 200, "{}", r.text());
        let d = &r.json()["result"];
        assert_eq!(d["resultType"], "complete");
        assert_eq!(d["supportedVersions"][0], V);
        assert!(d["supportedVersions"]
            .as_array()
            .unwrap()
            .iter()
            .any(|v| v == "2025-11-25"));
        assert!(d["capabilities"]["tools"].is_object());
        assert_eq!(
            d["_meta"]["io.modelcontextprotocol/serverInfo"]["name"],
            "tollgate"
        );
        assert!(
            d["ttlMs"].as_u64().is_some() && d["cacheScope"].is_string(),
            "{d}"
        );

        let r = call(&gw, &path, "tools/list", json!({"_meta": meta()}), &[]).await;
        assert_eq!(r.status, 200, "{}", r.text());
        let l = &r.json()["result"];
        assert_eq!(l["resultType"], "complete");
        assert_eq!(l["cacheScope"], "private");
        assert!(l["ttlMs"].as_u64().unwrap() > 0);
        assert!(!l["tools"].as_array().unwrap().is_empty());
    }

    let before = gw.balance(&gw.key).await;
    let dev_before = gw.balance(&dev_key).await;
    let name = format!("{slug}__echo");
    let params = json!({"_meta": meta(), "name": name, "arguments": {"text": "hi"}});
    let r = call(
        &gw,
        "/mcp",
        "tools/call",
        params.clone(),
        &[("Mcp-Name", &name)],
    )
    .await;
    assert_eq!(r.status, 200, "{}", r.text());
    let v = r.json();
    assert_eq!(v["result"]["resultType"], "complete", "{v}");
    assert_eq!(v["result"]["content"][0]["text"], "hi");
    assert!(v["result"].get("ttlMs").is_none());
    assert_eq!(before - gw.balance(&gw.key).await, 3_000_000);
    assert_eq!(gw.balance(&dev_key).await - dev_before, 3_000_000);

    // A 2025 client beside it: as before.
    let r = request(gw.addr, "POST", "/mcp", &[("Authorization", &format!("Bearer {}", gw.key)), ("Content-Type", "application/json")],
        json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {"protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "old", "version": "1"}}}).to_string().as_bytes()).await;
    assert_eq!(r.json()["result"]["protocolVersion"], "2025-06-18");
    assert!(r.json()["result"].get("resultType").is_none());
}

#[tokio::test]
async fn a_stateless_request_that_breaks_the_rules_is_refused_with_its_status() {
    let gw = gateway(MCP_OPEN).await;
    let tools = FakeToolServer::start().await;
    let slug = uniq("rules");
    live_service(&gw, &slug, &tools.url(), 2).await;
    let before = gw.balance(&gw.key).await;
    let name = format!("{slug}__echo");
    // No _meta, or a _meta without its required members: -32602, 400.
    rpc_error(
        &call(&gw, "/mcp", "tools/list", json!({}), &[]).await,
        400,
        -32602,
    );
    let no_caps = json!({"_meta": {"io.modelcontextprotocol/protocolVersion": V}});
    rpc_error(
        &call(&gw, "/mcp", "tools/list", no_caps, &[]).await,
        400,
        -32602,
    );
    // Headers that disagree with the body: -32020, 400; nothing called, nothing charged.
    let params = json!({"_meta": meta(), "name": name, "arguments": {"text": "x"}});
    let other = format!("{slug}__add");
    rpc_error(
        &call(
            &gw,
            "/mcp",
            "tools/call",
            params.clone(),
            &[("Mcp-Name", &other)],
        )
        .await,
        400,
        -32020,
    );
    let body =
        json!({"jsonrpc": "2.0", "id": 9, "method": "tools/call", "params": params}).to_string();
    let auth = format!("Bearer {}", gw.key);
    let r = request(
        gw.addr,
        "POST",
        "/mcp",
        &[
            ("Authorization", &auth),
            ("Content-Type", "application/json"),
            ("MCP-Protocol-Version", V),
            ("Mcp-Method", "tools/list"),
        ],
        body.as_bytes(),
    )
    .await;
    rpc_error(&r, 400, -32020);
    assert_eq!(tools.calls(), 0);
    assert_eq!(gw.balance(&gw.key).await, before);
    // A version not spoken: -32022 naming the ones that are.
    let future = json!({"_meta": {"io.modelcontextprotocol/protocolVersion": "2099-01-01", "io.modelcontextprotocol/clientCapabilities": {}}});
    let v = rpc_error(
        &call(
            &gw,
            "/mcp",
            "tools/list",
            future,
            &[("MCP-Protocol-Version", "2099-01-01")],
        )
        .await,
        400,
        -32022,
    );
    assert_eq!(v["error"]["data"]["supported"], json!([V]));
    assert_eq!(v["error"]["data"]["requested"], "2099-01-01");
    // The methods the era removed: -32601, 404.
    for m in [
        "initialize",
        "ping",
        "logging/setLevel",
        "resources/subscribe",
    ] {
        rpc_error(
            &call(&gw, "/mcp", m, json!({"_meta": meta()}), &[]).await,
            404,
            -32601,
        );
    }
    rpc_error(
        &call(&gw, "/mcp", "no/such", json!({"_meta": meta()}), &[]).await,
        404,
        -32601,
    );
    assert!(gw.is_healthy().await);
}

#[tokio::test]
async fn a_tool_server_that_speaks_only_2026_registers_and_serves_both_eras() {
    let gw = gateway(MCP_OPEN).await;
    let tools = FakeToolServer::stateless().await;
    let slug = uniq("new");
    // The live check finds out its era (server/discover) and lists its tools in it.
    let (_, dev_key) = live_service(&gw, &slug, &tools.url(), 4).await;
    assert!(
        tools.stateless_requests() >= 2,
        "{}",
        tools.stateless_requests()
    );
    let before = gw.balance(&gw.key).await;
    let dev_before = gw.balance(&dev_key).await;
    let name = format!("{slug}__echo");

    // A 2025 client (initialize, then the call) and a 2026 one, each charged the price.
    let auth = format!("Bearer {}", gw.key);
    let old = json!({"jsonrpc": "2.0", "id": 3, "method": "tools/call", "params": {"name": name, "arguments": {"text": "old"}}});
    let r = request(
        gw.addr,
        "POST",
        "/mcp",
        &[
            ("Authorization", &auth),
            ("Content-Type", "application/json"),
        ],
        old.to_string().as_bytes(),
    )
    .await;
    assert_eq!(r.status, 200, "{}", r.text());
    assert_eq!(
        r.json()["result"]["content"][0]["text"],
        "old",
        "{}",
        r.text()
    );
    let params = json!({"_meta": meta(), "name": name, "arguments": {"text": "new"}});
    let r = call(&gw, "/mcp", "tools/call", params, &[("Mcp-Name", &name)]).await;
    assert_eq!(r.status, 200, "{}", r.text());
    assert_eq!(r.json()["result"]["content"][0]["text"], "new");
    assert_eq!(r.json()["result"]["resultType"], "complete");
    // Its own endpoint passes its other methods through in its era.
    let r = call(
        &gw,
        &format!("/mcp/{slug}"),
        "tools/call",
        json!({"_meta": meta(), "name": "add", "arguments": {"a": 1, "b": 2}}),
        &[("Mcp-Name", "add")],
    )
    .await;
    assert_eq!(
        r.json()["result"]["content"][0]["text"],
        "3",
        "{}",
        r.text()
    );
    assert_eq!(tools.calls(), 3);
    assert_eq!(before - gw.balance(&gw.key).await, 12_000_000);
    // The share of a 4-credit call, rounded up: 4.
    assert_eq!(gw.balance(&dev_key).await - dev_before, 3 * 4_000_000);
}
