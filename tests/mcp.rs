//! The MCP tool marketplace end to end: registration checked live (and refused clearly), the
//! SSRF guard, the states and who may move them, `/mcp` and `/mcp/{slug}` for agents, exact
//! charges and developer shares, every failed call free, bad JSON-RPC refused, sessions
//! re-initialised upstream, and any instance serving any agent. SQLite, and Postgres + Redis
//! when set.

use serde_json::{json, Value};
use tollgate_testkit::*;

const MCP_OPEN: &str = "[mcp]\nallow_private_upstreams = true\ncall_timeout = 1\n";

async fn gateway(mcp: &str) -> Gateway {
    let fake = FakeOpenAi::start("p").await;
    let cfg = format!(
        "{FAST_TIMEOUTS}{}{}{mcp}",
        provider("p", &[&fake], ""),
        model("m-2024-01-01", "p", "economy", ""),
    );
    Gateway::start(tollgate_bin!(), &cfg).await
}

async fn api(gw: &Gateway, method: &str, path: &str, auth: &str, body: &Value) -> Response {
    let b = serde_json::to_vec(body).unwrap();
    let auth = format!("Bearer {auth}");
    request(
        gw.addr,
        method,
        path,
        &[
            ("Authorization", &auth),
            ("Content-Type", "application/json"),
        ],
        &b,
    )
    .await
}

async fn register(gw: &Gateway, key: &str, slug: &str, url: &str, price: u64) -> Response {
    api(
        gw,
        "POST",
        "/api/v1/mcp/services",
        key,
        &json!({"slug": slug, "upstream_url": url, "default_credits": price}),
    )
    .await
}

async fn admin(gw: &Gateway, slug: &str, action: &str) -> Response {
    api(
        gw,
        "POST",
        &format!("/api/v1/admin/mcp/services/{slug}/{action}"),
        ADMIN_TOKEN,
        &json!({}),
    )
    .await
}

async fn rpc(gw: &Gateway, path: &str, key: &str, method: &str, params: Value) -> Value {
    let r = api(
        gw,
        "POST",
        path,
        key,
        &json!({"jsonrpc": "2.0", "id": 7, "method": method, "params": params}),
    )
    .await;
    assert_eq!(r.status, 200, "{}", r.text());
    let v = r.json();
    assert_eq!(v["jsonrpc"], "2.0");
    assert_eq!(v["id"], 7);
    v
}

/// A developer account with a live service at `url` priced `price`.
async fn live_service(gw: &Gateway, slug: &str, url: &str, price: u64) -> (String, String) {
    let (dev, dev_key) = gw.signup(&unique_email()).await;
    let r = register(gw, &dev_key, slug, url, price).await;
    assert_eq!(r.status, 201, "{}", r.text());
    assert_eq!(admin(gw, slug, "approve").await.status, 200);
    (dev, dev_key)
}

/// A slug no other test or run has registered (the ledger may be shared).
fn uniq(base: &str) -> String {
    let e = unique_email();
    let n = e
        .trim_start_matches('u')
        .split('@')
        .next()
        .unwrap_or_default();
    format!("{base}-{n}")
}

fn names(list: &Value) -> Vec<String> {
    list["result"]["tools"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["name"].as_str().unwrap().to_owned())
        .collect()
}

