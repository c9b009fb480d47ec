//! Every bad OAuth request refused in its RFC's shape, nothing issued, the service healthy.

use serde_json::json;
use tollgate_testkit::*;

use crate::common::*;

#[tokio::test]
async fn bad_registrations_are_refused_in_rfc_7591s_shape() {
    let (gw, _tools, _slug, _) = gateway("").await;
    for (body, code) in [
        (json!({}), "invalid_redirect_uri"),
        (json!({"redirect_uris": []}), "invalid_redirect_uri"),
        (
            json!({"redirect_uris": ["http://example.com/cb"]}),
            "invalid_redirect_uri",
        ),
        (
            json!({"redirect_uris": ["javascript:alert(1)"]}),
            "invalid_redirect_uri",
        ),
        (
            json!({"redirect_uris": ["https://ok.example/cb#x"]}),
            "invalid_redirect_uri",
        ),
        (
            json!({"redirect_uris": "http://localhost/cb"}),
            "invalid_client_metadata",
        ),
        (
            json!({"redirect_uris": ["http://localhost/cb"], "grant_types": ["client_credentials"]}),
            "invalid_client_metadata",
        ),
        (
            json!({"redirect_uris": ["http://localhost/cb"], "client_name": ""}),
            "invalid_client_metadata",
        ),
        (json!([1]), "invalid_client_metadata"),
    ] {
        let r = post_json(gw.addr, "/oauth/register", &body).await;
        assert_eq!(r.status, 400, "{body}: {}", r.text());
        assert_eq!(r.json()["error"], code, "{body}");
        assert!(r.json()["error_description"].is_string());
    }
    let r = request(
        gw.addr,
        "POST",
        "/oauth/register",
        &[("Content-Type", "application/json")],
        b"{not json",
    )
    .await;
    assert_eq!(
        (r.status, r.json()["error"].clone()),
        (400, json!("invalid_client_metadata"))
    );
    assert!(gw.is_healthy().await);
}

#[tokio::test]
async fn bad_authorization_requests_go_back_to_the_client_or_nowhere() {
    let (gw, _tools, _slug, _) = gateway("").await;
    let client = client(&gw).await;
    let q = |over: &[(&str, &str)]| {
        let mut p = params(&gw, &client, "/mcp");
        for (k, v) in over {
            if v.is_empty() {
                p.as_object_mut().unwrap().remove(*k);
            } else {
                p[*k] = json!(v);
            }
        }
        let q = p
            .as_object()
            .unwrap()
            .iter()
            .map(|(k, v)| format!("{k}={}", enc(v.as_str().unwrap())))
            .collect::<Vec<_>>()
            .join("&");
        format!("/oauth/authorize?{q}")
    };
    // Unknown client, or a redirect URI it did not register: answered here, never redirected.
    for (over, code) in [
        (vec![("client_id", "mcpc_nobody")], "invalid_client"),
        (
            vec![("redirect_uri", "http://127.0.0.1:9/elsewhere")],
            "invalid_request",
        ),
        (vec![("client_id", "")], "invalid_request"),
    ] {
        let r = get(gw.addr, &q(&over)).await;
        assert!(matches!(r.status, 400 | 401), "{over:?}: {}", r.text());
        assert_eq!(r.json()["error"], code, "{over:?}");
        assert_eq!(r.header("location"), None);
    }
    // Everything else goes back to the client with the state.
    for (over, code) in [
        (vec![("code_challenge_method", "plain")], "invalid_request"),
        (vec![("code_challenge_method", "")], "invalid_request"),
        (vec![("code_challenge", "")], "invalid_request"),
        (vec![("code_challenge", "short")], "invalid_request"),
        (
            vec![("response_type", "token")],
            "unsupported_response_type",
        ),
        (
            vec![("resource", "https://elsewhere.example/mcp")],
            "invalid_target",
        ),
        (
            vec![("resource", "http://127.0.0.1:1/v1/models")],
            "invalid_target",
        ),
    ] {
        let r = get(gw.addr, &q(&over)).await;
        assert_eq!(r.status, 302, "{over:?}");
        let to = r.header("location").unwrap();
        assert!(
            to.starts_with(&format!("{REDIRECT}?error={code}&error_description=")),
            "{over:?}: {to}"
        );
        assert!(to.ends_with("&state=st-1"), "{to}");
    }
    // The consent API refuses the same (plain PKCE included) and grants nothing.
    let mut body = params(&gw, &client, "/mcp");
    body["code_challenge_method"] = json!("plain");
    body["approve"] = json!(true);
    let r = api(&gw, "POST", "/api/v1/oauth/authorize", &gw.key, &body).await;
    assert_eq!(r.status, 400);
    assert!(
        r.json()["error"]["message"]
            .as_str()
            .unwrap()
            .contains("S256"),
        "{}",
        r.text()
    );
    let mut body = params(&gw, &client, "/mcp");
    body["approve"] = json!("yes");
    assert_eq!(
        api(&gw, "POST", "/api/v1/oauth/authorize", &gw.key, &body)
            .await
            .status,
        400
    );
    // A key may grant only as itself.
    body["approve"] = json!(true);
    body["key_id"] = json!("key_someone_elses");
    assert_eq!(
        api(&gw, "POST", "/api/v1/oauth/authorize", &gw.key, &body)
            .await
            .status,
        400
    );
    // Without a session or key the consent API is 401 (the page shows the log-in form).
    assert_eq!(
        get(gw.addr, "/api/v1/oauth/authorize?client_id=x")
            .await
            .status,
        401
    );
    assert!(gw.is_healthy().await);
}

