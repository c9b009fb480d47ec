//! Listing and calling tools: results and params passed on as sent, tool lists refreshed in the
//! background, a forgotten upstream session started again, and any instance serving any agent.

use serde_json::json;
use tollgate_testkit::*;

use crate::common::{api, gateway, live_service, names, rpc, uniq, MCP_OPEN};

#[tokio::test]
async fn a_tools_result_reaches_the_agent_byte_for_byte() {
    // The result is the tool server's: passed on as sent (spacing, escapes, key order, a number
    // no f64 holds), from a JSON reply and from an event stream alike.
    let gw = gateway(MCP_OPEN).await;
    for tools in [FakeToolServer::start().await, FakeToolServer::sse().await] {
        let slug = uniq("verbatim");
        live_service(&gw, &slug, &tools.url(), 1).await;
        tools.set_mode(ToolMode::Verbatim);
        let before = gw.balance(&gw.key).await;
        let call = json!({"jsonrpc": "2.0", "id": "q-1", "method": "tools/call",
            "params": {"name": format!("{slug}__echo"), "arguments": {"text": "x"}}});
        let r = api(&gw, "POST", "/mcp", &gw.key, &call).await;
        assert_eq!(r.status, 200, "{}", r.text());
        assert_eq!(
            r.text(),
            format!(r#"{{"jsonrpc":"2.0","id":"q-1","result":{VERBATIM_RESULT}}}"#)
        );
        assert_eq!(
            before - gw.balance(&gw.key).await,
            1_000_000,
            "a result with content is a success, charged"
        );
    }
}

#[tokio::test]
async fn an_agents_params_reach_the_tool_server_as_sent_but_for_the_tools_name() {
    // The params are the agent's: spacing, key order, escapes and members the gateway does not
    // read (`_meta`) reach the server as written; only `name` becomes the tool's own name.
    let gw = gateway(MCP_OPEN).await;
    let tools = FakeToolServer::start().await;
    let slug = uniq("params");
    live_service(&gw, &slug, &tools.url(), 1).await;
    let params = r#"{ "_meta" : {"progressToken":7}, "arguments":{"text":"caf\u00e9 \"q\"", "z":1, "a":[ ]}, "name":"SLUG__echo"}"#;
    let body = format!(
        r#"{{"jsonrpc":"2.0","id":5,"method":"tools/call","params":{}}}"#,
        params.replace("SLUG", &slug)
    );
    let auth = format!("Bearer {}", gw.key);
    let r = request(
        gw.addr,
        "POST",
        "/mcp",
        &[
            ("Authorization", &auth),
            ("Content-Type", "application/json"),
        ],
        body.as_bytes(),
    )
    .await;
    assert_eq!(r.status, 200, "{}", r.text());
    assert!(r.text().contains(r#""id":5"#), "{}", r.text());
    // Byte for byte but for the name, under an id of the gateway's (its own in its session).
    let sent = format!(
        r#","method":"tools/call","params":{}}}"#,
        params.replace("SLUG__echo", "echo")
    );
    let got = String::from_utf8(tools.last_call()).unwrap();
    let id = got
        .strip_prefix(r#"{"jsonrpc":"2.0","id":"#)
        .and_then(|rest| rest.strip_suffix(&sent))
        .unwrap_or_else(|| panic!("{got}"));
    assert!(id.parse::<u64>().is_ok_and(|n| n > 0), "{got}");
}

#[tokio::test]
async fn tool_lists_are_refreshed_in_the_background() {
    let gw = gateway("[mcp]\nallow_private_upstreams = true\nrefresh_secs = 0.2\n").await;
    let tools = FakeToolServer::start().await;
    let wx = uniq("wx");
    live_service(&gw, &wx, &tools.url(), 1).await;
    let path = format!("/mcp/{wx}");
    assert_eq!(
        names(&rpc(&gw, &path, &gw.key, "tools/list", json!({})).await),
        ["echo", "add"]
    );
    tools.add_tool();
    let mut seen = Vec::new();
    for _ in 0..60 {
        seen = names(&rpc(&gw, &path, &gw.key, "tools/list", json!({})).await);
        if seen.len() == 3 {
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
    }
    assert_eq!(seen, ["echo", "add", "shout"]);
}

#[tokio::test]
async fn a_forgotten_upstream_session_is_started_again_and_any_instance_serves_any_agent() {
    let one = gateway(MCP_OPEN).await;
    let tools = FakeToolServer::start().await;
    let wx = uniq("wx");
    let (_dev, dev_key) = live_service(&one, &wx, &tools.url(), 4).await;
    let call = json!({"name": format!("{wx}__echo"), "arguments": {"text": "a"}});
    assert!(rpc(&one, "/mcp", &one.key, "tools/call", call.clone()).await["result"].is_object());
    tools.forget_sessions();
    assert!(rpc(&one, "/mcp", &one.key, "tools/call", call.clone()).await["result"].is_object());
    // A second instance on the same ledger: initialise on one, call on the other.
    let fake = FakeOpenAi::start("p").await;
    let cfg = format!("{}{MCP_OPEN}", one_model_config(&fake, "m-2024-01-01"));
    let two = one.second(tollgate_bin!(), &cfg).await;
    let dev_before = one.balance(&dev_key).await;
    rpc(
        &one,
        "/mcp",
        &one.key,
        "initialize",
        json!({"protocolVersion": "2025-06-18"}),
    )
    .await;
    let v = rpc(&two, "/mcp", &one.key, "tools/call", call.clone()).await;
    assert_eq!(v["result"]["content"][0]["text"], "a");
    // Charged once, on the instance that served the call (its usage row, read there)...
    let rows = two.usage(&one.key).await["recent"]
        .as_array()
        .unwrap()
        .clone();
    assert_eq!(
        rows.iter()
            .filter(|r| r["model_requested"] == format!("{wx}__echo").as_str())
            .count(),
        3
    );
    assert_eq!(rows[0]["credits"].as_f64(), Some(4.0));
    // ...and the developer paid (4 × 80 % = 3.2, rounded up to 4) once its round is written.
    let mut paid = 0;
    for _ in 0..50 {
        paid = one.balance(&dev_key).await - dev_before;
        if paid != 0 {
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    }
    assert_eq!(paid, 4_000_000);
}
