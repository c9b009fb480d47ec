//! What a call costs: the caller charged the price exactly, the developer paid their share, and
//! tool calls counted against the caller's plan rate limit.

use serde_json::json;
use tollgate_testkit::*;

use crate::common::{api, gateway, live_service, names, rpc, uniq, MCP_OPEN};

#[tokio::test]
async fn calls_are_charged_exactly_and_developers_paid_their_share() {
    let gw = gateway(MCP_OPEN).await;
    let tools = FakeToolServer::start().await;
    let mut devs = Vec::new();
    for (price, share) in [(1u64, 1i64), (7, 6), (59, 48), (60, 48)] {
        let slug = uniq(&format!("p{price}"));
        let (dev, dev_key) = live_service(&gw, &slug, &tools.url(), price).await;
        devs.push((slug, price as i64, share, dev, dev_key));
    }
    let before = gw.balance(&gw.key).await;
    // Listing is free.
    let listed = names(&rpc(&gw, "/mcp", &gw.key, "tools/list", json!({})).await);
    let ours = listed
        .iter()
        .filter(|n| devs.iter().any(|d| n.starts_with(&format!("{}__", d.0))))
        .count();
    assert_eq!(ours, 8, "{listed:?}");
    assert_eq!(gw.balance(&gw.key).await, before);
    let init = rpc(&gw, "/mcp", &gw.key, "initialize", json!({"protocolVersion": "2025-03-26", "capabilities": {}, "clientInfo": {"name": "t", "version": "1"}})).await;
    assert_eq!(init["result"]["protocolVersion"], "2025-03-26");
    let mut spent = 0;
    for (slug, price, share, _dev, dev_key) in &devs {
        let dev_before = gw.balance(dev_key).await;
        let v = rpc(
            &gw,
            "/mcp",
            &gw.key,
            "tools/call",
            json!({"name": format!("{slug}__echo"), "arguments": {"text": "hello"}}),
        )
        .await;
        assert_eq!(v["result"]["content"][0]["text"], "hello", "{v}");
        spent += price * 1_000_000;
        assert_eq!(before - gw.balance(&gw.key).await, spent, "{slug}");
        assert_eq!(
            gw.balance(dev_key).await - dev_before,
            share * 1_000_000,
            "{slug}"
        );
        let e = api(&gw, "GET", "/api/v1/mcp/earnings", dev_key, &json!({}))
            .await
            .json();
        assert_eq!(e["total_calls"], 1);
        assert_eq!(e["total_credits_earned"].as_f64(), Some(*share as f64));
        assert_eq!(e["services"][0]["slug"], slug.as_str());
        assert_eq!(e["recent"][0]["tool"], "echo");
    }
    // One service's endpoint: its tools under their own names, its other methods passed through.
    let p7 = format!("/mcp/{}", devs[1].0);
    let v = rpc(
        &gw,
        &p7,
        &gw.key,
        "tools/call",
        json!({"name": "add", "arguments": {"a": 2, "b": 3}}),
    )
    .await;
    assert_eq!(v["result"]["content"][0]["text"], "5");
    spent += 7_000_000;
    let v = rpc(&gw, &p7, &gw.key, "resources/list", json!({})).await;
    assert_eq!(v["result"]["resources"][0]["uri"], "fake://readme");
    assert_eq!(
        before - gw.balance(&gw.key).await,
        spent,
        "resources/list is free"
    );
    // The usage rows say what was called.
    let u = gw.usage(&gw.key).await;
    assert_eq!(
        u["recent"][0]["model_requested"],
        format!("{}__add", devs[1].0)
    );
    assert_eq!(u["recent"][0]["credits"].as_f64(), Some(7.0));
}

#[tokio::test]
async fn tool_calls_count_against_the_plan_rate_limit() {
    let gw = gateway(MCP_OPEN).await;
    let tools = FakeToolServer::start().await;
    let wx = uniq("wx");
    live_service(&gw, &wx, &tools.url(), 1).await;
    let (uid, key) = gw.signup(&unique_email()).await;
    gw.admin_plan(&uid, "free", Some(1), None).await;
    let call = json!({"name": format!("{wx}__echo"), "arguments": {"text": "a"}});
    assert!(rpc(&gw, "/mcp", &key, "tools/call", call.clone()).await["result"].is_object());
    let before = gw.balance(&key).await;
    let v = rpc(&gw, "/mcp", &key, "tools/call", call).await;
    assert_eq!(v["error"]["code"], -32001, "{v}");
    assert!(v["error"]["data"]["retry_after"].as_u64().unwrap() >= 1);
    assert_eq!(gw.balance(&key).await, before);
    assert_eq!(tools.calls(), 1);
}

