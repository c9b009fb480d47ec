//! Per-key tool filtering (issue 30): a key limited to some services (`slug`) or tools
//! (`slug__tool`) lists only those on `/mcp` and `/mcp/{slug}`, a call outside them is refused
//! exactly as an unknown tool is (nothing charged, nothing forwarded), and the setting is set,
//! shown, changed and rotated like `allowed_models`; a bad list is a 400 naming the entry.

use serde_json::{json, Value};
use tollgate_testkit::*;

use crate::common::{api, gateway, live_service, names, register, rpc, uniq, MCP_OPEN};

/// Issues a key of the gateway's account with `settings`; returns (secret, id).
async fn key_with(gw: &Gateway, settings: Value) -> (String, String) {
    let r = api(gw, "POST", "/api/v1/keys", &gw.key, &settings).await;
    assert_eq!(r.status, 201, "{}", r.text());
    let v = r.json();
    assert_eq!(v["allowed_tools"], settings["allowed_tools"]);
    (
        v["key"].as_str().unwrap().to_owned(),
        v["id"].as_str().unwrap().to_owned(),
    )
}

/// The key `id` as `GET /api/v1/keys` shows it.
async fn shown(gw: &Gateway, id: &str) -> Value {
    let list = api(gw, "GET", "/api/v1/keys", &gw.key, &json!({}))
        .await
        .json();
    let found = list["data"]
        .as_array()
        .unwrap()
        .iter()
        .find(|k| k["id"] == id);
    found.cloned().unwrap()
}

fn sorted(mut v: Vec<String>) -> Vec<String> {
    v.sort();
    v
}

#[tokio::test]
async fn a_key_lists_and_calls_only_the_tools_it_may_use() {
    let gw = gateway(MCP_OPEN).await;
    let tools = FakeToolServer::start().await;
    let (wx, calc, other) = (uniq("wx"), uniq("calc"), uniq("other"));
    live_service(&gw, &wx, &tools.url(), 3).await;
    live_service(&gw, &calc, &tools.url(), 5).await;
    live_service(&gw, &other, &tools.url(), 1).await;
    let allowed = json!([wx, format!("{calc}__add")]);
    let (key, id) = key_with(&gw, json!({"name": "agent", "allowed_tools": allowed})).await;
    assert_eq!(shown(&gw, &id).await["allowed_tools"], allowed);

    // Listing: only its tools, on both endpoints; a service it may use nothing of is unknown.
    let listed = names(&rpc(&gw, "/mcp", &key, "tools/list", json!({})).await);
    let want = [
        format!("{wx}__echo"),
        format!("{wx}__add"),
        format!("{calc}__add"),
    ];
    assert_eq!(sorted(listed), sorted(want.to_vec()));
    let one = |slug: &str| format!("/mcp/{slug}");
    let listed = names(&rpc(&gw, &one(&calc), &key, "tools/list", json!({})).await);
    assert_eq!(listed, ["add"]);
    let listed = names(&rpc(&gw, &one(&wx), &key, "tools/list", json!({})).await);
    assert_eq!(sorted(listed), ["add", "echo"]);
    let r = api(
        &gw,
        "POST",
        &one(&other),
        &key,
        &json!({"jsonrpc": "2.0", "id": 1, "method": "tools/list"}),
    )
    .await;
    let unknown_service = api(
        &gw,
        "POST",
        "/mcp/no-such-service",
        &key,
        &json!({"jsonrpc": "2.0", "id": 1, "method": "tools/list"}),
    )
    .await;
    assert_eq!(
        (r.status, unknown_service.status),
        (404, 404),
        "{}",
        r.text()
    );
    // The unrestricted key still sees everything.
    let all = names(&rpc(&gw, "/mcp", &gw.key, "tools/list", json!({})).await);
    assert!(all.contains(&format!("{other}__echo")) && all.contains(&format!("{calc}__echo")));

    // A call outside the list is refused as an unknown tool is: same code and data, nothing
    // charged, nothing reaches the tool server.
    let before = gw.balance(&key).await;
    let call = |path: String, name: String| {
        let (gw, key) = (&gw, &key);
        async move {
            rpc(
                gw,
                &path,
                key,
                "tools/call",
                json!({"name": name, "arguments": {"text": "x", "a": 2, "b": 3}}),
            )
            .await
        }
    };
    let unknown = call("/mcp".into(), format!("{calc}__nope")).await;
    for refused in [
        call("/mcp".into(), format!("{calc}__echo")).await,
        call("/mcp".into(), format!("{other}__echo")).await,
        call(one(&calc), "echo".into()).await,
    ] {
        assert_eq!(
            refused["error"]["code"], unknown["error"]["code"],
            "{refused}"
        );
        assert_eq!(
            refused["error"]["data"], unknown["error"]["data"],
            "{refused}"
        );
        let m = refused["error"]["message"].as_str().unwrap();
        assert!(m.starts_with("params.name: unknown tool `"), "{m}");
    }
    assert_eq!(unknown["error"]["code"], -32602);
    assert_eq!(gw.balance(&key).await, before);
    assert_eq!(tools.calls(), 0);

    // Its tools work, charged their price.
    let v = call("/mcp".into(), format!("{calc}__add")).await;
    assert_eq!(v["result"]["content"][0]["text"], "5", "{v}");
    let v = call(one(&wx), "echo".into()).await;
    assert_eq!(v["result"]["content"][0]["text"], "x", "{v}");
    assert_eq!(before - gw.balance(&key).await, 8_000_000);
    assert_eq!(tools.calls(), 2);

    // Changed by PATCH (at once on this instance), copied by rotation, cleared by null.
    let r = api(
        &gw,
        "PATCH",
        &format!("/api/v1/keys/{id}"),
        &gw.key,
        &json!({"allowed_tools": [format!("{other}__echo")]}),
    )
    .await;
    assert_eq!(r.status, 200, "{}", r.text());
    assert_eq!(r.json()["allowed_tools"], json!([format!("{other}__echo")]));
    let listed = names(&rpc(&gw, "/mcp", &key, "tools/list", json!({})).await);
    assert_eq!(listed, [format!("{other}__echo")]);
    let r = api(
        &gw,
        "POST",
        &format!("/api/v1/keys/{id}/rotate"),
        &gw.key,
        &json!({"grace_seconds": 0}),
    )
    .await;
    assert_eq!(r.status, 201, "{}", r.text());
    assert_eq!(r.json()["allowed_tools"], json!([format!("{other}__echo")]));
    let successor = r.json()["key"].as_str().unwrap().to_owned();
    let listed = names(&rpc(&gw, "/mcp", &successor, "tools/list", json!({})).await);
    assert_eq!(listed, [format!("{other}__echo")]);
    let new_id = r.json()["id"].as_str().unwrap().to_owned();
    let r = api(
        &gw,
        "PATCH",
        &format!("/api/v1/keys/{new_id}"),
        &gw.key,
        &json!({"allowed_tools": null}),
    )
    .await;
    assert_eq!(r.json()["allowed_tools"], Value::Null);
    let listed = names(&rpc(&gw, "/mcp", &successor, "tools/list", json!({})).await);
    assert!(listed.contains(&format!("{wx}__echo")) && listed.contains(&format!("{calc}__echo")));
}

