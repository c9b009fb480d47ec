//! Registering a tool server: checked live against the server and refused clearly, upstreams on
//! private addresses refused, only live services offered, and only the admin moving a service
//! between states; first-party servers the admin registers are not capped.

use serde_json::{json, Value};
use tollgate_testkit::*;

use crate::common::{admin, api, gateway, names, register, rpc, uniq, MCP_OPEN};

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