#[tokio::test]
async fn registration_is_checked_live_and_bad_input_is_refused() {
    let gw = gateway(MCP_OPEN).await;
    let (tools, plain, sse, empty) = (
        FakeToolServer::start().await,
        FakeToolServer::plain().await,
        FakeToolServer::sse().await,
        FakeToolServer::empty().await,
    );
    let key = gw.key.clone();
    for (slug, url, price, field) in [
        ("A", tools.url(), 1, "slug"),
        ("-ab", tools.url(), 1, "slug"),
        ("ab", tools.url(), 61, "default_credits"),
        ("ab", "ftp://x/y".to_string(), 1, "upstream_url"),
    ] {
        let v = register(&gw, &key, slug, &url, price)
            .await
            .error(400, "invalid_request");
        assert!(
            v["error"]["message"].as_str().unwrap().starts_with(field),
            "{v}"
        );
    }
    let v = api(
        &gw,
        "POST",
        "/api/v1/mcp/services",
        &key,
        &json!({"slug": "ab", "upstream_url": tools.url(), "default_credits": "5"}),
    )
    .await
    .error(400, "invalid_request");
    assert!(v["error"]["message"]
        .as_str()
        .unwrap()
        .starts_with("default_credits"));
    let dead = format!("http://127.0.0.1:{}/mcp", free_port());
    let v = register(&gw, &key, "dead", &dead, 1)
        .await
        .error(422, "tool_server_check_failed");
    assert!(
        v["error"]["message"]
            .as_str()
            .unwrap()
            .contains("could not be connected to"),
        "{v}"
    );
    let v = register(&gw, &key, "empty", &empty.url(), 1)
        .await
        .error(422, "tool_server_check_failed");
    assert!(
        v["error"]["message"].as_str().unwrap().contains("no tools"),
        "{v}"
    );
    let weather = uniq("weather");
    let r = register(&gw, &key, &weather, &tools.url(), 7).await;
    assert_eq!(r.status, 201, "{}", r.text());
    let v = r.json();
    assert_eq!(v["status"], "pending");
    assert_eq!(v["tools"], json!(["echo", "add"]));
    assert_eq!(v["default_credits"], 7);
    assert!(v["id"].as_str().unwrap().starts_with("svc_"));
    register(&gw, &key, &weather, &tools.url(), 7)
        .await
        .error(409, "conflict");
    // A plain JSON-RPC handler (no initialize, no session) and an SSE-speaking server pass too.
    assert_eq!(
        register(&gw, &key, &uniq("plain"), &plain.url(), 1)
            .await
            .status,
        201
    );
    assert_eq!(
        register(&gw, &key, &uniq("streamy"), &sse.url(), 1)
            .await
            .status,
        201
    );
    // Garbage bodies.
    for raw in [&b"{"[..], b"[]", b""] {
        let auth = format!("Bearer {key}");
        request(
            gw.addr,
            "POST",
            "/api/v1/mcp/services",
            &[("Authorization", &auth)],
            raw,
        )
        .await
        .error(400, "invalid_request");
    }
    // Without a key.
    request(gw.addr, "POST", "/api/v1/mcp/services", &[], b"{}")
        .await
        .error(401, "authentication_error");
    assert!(gw.is_healthy().await);
}

#[tokio::test]
async fn upstreams_on_private_addresses_are_refused_by_default() {
    let gw = gateway("").await;
    let tools = FakeToolServer::start().await;
    let v = register(&gw, &gw.key, "local", &tools.url(), 1)
        .await
        .error(400, "invalid_request");
    assert!(
        v["error"]["message"].as_str().unwrap().contains("loopback"),
        "{v}"
    );
    let v = register(&gw, &gw.key, "meta", "http://169.254.169.254/latest", 1)
        .await
        .error(400, "invalid_request");
    assert!(
        v["error"]["message"].as_str().unwrap().contains("metadata"),
        "{v}"
    );
}