#[tokio::test]
async fn each_tool_call_writes_one_access_log_line_and_other_methods_none() {
    let gw = gateway(MCP_OPEN).await;
    let tools = FakeToolServer::start().await;
    let slug = uniq("logged");
    let (_dev, _dev_key) = live_service(&gw, &slug, &tools.url(), 3).await;
    let lines = |log: &str| -> Vec<String> {
        log.lines()
            .filter(|l| l.contains(": tool call "))
            .map(str::to_owned)
            .collect()
    };
    let before = lines(&gw.log()).len();
    rpc(&gw, "/mcp", &gw.key, "tools/list", json!({})).await;
    let v = rpc(
        &gw,
        "/mcp",
        &gw.key,
        "tools/call",
        json!({"name": format!("{slug}__echo"), "arguments": {"text": "hi"}}),
    )
    .await;
    assert_eq!(v["result"]["content"][0]["text"], "hi", "{v}");
    let v = rpc(
        &gw,
        "/mcp",
        &gw.key,
        "tools/call",
        json!({"name": format!("{slug}__nothing")}),
    )
    .await;
    assert!(v["error"].is_object(), "{v}");
    // The access log is written after the answer: give it a moment.
    tokio::time::sleep(std::time::Duration::from_millis(300)).await;
    let log = gw.log();
    let all = lines(&log);
    let new = &all[before..];
    assert_eq!(
        new.len(),
        2,
        "one line per call, none for tools/list: {new:#?}"
    );
    let ok = &new[0];
    assert!(
        ok.contains(&format!("model_requested=\"{slug}__echo\"")),
        "{ok}"
    );
    assert!(ok.contains("route=\"mcp\""), "{ok}");
    // Settled through its charge: what it cost, committed or in the account's lease.
    assert!(
        ok.contains("charged_micros=3000000") || ok.contains("leased_micros=3000000"),
        "{ok}"
    );
    let unknown = &new[1];
    assert!(
        unknown.contains(&format!("model_requested=\"{slug}__nothing\"")),
        "{unknown}"
    );
    assert!(!unknown.contains("charged_micros=3000000"), "{unknown}");
}

/// An organization key's tool call (issue 51): charged to the organization's wallet, the
/// developer paid its share, counted against the member's cap (402-refused as a JSON-RPC error
/// once the cap cannot pay the price), the member's own account untouched.
#[tokio::test]
async fn an_organization_keys_calls_are_charged_to_the_organization_within_the_members_cap() {
    let gw = gateway(MCP_OPEN).await;
    let tools = FakeToolServer::start().await;
    let slug = uniq("orgcall");
    let (_dev, dev_key) = live_service(&gw, &slug, &tools.url(), 2).await;
    let owner_email = unique_email();
    let (_, owner_key) = gw.signup(&owner_email).await;
    let r = api(
        &gw,
        "POST",
        "/api/v1/orgs",
        &owner_key,
        &json!({"name": "Tools"}),
    )
    .await;
    let org = r.json()["id"].as_str().unwrap().to_owned();
    gw.admin_credits(&org, 10.0).await;
    let r = api(
        &gw,
        "POST",
        "/api/v1/keys",
        &owner_key,
        &json!({"name": "agent", "organization_id": org}),
    )
    .await;
    assert_eq!(r.status, 201, "{}", r.text());
    let key = r.json()["key"].as_str().unwrap().to_owned();
    let owner_id = gw.me(&owner_key).await["user_id"]
        .as_str()
        .unwrap()
        .to_owned();
    // A cap of 5 credits a day: two calls of 2 fit, the third does not.
    let cap = json!({"account_id": owner_id, "cap_credits": 5, "period": "day"});
    let r = api(
        &gw,
        "PUT",
        &format!("/api/v1/orgs/{org}/caps"),
        &owner_key,
        &cap,
    )
    .await;
    assert_eq!(r.status, 200, "{}", r.text());
    let (personal, dev_before) = (gw.balance(&owner_key).await, gw.balance(&dev_key).await);
    let call = json!({"name": format!("{slug}__echo"), "arguments": {"text": "hi"}});
    for _ in 0..2 {
        let v = rpc(&gw, "/mcp", &key, "tools/call", call.clone()).await;
        assert_eq!(v["result"]["content"][0]["text"], "hi", "{v}");
    }
    let v = rpc(&gw, "/mcp", &key, "tools/call", call).await;
    let msg = v["error"]["message"]
        .as_str()
        .unwrap_or_default()
        .to_owned();
    assert!(msg.contains("member cap"), "{v}");
    let o = api(
        &gw,
        "GET",
        &format!("/api/v1/orgs/{org}"),
        &owner_key,
        &json!({}),
    )
    .await
    .json();
    assert_eq!(
        micros(&o["credits"]),
        6_000_000,
        "two calls of 2 credits from 10: {o}"
    );
    assert_eq!(
        gw.balance(&owner_key).await,
        personal,
        "the member's own account pays nothing"
    );
    // The developer's share of each call (2 credits at the default 80 %, rounded up).
    assert!(gw.balance(&dev_key).await > dev_before);
}
