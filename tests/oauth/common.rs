//! What the OAuth tests share: a gateway with a live tool service, a registered client, an
//! approval through the consent API, and the token endpoint.

use base64::Engine;
use serde_json::{json, Value};
use sha2::{Digest, Sha256};
use tollgate_testkit::*;

pub const REDIRECT: &str = "http://127.0.0.1:9/callback";
pub const VERIFIER: &str = "a-verifier-of-forty-three-characters-or-more-0123";
pub const PRICE: i64 = 3;

/// A gateway whose marketplace has one live service (`slug`, price [`PRICE`]), its fake tool
/// server, and `extra` config appended.
pub async fn gateway(extra: &str) -> (Gateway, FakeToolServer, String, String) {
    let fake = FakeOpenAi::start("p").await;
    let tools = FakeToolServer::start().await;
    let cfg = config(&fake, extra);
    let gw = Gateway::start(tollgate_bin!(), &cfg).await;
    let slug = uniq("oa");
    let (_, dev_key) = gw.signup(&unique_email()).await;
    let r = api(
        &gw,
        "POST",
        "/api/v1/mcp/services",
        &dev_key,
        &json!({"slug": slug, "upstream_url": tools.url(), "default_credits": PRICE}),
    )
    .await;
    assert_eq!(r.status, 201, "{}", r.text());
    let path = format!("/api/v1/admin/mcp/services/{slug}/approve");
    assert_eq!(
        api(&gw, "POST", &path, ADMIN_TOKEN, &json!({}))
            .await
            .status,
        200
    );
    (gw, tools, slug, cfg)
}

pub fn config(fake: &FakeOpenAi, extra: &str) -> String {
    format!(
        "{}[mcp]\nallow_private_upstreams = true\n{extra}",
        one_model_config(fake, "m-2024-01-01")
    )
}

pub fn uniq(base: &str) -> String {
    let e = unique_email();
    format!(
        "{base}-{}",
        e.trim_start_matches('u')
            .split('@')
            .next()
            .unwrap_or_default()
    )
}

pub fn challenge(verifier: &str) -> String {
    base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(Sha256::digest(verifier.as_bytes()))
}

pub async fn api(gw: &Gateway, method: &str, path: &str, auth: &str, body: &Value) -> Response {
    gw.api_as(auth, method, path, body).await
}

pub fn enc(s: &str) -> String {
    s.bytes()
        .map(|b| {
            if b.is_ascii_alphanumeric() || b"-._~".contains(&b) {
                (b as char).to_string()
            } else {
                format!("%{b:02X}")
            }
        })
        .collect()
}

pub fn form(pairs: &[(&str, &str)]) -> String {
    pairs
        .iter()
        .map(|(k, v)| format!("{k}={}", enc(v)))
        .collect::<Vec<_>>()
        .join("&")
}

pub async fn post_form(gw: &Gateway, path: &str, pairs: &[(&str, &str)]) -> Response {
    let body = form(pairs);
    request(
        gw.addr,
        "POST",
        path,
        &[("Content-Type", "application/x-www-form-urlencoded")],
        body.as_bytes(),
    )
    .await
}

/// Registers a client with the one redirect URI [`REDIRECT`]; its id.
pub async fn client(gw: &Gateway) -> String {
    let r = post_json(
        gw.addr,
        "/oauth/register",
        &json!({"client_name": "Test client", "redirect_uris": [REDIRECT]}),
    )
    .await;
    assert_eq!(r.status, 201, "{}", r.text());
    let v = r.json();
    assert_eq!(v["token_endpoint_auth_method"], "none");
    v["client_id"].as_str().unwrap().to_owned()
}

/// The authorization request's parameters for `client` with [`VERIFIER`]'s challenge.
pub fn params(gw: &Gateway, client: &str, resource: &str) -> Value {
    json!({
        "response_type": "code", "client_id": client, "redirect_uri": REDIRECT,
        "code_challenge": challenge(VERIFIER), "code_challenge_method": "S256",
        "state": "st-1", "resource": format!("http://{}{resource}", gw.addr),
    })
}

/// Approves through the consent API as `key` (a key may grant only as itself); the code.
pub async fn approve(gw: &Gateway, key: &str, client: &str, resource: &str) -> String {
    let mut body = params(gw, client, resource);
    body["approve"] = json!(true);
    let r = api(gw, "POST", "/api/v1/oauth/authorize", key, &body).await;
    assert_eq!(r.status, 200, "{}", r.text());
    let to = r.json()["redirect_to"].as_str().unwrap().to_owned();
    assert!(to.starts_with(&format!("{REDIRECT}?code=tgc_")), "{to}");
    assert!(to.ends_with("&state=st-1"), "{to}");
    to.split("code=")
        .nth(1)
        .unwrap()
        .split('&')
        .next()
        .unwrap()
        .to_owned()
}

pub async fn exchange(gw: &Gateway, client: &str, code: &str, verifier: &str) -> Response {
    post_form(
        gw,
        "/oauth/token",
        &[
            ("grant_type", "authorization_code"),
            ("code", code),
            ("code_verifier", verifier),
            ("client_id", client),
            ("redirect_uri", REDIRECT),
        ],
    )
    .await
}

pub async fn refresh(gw: &Gateway, client: &str, token: &str) -> Response {
    post_form(
        gw,
        "/oauth/token",
        &[
            ("grant_type", "refresh_token"),
            ("refresh_token", token),
            ("client_id", client),
        ],
    )
    .await
}

/// A fresh approval exchanged: (access token, refresh token).
pub async fn tokens(gw: &Gateway, key: &str, client: &str, resource: &str) -> (String, String) {
    let code = approve(gw, key, client, resource).await;
    let r = exchange(gw, client, &code, VERIFIER).await;
    assert_eq!(r.status, 200, "{}", r.text());
    assert_eq!(r.header("cache-control"), Some("no-store"));
    let v = r.json();
    assert_eq!(v["token_type"], "Bearer");
    (
        v["access_token"].as_str().unwrap().to_owned(),
        v["refresh_token"].as_str().unwrap().to_owned(),
    )
}

/// A JSON-RPC request to an MCP endpoint with `auth` as the bearer.
pub async fn rpc(gw: &Gateway, path: &str, auth: &str, method: &str, params: Value) -> Response {
    api(
        gw,
        "POST",
        path,
        auth,
        &json!({"jsonrpc": "2.0", "id": 1, "method": method, "params": params}),
    )
    .await
}

/// Whether `auth` may list tools on `path` (200) or is refused (401), polled for up to 6 s
/// until it is `want` (the 5 s revocation bound on another instance).
pub async fn status_becomes(gw: &Gateway, path: &str, auth: &str, want: u16) -> u16 {
    let until = std::time::Instant::now() + std::time::Duration::from_secs(6);
    loop {
        let s = rpc(gw, path, auth, "tools/list", json!({})).await.status;
        if s == want || std::time::Instant::now() > until {
            return s;
        }
        tokio::time::sleep(std::time::Duration::from_millis(250)).await;
    }
}
