//! The route table: a path no route matches is 404, a known path under another method is 405,
//! and guarded paths check the caller before either, so that nothing under the admin API is
//! revealed without the admin token. Every error is the JSON error object.

use tollgate_testkit::*;

async fn gateway() -> (FakeOpenAi, Gateway) {
    let fake = FakeOpenAi::start("p").await;
    let cfg = format!(
        "{FAST_TIMEOUTS}{}{}",
        provider("p", &[&fake], ""),
        model("alpha-2024-01-01", "p", "economy", "guest = true"),
    );
    let gw = Gateway::start(tollgate_bin!(), &cfg).await;
    (fake, gw)
}

#[tokio::test]
async fn unknown_paths_are_404_and_known_paths_under_other_methods_405() {
    let (_f, gw) = gateway().await;
    get(gw.addr, "/v2/nothing").await.error(404, "not_found");
    get(gw.addr, "/api/v1/nothing")
        .await
        .error(404, "not_found");
    get(gw.addr, "/api/v1/auth/login")
        .await
        .error(405, "invalid_request");
    request(gw.addr, "DELETE", "/v1/models", &[], b"")
        .await
        .error(405, "invalid_request");
    // A key's id is one non-empty path segment.
    let (_uid, key) = gw.signup(&unique_email()).await;
    let auth = format!("Bearer {key}");
    gw.with_auth("DELETE", "/api/v1/keys/", &auth, b"")
        .await
        .error(404, "not_found");
    gw.with_auth("DELETE", "/api/v1/keys/a/b", &auth, b"")
        .await
        .error(404, "not_found");
    assert!(gw.is_healthy().await);
}

#[tokio::test]
async fn the_admin_area_answers_401_to_anyone_without_the_token() {
    let (_f, gw) = gateway().await;
    let admin = format!("Bearer {ADMIN_TOKEN}");
    for (method, path) in [
        ("GET", "/api/v1/admin/nothing"),
        ("DELETE", "/api/v1/admin/accounts/usr_x"),
        ("GET", "/api/v1/admin/accounts/"),
    ] {
        request(gw.addr, method, path, &[], b"")
            .await
            .error(401, "authentication_error");
        gw.with_auth(method, path, "Bearer wrong", b"")
            .await
            .error(401, "authentication_error");
        let v = gw
            .with_auth(method, path, &admin, b"")
            .await
            .error(404, "not_found");
        let msg = v["error"]["message"].as_str().unwrap_or_default();
        assert!(msg.starts_with("no admin route for"), "{msg}");
    }
}

#[tokio::test]
async fn a_bad_key_is_401_before_a_wrong_method_is_405() {
    let (_f, gw) = gateway().await;
    let bad = "Bearer tg_0000000000000000000000000000000000000000";
    for path in ["/api/v1/usage", "/api/v1/auth/me", "/api/v1/keys"] {
        gw.with_auth("PUT", path, bad, b"")
            .await
            .error(401, "authentication_error");
    }
    let (_uid, key) = gw.signup(&unique_email()).await;
    gw.with_auth("PUT", "/api/v1/usage", &format!("Bearer {key}"), b"")
        .await
        .error(405, "invalid_request");
}
