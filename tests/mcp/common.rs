//! What the MCP tests share: a gateway with the marketplace open to local tool servers, the
//! owner's, admin's and agent's calls, and a live service of a developer's own.

use serde_json::{json, Value};
use tollgate_testkit::*;

pub const MCP_OPEN: &str = "[mcp]\nallow_private_upstreams = true\ncall_timeout = 1\n";

pub async fn gateway(mcp: &str) -> Gateway {
    let fake = FakeOpenAi::start("p").await;
    let cfg = format!("{}{mcp}", one_model_config(&fake, "m-2024-01-01"));
    Gateway::start(tollgate_bin!(), &cfg).await
}

pub async fn api(gw: &Gateway, method: &str, path: &str, auth: &str, body: &Value) -> Response {
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

pub async fn register(gw: &Gateway, key: &str, slug: &str, url: &str, price: u64) -> Response {
    api(
        gw,
        "POST",
        "/api/v1/mcp/services",
        key,
        &json!({"slug": slug, "upstream_url": url, "default_credits": price}),
    )
    .await
}

pub async fn admin(gw: &Gateway, slug: &str, action: &str) -> Response {
    api(
        gw,
        "POST",
        &format!("/api/v1/admin/mcp/services/{slug}/{action}"),
        ADMIN_TOKEN,
        &json!({}),
    )
    .await
}

pub async fn rpc(gw: &Gateway, path: &str, key: &str, method: &str, params: Value) -> Value {
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
pub async fn live_service(gw: &Gateway, slug: &str, url: &str, price: u64) -> (String, String) {
    let (dev, dev_key) = gw.signup(&unique_email()).await;
    let r = register(gw, &dev_key, slug, url, price).await;
    assert_eq!(r.status, 201, "{}", r.text());
    assert_eq!(admin(gw, slug, "approve").await.status, 200);
    (dev, dev_key)
}

/// A slug no other test or run has registered (the ledger may be shared).
pub fn uniq(base: &str) -> String {
    let e = unique_email();
    let n = e
        .trim_start_matches('u')
        .split('@')
        .next()
        .unwrap_or_default();
    format!("{base}-{n}")
}

pub fn names(list: &Value) -> Vec<String> {
    list["result"]["tools"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["name"].as_str().unwrap().to_owned())
        .collect()
}