#[tokio::test]
async fn a_bad_tool_list_is_a_400_naming_the_entry_and_changes_nothing() {
    let gw = gateway(MCP_OPEN).await;
    let tools = FakeToolServer::start().await;
    let wx = uniq("wx");
    live_service(&gw, &wx, &tools.url(), 1).await;
    // Registered but not approved: not offered to agents, so no key can name it.
    let pending = uniq("pending");
    let (_, dev_key) = gw.signup(&unique_email()).await;
    assert_eq!(
        register(&gw, &dev_key, &pending, &tools.url(), 1)
            .await
            .status,
        201
    );
    let (_, id) = key_with(&gw, json!({"name": "agent", "allowed_tools": [wx]})).await;
    let count = || async {
        let list = api(&gw, "GET", "/api/v1/keys", &gw.key, &json!({}))
            .await
            .json();
        list["data"].as_array().unwrap().len()
    };
    let keys_before = count().await;
    let before = shown(&gw, &id).await;
    for (list, field, says) in [
        (
            json!(["no-such-service"]),
            "allowed_tools[0]",
            "no live tool server `no-such-service`",
        ),
        (
            json!([wx, pending]),
            "allowed_tools[1]",
            "no live tool server",
        ),
        (
            json!([wx, format!("{wx}__nope")]),
            "allowed_tools[1]",
            "offers no tool `nope`",
        ),
        (
            json!([wx, format!("zz-none__echo")]),
            "allowed_tools[1]",
            "no live tool server `zz-none`",
        ),
        (json!([wx, 5]), "allowed_tools[1]", "must be"),
        (json!(["Not A Slug"]), "allowed_tools[0]", "must be"),
        (json!([]), "allowed_tools:", "non-empty array"),
        (json!(wx), "allowed_tools:", "non-empty array"),
    ] {
        let r = api(
            &gw,
            "POST",
            "/api/v1/keys",
            &gw.key,
            &json!({"name": "x", "allowed_tools": list}),
        )
        .await;
        let m = r.error(400, "invalid_request")["error"]["message"]
            .as_str()
            .unwrap()
            .to_owned();
        assert!(m.starts_with(field) && m.contains(says), "{list}: {m}");
        // With a good setting beside it: nothing of the change is written.
        let r = api(
            &gw,
            "PATCH",
            &format!("/api/v1/keys/{id}"),
            &gw.key,
            &json!({"requests_per_minute": 9, "allowed_tools": list}),
        )
        .await;
        let m = r.error(400, "invalid_request")["error"]["message"]
            .as_str()
            .unwrap()
            .to_owned();
        assert!(m.starts_with(field), "{list}: {m}");
    }
    assert_eq!(count().await, keys_before);
    let after = shown(&gw, &id).await;
    assert_eq!(after["allowed_tools"], before["allowed_tools"]);
    assert_eq!(after["requests_per_minute"], Value::Null);
}
