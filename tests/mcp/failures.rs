//! Failed calls cost nothing: every way a tool server fails is free (and recorded), a broke caller
//! is refused before the call, and a crash mid-call loses no money and pays nobody.

use serde_json::json;
use tollgate_testkit::*;

use crate::common::{gateway, live_service, rpc, uniq, MCP_OPEN};

#[tokio::test]
async fn every_failed_call_is_free() {
    let gw = gateway(MCP_OPEN).await;
    let tools = FakeToolServer::start().await;
    let flaky = uniq("flaky");
    let (_dev, dev_key) = live_service(&gw, &flaky, &tools.url(), 5).await;
    let before = (gw.balance(&gw.key).await, gw.balance(&dev_key).await);
    for (mode, code) in [
        (ToolMode::Fail, Some(-32003)),
        (ToolMode::Hang, Some(-32003)),
        (ToolMode::RpcError, Some(-32602)),
        (ToolMode::IsError, None),
        (ToolMode::Huge, Some(-32003)),
        (ToolMode::NotJson, Some(-32003)),
        (ToolMode::NotRpc, Some(-32003)),
    ] {
        tools.set_mode(mode.clone());
        let v = rpc(
            &gw,
            "/mcp",
            &gw.key,
            "tools/call",
            json!({"name": format!("{flaky}__echo"), "arguments": {"text": "x"}}),
        )
        .await;
        match code {
            Some(c) => assert_eq!(v["error"]["code"], c, "{mode:?}: {v}"),
            None => assert_eq!(v["result"]["isError"], true, "{mode:?}: {v}"),
        }
        // A reply that is no response is named as such, in words.
        let said = v["error"]["message"]
            .as_str()
            .unwrap_or_default()
            .to_owned();
        match mode {
            ToolMode::NotJson => assert!(said.contains("not JSON"), "{said}"),
            ToolMode::NotRpc => assert!(said.contains("not a JSON-RPC response"), "{said}"),
            _ => {}
        }
        assert_eq!(
            (gw.balance(&gw.key).await, gw.balance(&dev_key).await),
            before,
            "{mode:?}"
        );
    }
    // Wrong argument types are the tool's to judge (passed through): here it answers isError.
    tools.set_mode(ToolMode::Ok);
    let v = rpc(
        &gw,
        "/mcp",
        &gw.key,
        "tools/call",
        json!({"name": format!("{flaky}__add"), "arguments": {"a": "x", "b": []}}),
    )
    .await;
    assert_eq!(v["result"]["isError"], true);
    assert_eq!(gw.balance(&gw.key).await, before.0);
    let rows = gw.usage(&gw.key).await["recent"]
        .as_array()
        .unwrap()
        .clone();
    assert_eq!(rows.len(), 8, "each failed call is recorded");
    assert!(rows.iter().all(|r| r["credits"].as_f64() == Some(0.0)));
    // A broke caller is refused before the call.
    let (_poor, poor_key) = gw.signup(&unique_email()).await;
    let (uid, _) = (
        gw.me(&poor_key).await["user_id"]
            .as_str()
            .unwrap()
            .to_owned(),
        (),
    );
    let bal = gw.balance(&poor_key).await as f64 / 1e6;
    gw.admin_credits(&uid, -bal).await;
    let calls = tools.calls();
    let v = rpc(
        &gw,
        "/mcp",
        &poor_key,
        "tools/call",
        json!({"name": format!("{flaky}__echo"), "arguments": {"text": "x"}}),
    )
    .await;
    assert_eq!(v["error"]["code"], -32002, "{v}");
    assert_eq!(v["error"]["data"]["type"], "insufficient_credits");
    assert_eq!(tools.calls(), calls);
    assert!(gw.is_healthy().await);
}

#[tokio::test]
async fn a_crash_mid_call_loses_no_money_and_pays_nobody() {
    let tools = FakeToolServer::start().await;
    tools.set_mode(ToolMode::Hang);
    let fake = FakeOpenAi::start("p").await;
    let cfg = format!(
        "{}[mcp]\nallow_private_upstreams = true\ncall_timeout = 30\n",
        one_model_config(&fake, "m-2024-01-01")
    );
    let storage = "hold_ttl_secs = 1.5\nhold_reap_interval_secs = 0.3".to_string();
    let mut doomed = Gateway::start_opts(
        tollgate_bin!(),
        &cfg,
        Opts {
            storage,
            ..Opts::default()
        },
    )
    .await;
    let survivor = doomed.second(tollgate_bin!(), &cfg).await;
    let wx = uniq("wx");
    let (_dev, dev_key) = live_service(&doomed, &wx, &tools.url(), 9).await;
    let key = doomed.key.clone();
    let initial = (
        survivor.balance(&key).await,
        survivor.balance(&dev_key).await,
    );
    // A call that will never be answered, on the instance about to die.
    let body = serde_json::to_vec(&json!({"jsonrpc": "2.0", "id": 1, "method": "tools/call",
        "params": {"name": format!("{wx}__echo"), "arguments": {"text": "x"}}}))
    .unwrap();
    let mut s = tokio::net::TcpStream::connect(doomed.addr).await.unwrap();
    let head = format!("POST /mcp HTTP/1.1\r\nHost: {}\r\nAuthorization: Bearer {key}\r\nContent-Length: {}\r\n\r\n", doomed.addr, body.len());
    tokio::io::AsyncWriteExt::write_all(&mut s, head.as_bytes())
        .await
        .unwrap();
    tokio::io::AsyncWriteExt::write_all(&mut s, &body)
        .await
        .unwrap();
    let t = std::time::Instant::now();
    while tools.calls() == 0 {
        assert!(
            t.elapsed() < std::time::Duration::from_secs(5),
            "the call never reached the tool"
        );
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
    }
    // The price is held (in a hold row or the instance's credit lease, whose unspent part the
    // other instance counts as balance), then the instance dies mid-call.
    let db = doomed.config_db();
    assert!(
        tollgate_testkit::books::read(&db, &doomed.user_id)
            .await
            .holds
            > 0
    );
    doomed.child.kill().unwrap();
    doomed.child.wait().unwrap();
    let t = std::time::Instant::now();
    while tollgate_testkit::books::read(&db, &doomed.user_id)
        .await
        .holds
        != 0
        || survivor.balance(&key).await != initial.0
    {
        assert!(
            t.elapsed() < std::time::Duration::from_secs(8),
            "hold not released: {}",
            survivor.log()
        );
        tokio::time::sleep(std::time::Duration::from_millis(200)).await;
    }
    tokio::time::sleep(std::time::Duration::from_millis(800)).await;
    assert_eq!(
        survivor.balance(&key).await,
        initial.0,
        "refunded once, not twice"
    );
    assert_eq!(
        survivor.balance(&dev_key).await,
        initial.1,
        "the developer is not paid"
    );
    let rows = survivor.usage(&key).await["recent"]
        .as_array()
        .unwrap()
        .clone();
    assert!(rows
        .iter()
        .all(|r| r["model_requested"] != format!("{wx}__echo").as_str()));
}