#[tokio::test]
async fn bad_token_requests_are_refused_in_rfc_6749s_shape() {
    let (gw, _tools, _slug, _) = gateway("").await;
    let client = client(&gw).await;
    let code = approve(&gw, &gw.key, &client, "/mcp").await;
    for (pairs, code_want) in [
        (vec![("grant_type", "password")], "unsupported_grant_type"),
        (vec![], "invalid_request"),
        (
            vec![
                ("grant_type", "authorization_code"),
                ("code", code.as_str()),
                ("client_id", client.as_str()),
            ],
            "invalid_request",
        ),
        (
            vec![
                ("grant_type", "authorization_code"),
                ("code", code.as_str()),
                ("client_id", client.as_str()),
                ("code_verifier", "short"),
            ],
            "invalid_request",
        ),
        (
            vec![
                ("grant_type", "authorization_code"),
                ("code", "tgc_unknown"),
                ("client_id", client.as_str()),
                ("code_verifier", VERIFIER),
            ],
            "invalid_grant",
        ),
        (
            vec![
                ("grant_type", "refresh_token"),
                ("refresh_token", "tgr_unknown"),
                ("client_id", client.as_str()),
            ],
            "invalid_grant",
        ),
        (
            vec![
                ("grant_type", "refresh_token"),
                ("client_id", client.as_str()),
            ],
            "invalid_request",
        ),
        (
            vec![
                ("grant_type", "authorization_code"),
                ("grant_type", "refresh_token"),
            ],
            "invalid_request",
        ),
    ] {
        let r = post_form(&gw, "/oauth/token", &pairs).await;
        assert_eq!(r.status, 400, "{pairs:?}: {}", r.text());
        assert_eq!(r.json()["error"], code_want, "{pairs:?}");
    }
    // JSON is not the token endpoint's format.
    let r = post_json(
        gw.addr,
        "/oauth/token",
        &json!({"grant_type": "authorization_code"}),
    )
    .await;
    assert_eq!(
        (r.status, r.json()["error"].clone()),
        (400, json!("invalid_request"))
    );
    // None of that spent the code: it is still exchanged once.
    let r = exchange(&gw, &client, &code, VERIFIER).await;
    assert_eq!(r.status, 200, "{}", r.text());
    let access = r.json()["access_token"].as_str().unwrap().to_owned();
    // Revocation (RFC 7009): 200 for anything, and the token stops.
    assert_eq!(
        post_form(&gw, "/oauth/revoke", &[("token", "tga_nothing")])
            .await
            .status,
        200
    );
    assert_eq!(
        post_form(&gw, "/oauth/revoke", &[]).await.json()["error"],
        "invalid_request"
    );
    let r = post_form(
        &gw,
        "/oauth/revoke",
        &[("token", access.as_str()), ("client_id", "mcpc_other")],
    )
    .await;
    assert_eq!(r.json()["error"], "unauthorized_client");
    assert_eq!(
        rpc(&gw, "/mcp", &access, "tools/list", json!({}))
            .await
            .status,
        200
    );
    let r = post_form(
        &gw,
        "/oauth/revoke",
        &[("token", access.as_str()), ("client_id", client.as_str())],
    )
    .await;
    assert_eq!(r.status, 200);
    assert_eq!(
        rpc(&gw, "/mcp", &access, "tools/list", json!({}))
            .await
            .status,
        401
    );
    assert!(gw.is_healthy().await);
}
