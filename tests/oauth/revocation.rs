//! A grant as the account holder sees it: approved with the session cookie (under the
//! dashboard's CSRF rules), listed, revoked, and its tokens stopped on every instance.

use serde_json::json;
use tollgate_testkit::*;

use crate::common::*;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_grant_revoked_in_the_dashboard_stops_its_tokens_everywhere() {
    let (gw, _tools, _slug, cfg) = gateway("").await;
    let email = unique_email();
    let (_, key) = gw.signup(&email).await;
    let cookie = gw.login(&email).await;
    let client = client(&gw).await;
    // The consent page's reads and the decision, with the session cookie.
    let p = params(&gw, &client, "/mcp");
    let q = p
        .as_object()
        .unwrap()
        .iter()
        .map(|(k, v)| format!("{k}={}", enc(v.as_str().unwrap())))
        .collect::<Vec<_>>()
        .join("&");
    let r = request(
        gw.addr,
        "GET",
        &format!("/api/v1/oauth/authorize?{q}"),
        &[("Cookie", &cookie)],
        b"",
    )
    .await;
    assert_eq!(r.status, 200, "{}", r.text());
    let v = r.json();
    assert_eq!(v["client"]["name"], "Test client");
    assert_eq!(v["keys"][0]["name"], "default");
    let mut body = p.clone();
    body["approve"] = json!(true);
    let b = serde_json::to_vec(&body).unwrap();
    let origin = format!("http://{}", gw.addr);
    // A cookie write from another site, or not as JSON, is refused.
    let r = request(
        gw.addr,
        "POST",
        "/api/v1/oauth/authorize",
        &[
            ("Cookie", &cookie),
            ("Content-Type", "application/json"),
            ("Origin", "http://evil.example"),
        ],
        &b,
    )
    .await;
    assert_eq!(r.status, 401, "{}", r.text());
    let r = request(
        gw.addr,
        "POST",
        "/api/v1/oauth/authorize",
        &[("Cookie", &cookie), ("Content-Type", "text/plain")],
        &b,
    )
    .await;
    assert_eq!(r.status, 400, "{}", r.text());
    let r = request(
        gw.addr,
        "POST",
        "/api/v1/oauth/authorize",
        &[
            ("Cookie", &cookie),
            ("Content-Type", "application/json"),
            ("Origin", &origin),
        ],
        &b,
    )
    .await;
    assert_eq!(r.status, 200, "{}", r.text());
    let to = r.json()["redirect_to"].as_str().unwrap().to_owned();
    let code = to
        .split("code=")
        .nth(1)
        .unwrap()
        .split('&')
        .next()
        .unwrap()
        .to_owned();
    let r = exchange(&gw, &client, &code, VERIFIER).await;
    let access = r.json()["access_token"].as_str().unwrap().to_owned();
    // A new key was made for the grant; the token acts as it.
    let keys = api(&gw, "GET", "/api/v1/keys", &key, &json!({}))
        .await
        .json();
    assert!(keys.to_string().contains("OAuth: Test client"), "{keys}");
    let second = gw.second(tollgate_bin!(), &cfg).await;
    assert_eq!(
        rpc(&second, "/mcp", &access, "tools/list", json!({}))
            .await
            .status,
        200
    );
    let list = request(
        gw.addr,
        "GET",
        "/api/v1/oauth/grants",
        &[("Cookie", &cookie)],
        b"",
    )
    .await
    .json();
    assert_eq!(list["data"].as_array().unwrap().len(), 1, "{list}");
    assert_eq!(list["data"][0]["client_name"], "Test client");
    let id = list["data"][0]["id"].as_str().unwrap().to_owned();
    // Another account cannot revoke it.
    let r = api(
        &gw,
        "DELETE",
        &format!("/api/v1/oauth/grants/{id}"),
        &gw.key,
        &json!({}),
    )
    .await;
    assert_eq!(r.status, 404);
    let r = request(
        gw.addr,
        "DELETE",
        &format!("/api/v1/oauth/grants/{id}"),
        &[("Cookie", &cookie), ("Origin", &origin)],
        b"",
    )
    .await;
    assert_eq!(r.status, 200, "{}", r.text());
    assert_eq!(
        rpc(&gw, "/mcp", &access, "tools/list", json!({}))
            .await
            .status,
        401
    );
    assert_eq!(status_becomes(&second, "/mcp", &access, 401).await, 401);
    let list = request(
        gw.addr,
        "GET",
        "/api/v1/oauth/grants",
        &[("Cookie", &cookie)],
        b"",
    )
    .await
    .json();
    assert_eq!(list["data"], json!([]));
    // The holder denies: the client is told so.
    let mut body = p.clone();
    body["approve"] = json!(false);
    let r = api(&gw, "POST", "/api/v1/oauth/authorize", &key, &body).await;
    assert_eq!(r.json()["redirect_to"], format!("{REDIRECT}?error=access_denied&error_description=the%20account%20holder%20denied%20the%20request&state=st-1"));
}