#[tokio::test]
async fn only_live_services_are_offered_and_only_the_admin_moves_them() {
    let gw = gateway(MCP_OPEN).await;
    let tools = FakeToolServer::start().await;
    let (_dev, dev_key) = gw.signup(&unique_email()).await;
    let (wx, nope) = (uniq("wx"), uniq("nope"));
    // Tools of this test's services only (the ledger may hold other tests').
    let mine = |v: Value| -> Vec<String> {
        names(&v)
            .into_iter()
            .filter(|n| n.starts_with(&wx) || n.starts_with(&nope) || !n.contains("__"))
            .collect()
    };
    assert_eq!(
        register(&gw, &dev_key, &wx, &tools.url(), 2).await.status,
        201
    );
    assert_eq!(
        register(&gw, &dev_key, &nope, &tools.url(), 2).await.status,
        201
    );
    assert!(
        mine(rpc(&gw, "/mcp", &gw.key, "tools/list", json!({})).await).is_empty(),
        "pending is not offered"
    );
    // A user key cannot approve.
    api(
        &gw,
        "POST",
        &format!("/api/v1/admin/mcp/services/{wx}/approve"),
        &dev_key,
        &json!({}),
    )
    .await
    .error(401, "authentication_error");
    assert_eq!(admin(&gw, &wx, "approve").await.json()["status"], "live");
    assert_eq!(
        admin(&gw, &nope, "reject").await.json()["status"],
        "rejected"
    );
    admin(&gw, &nope, "approve").await.error(409, "conflict");
    admin(&gw, "ghost", "approve").await.error(404, "not_found");
    assert_eq!(
        mine(rpc(&gw, "/mcp", &gw.key, "tools/list", json!({})).await),
        [format!("{wx}__echo"), format!("{wx}__add")]
    );
    let one = format!("/mcp/{wx}");
    assert_eq!(
        names(&rpc(&gw, &one, &gw.key, "tools/list", json!({})).await),
        ["echo", "add"]
    );
    assert_eq!(
        admin(&gw, &wx, "suspend").await.json()["status"],
        "suspended"
    );
    assert!(mine(rpc(&gw, "/mcp", &gw.key, "tools/list", json!({})).await).is_empty());
    let v = rpc(
        &gw,
        "/mcp",
        &gw.key,
        "tools/call",
        json!({"name": format!("{wx}__echo"), "arguments": {"text": "hi"}}),
    )
    .await;
    assert_eq!(v["error"]["code"], -32602, "{v}");
    assert_eq!(admin(&gw, &wx, "resume").await.json()["status"], "live");
    let listed = api(
        &gw,
        "GET",
        "/api/v1/admin/mcp/services?status=live",
        ADMIN_TOKEN,
        &json!({}),
    )
    .await
    .json();
    let slugs: Vec<Value> = listed["data"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| s["slug"].clone())
        .collect();
    assert!(
        slugs.contains(&json!(wx)) && !slugs.contains(&json!(nope)),
        "{slugs:?}"
    );
    // Owners see only their own, and only they may change them.
    let mine = api(&gw, "GET", "/api/v1/mcp/services", &dev_key, &json!({}))
        .await
        .json();
    assert_eq!(mine["data"].as_array().unwrap().len(), 2);
    let theirs = api(&gw, "GET", "/api/v1/mcp/services", &gw.key, &json!({}))
        .await
        .json();
    assert_eq!(theirs["data"].as_array().unwrap().len(), 0);
    api(
        &gw,
        "PATCH",
        &format!("/api/v1/mcp/services/{wx}"),
        &gw.key,
        &json!({"default_credits": 1}),
    )
    .await
    .error(404, "not_found");
    let v = api(
        &gw,
        "PATCH",
        &format!("/api/v1/mcp/services/{wx}"),
        &dev_key,
        &json!({"default_credits": 3}),
    )
    .await
    .json();
    assert_eq!(
        (v["default_credits"].clone(), v["status"].clone()),
        (json!(3), json!("live"))
    );
    api(
        &gw,
        "PATCH",
        &format!("/api/v1/mcp/services/{wx}"),
        &dev_key,
        &json!({"default_credits": 99}),
    )
    .await
    .error(400, "invalid_request");
    // A new URL is checked again and goes back to pending.
    let other = FakeToolServer::start().await;
    let v = api(
        &gw,
        "PATCH",
        &format!("/api/v1/mcp/services/{wx}"),
        &dev_key,
        &json!({"upstream_url": other.url()}),
    )
    .await
    .json();
    assert_eq!(v["status"], "pending");
}

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
    let sent = format!(
        r#"{{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{}}}"#,
        params.replace("SLUG__echo", "echo")
    );
    assert_eq!(String::from_utf8(tools.last_call()).unwrap(), sent);
}

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
    let head = "POST /mcp HTTP/1.1\r\nHost: x\r\nContent-Length: 99999999\r\n\r\n".to_string();
    let head = head.replace(
        "Host: x\r\n",
        &format!("Host: x\r\nAuthorization: {auth}\r\n"),
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
    let cfg = format!(
        "{FAST_TIMEOUTS}{}{}{MCP_OPEN}",
        provider("p", &[&fake], ""),
        model("m-2024-01-01", "p", "economy", "")
    );
    let two = Gateway::start_opts(
        tollgate_bin!(),
        &cfg,
        Opts {
            database_url: Some(one.config_db()),
            redis_prefix: one.redis_prefix(),
            no_account: true,
            ..Opts::default()
        },
    )
    .await;
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
async fn first_party_servers_registered_by_the_admin_are_not_capped() {
    let gw = gateway(MCP_OPEN).await;
    let tools = FakeToolServer::start().await;
    let slug = uniq("house");
    let body = json!({"slug": slug, "upstream_url": tools.url(), "default_credits": 500, "owner_id": gw.user_id});
    let v = api(
        &gw,
        "POST",
        "/api/v1/admin/mcp/services",
        ADMIN_TOKEN,
        &body,
    )
    .await;
    assert_eq!(v.status, 201, "{}", v.text());
    let v = v.json();
    assert_eq!(
        (v["first_party"].clone(), v["default_credits"].clone()),
        (json!(true), json!(500))
    );
    // The same price from a developer is refused, and a user key cannot use the admin route.
    let r = register(&gw, &gw.key, &uniq("dev"), &tools.url(), 500).await;
    r.error(400, "invalid_request");
    api(&gw, "POST", "/api/v1/admin/mcp/services", &gw.key, &body)
        .await
        .error(401, "authentication_error");
    let mut unknown = body.clone();
    unknown["slug"] = json!(uniq("other"));
    unknown["owner_id"] = json!("usr_nobody");
    api(
        &gw,
        "POST",
        "/api/v1/admin/mcp/services",
        ADMIN_TOKEN,
        &unknown,
    )
    .await
    .error(400, "invalid_request");
}

#[tokio::test]
async fn a_crash_mid_call_loses_no_money_and_pays_nobody() {
    let tools = FakeToolServer::start().await;
    tools.set_mode(ToolMode::Hang);
    let fake = FakeOpenAi::start("p").await;
    let cfg = format!(
        "{FAST_TIMEOUTS}{}{}[mcp]\nallow_private_upstreams = true\ncall_timeout = 30\n",
        provider("p", &[&fake], ""),
        model("m-2024-01-01", "p", "economy", ""),
    );
    let storage = "hold_ttl_secs = 1.5\nhold_reap_interval_secs = 0.3".to_string();
    let mut doomed = Gateway::start_opts(
        tollgate_bin!(),
        &cfg,
        Opts {
            storage: storage.clone(),
            ..Opts::default()
        },
    )
    .await;
    let survivor = Gateway::start_opts(
        tollgate_bin!(),
        &cfg,
        Opts {
            database_url: Some(doomed.config_db()),
            storage,
            no_account: true,
            ..Opts::default()
        },
    )
    .await;
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
    let head = format!("POST /mcp HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer {key}\r\nContent-Length: {}\r\n\r\n", body.len());
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
    // The price is held (seen from the other instance), then the instance dies mid-call.
    assert!(survivor.balance(&key).await < initial.0);
    doomed.child.kill().unwrap();
    doomed.child.wait().unwrap();
    let t = std::time::Instant::now();
    while survivor.balance(&key).await != initial.0 {
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
