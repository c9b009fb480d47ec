//! Bad input gets clear errors and changes nothing: malformed JSON-RPC on `/mcp`, garbage on the
//! owner's and the admin's routes.

use serde_json::json;
use tollgate_testkit::*;

use crate::common::{api, gateway, live_service, rpc, uniq, MCP_OPEN};

#[tokio::test]
async fn bad_json_rpc_gets_clear_errors() {
    let gw = gateway(MCP_OPEN).await;
    let tools = FakeToolServer::start().await;
    let wx = uniq("wx");
    live_service(&gw, &wx, &tools.url(), 1).await;
    let auth = format!("Bearer {}", gw.key);
    let post = |raw: &'static [u8]| {
        let (addr, auth) = (gw.addr, auth.clone());
        async move { request(addr, "POST", "/mcp", &[("Authorization", &auth)], raw).await }
    };
    for (raw, code) in [
        (&b"{"[..], -32700),
        (br#"[{"jsonrpc":"2.0","id":1,"method":"ping"}]"#, -32600),
        (br#"{"id":1,"method":"ping"}"#, -32600),
    ] {
        let r = post(raw).await;
        assert_eq!(r.status, 400, "{}", r.text());
        assert_eq!(r.json()["error"]["code"], code);
    }
    let r = post(br#"{"jsonrpc":"2.0","method":"notifications/initialized"}"#).await;
    assert_eq!(r.status, 202);
    assert_eq!(
        rpc(&gw, "/mcp", &gw.key, "resources/list", json!({})).await["error"]["code"],
        -32601
    );
    assert_eq!(
        rpc(
            &gw,
            "/mcp",
            &gw.key,
            "tools/call",
            json!({"name": format!("{wx}__nope")})
        )
        .await["error"]["code"],
        -32602
    );
    assert_eq!(
        rpc(&gw, "/mcp", &gw.key, "tools/call", json!({})).await["error"]["code"],
        -32602
    );
    assert_eq!(
        rpc(
            &gw,
            "/mcp",
            &gw.key,
            "tools/call",
            json!({"name": format!("{wx}__echo"), "arguments": 3})
        )
        .await["error"]["code"],
        -32602
    );
    assert_eq!(
        rpc(&gw, "/mcp", &gw.key, "ping", json!({})).await["result"],
        json!({})
    );
    request(
        gw.addr,
        "POST",
        "/mcp",
        &[],
        br#"{"jsonrpc":"2.0","id":1,"method":"ping"}"#,
    )
    .await
    .error(401, "authentication_error");
    get(gw.addr, "/mcp").await.error(405, "invalid_request");
    request(
        gw.addr,
        "POST",
        "/mcp/ghost",
        &[("Authorization", &auth)],
        br#"{"jsonrpc":"2.0","id":1,"method":"ping"}"#,
    )
    .await
    .error(404, "not_found");
    let head = format!(
        "POST /mcp HTTP/1.1\r\nHost: {}\r\nAuthorization: {auth}\r\nContent-Length: 99999999\r\n\r\n",
        gw.addr
    );
    raw_request(gw.addr, head.as_bytes())
        .await
        .error(400, "invalid_request");
    assert_eq!(
        gw.usage(&gw.key).await["recent"].as_array().unwrap().len(),
        0,
        "nothing half-written"
    );
    assert!(gw.is_healthy().await);
}

#[tokio::test]
async fn garbage_on_the_owner_and_admin_routes_gets_clear_errors() {
    let gw = gateway(MCP_OPEN).await;
    let tools = FakeToolServer::start().await;
    let wx = uniq("wx");
    let (_dev, dev_key) = live_service(&gw, &wx, &tools.url(), 2).await;
    let patch = format!("/api/v1/mcp/services/{wx}");
    for (auth, path, method) in [
        (dev_key.as_str(), patch.as_str(), "PATCH"),
        (ADMIN_TOKEN, "/api/v1/admin/mcp/services", "POST"),
    ] {
        let auth = format!("Bearer {auth}");
        for raw in [&b"{"[..], b"[]", b"", b"{\"upstream_url\": 7}"] {
            let r = request(gw.addr, method, path, &[("Authorization", &auth)], raw).await;
            r.error(400, "invalid_request");
        }
    }
    api(&gw, "PATCH", &patch, &dev_key, &json!({}))
        .await
        .error(400, "invalid_request");
    api(
        &gw,
        "PATCH",
        &patch,
        &dev_key,
        &json!({"upstream_url": "ftp://x"}),
    )
    .await
    .error(400, "invalid_request");
    let v = api(
        &gw,
        "GET",
        "/api/v1/admin/mcp/services?status=bogus",
        ADMIN_TOKEN,
        &json!({}),
    )
    .await;
    v.error(400, "invalid_request");
    // Nothing changed by any of it.
    let s = api(&gw, "GET", "/api/v1/mcp/services", &dev_key, &json!({}))
        .await
        .json();
    assert_eq!(s["data"][0]["default_credits"], 2);
    assert_eq!(s["data"][0]["status"], "live");
    assert_eq!(s["data"].as_array().unwrap().len(), 1);
    assert!(gw.is_healthy().await);
}
