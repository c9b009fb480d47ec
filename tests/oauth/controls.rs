//! A grant acts as one key: that key's controls (issue 29/30) bind the client's token. The
//! consent page lets the holder pick the key; an API key approving grants only as itself.

use serde_json::json;

use crate::common::*;

#[tokio::test]
async fn a_tokens_tools_are_its_keys_allowed_tools() {
    let (gw, _tools, slug, _) = gateway("").await;
    let add = format!("{slug}__add");
    let body = json!({"name": "agent", "allowed_tools": [add]});
    let r = api(&gw, "POST", "/api/v1/keys", &gw.key, &body).await;
    assert_eq!(r.status, 201, "{}", r.text());
    let key = r.json()["key"].as_str().unwrap().to_owned();
    let client = client(&gw).await;
    let (access, _) = tokens(&gw, &key, &client, "/mcp").await;
    let listed = rpc(&gw, "/mcp", &access, "tools/list", json!({}))
        .await
        .json();
    let names: Vec<&str> = listed["result"]["tools"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|t| t["name"].as_str())
        .collect();
    assert_eq!(names, [add.as_str()], "{listed}");
    let before = gw.balance(&gw.key).await;
    let echo = json!({"name": format!("{slug}__echo"), "arguments": {"text": "no"}});
    let v = rpc(&gw, "/mcp", &access, "tools/call", echo).await.json();
    assert_eq!(v["error"]["code"], -32602, "{v}");
    let sum = json!({"name": add, "arguments": {"a": 2, "b": 3}});
    let v = rpc(&gw, "/mcp", &access, "tools/call", sum).await.json();
    assert_eq!(v["result"]["content"][0]["text"], "5", "{v}");
    assert_eq!(before - gw.balance(&gw.key).await, PRICE * 1_000_000);
    // Revoking the key stops the grant's tokens with it.
    let keys = api(&gw, "GET", "/api/v1/keys", &gw.key, &json!({}))
        .await
        .json();
    let id = keys["data"]
        .as_array()
        .unwrap()
        .iter()
        .find(|k| k["name"] == "agent")
        .unwrap()["id"]
        .as_str()
        .unwrap()
        .to_owned();
    let r = api(
        &gw,
        "DELETE",
        &format!("/api/v1/keys/{id}"),
        &gw.key,
        &json!({}),
    )
    .await;
    assert_eq!(r.status, 200, "{}", r.text());
    assert_eq!(status_becomes(&gw, "/mcp", &access, 401).await, 401);
}
