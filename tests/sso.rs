//! Single sign-on per organization (issue 51) against a real OpenID provider nobody here
//! wrote: the npm `oidc-provider` (certified), started by the test with a client registered
//! for the gateway (`testkit/oidc/provider.mjs`), and a real browser (Playwright driving
//! Chromium, `testkit/python/sso_login.py`) signing in through its login form.
//!
//! A first sign-in with an allowed domain makes the account and its membership; a wrong
//! `state`, a used one, a replayed authorization code and a domain not allowed are refused
//! with nothing created; the provider rotating its signing key is followed; an organization
//! requiring SSO refuses a password session its access; ID tokens tampered on their way (the
//! provider's answer rewritten: signature, audience, issuer, expiry, nonce, `alg: none`, another
//! key under its `kid`, an unverified e-mail) are refused with nothing made. Needs `oidc-provider` (`./dev test` installs it under
//! `.tools/oidc`), Chromium and a Python with Playwright; without them the test says
//! `SKIPPED: …`, and fails under `TOLLGATE_TEST_REQUIRE_SERVICES=1`.

use std::process::Command;

use serde_json::{json, Value};
use tollgate_testkit::*;

const CLIENT_ID: &str = "tollgate";
const CLIENT_SECRET: &str = "a client secret for the test";

fn chromium() -> Option<String> {
    let path =
        std::env::var("TOLLGATE_TEST_CHROMIUM").unwrap_or_else(|_| "/usr/bin/chromium".into());
    std::path::Path::new(&path).exists().then_some(path)
}

/// Runs the sign-in script; its one JSON line.
fn sign_in(py: &str, chromium: &str, start: &str, email: &str, stop: bool) -> Value {
    let script = concat!(env!("CARGO_MANIFEST_DIR"), "/testkit/python/sso_login.py");
    let mut cmd = Command::new(py);
    cmd.args([
        script,
        "--chromium",
        chromium,
        "--start",
        start,
        "--email",
        email,
    ]);
    if stop {
        cmd.arg("--stop-at-callback");
    }
    let out = cmd.output().expect("the sign-in script runs");
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "sign-in failed: {stdout}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_str(stdout.lines().last().unwrap_or("")).expect("one JSON line")
}

/// The callback as the browser would send it, with this state cookie.
async fn callback(gw: &Gateway, url: &str, state_cookie: &str) -> Response {
    let path = &url[url.find("/api/v1/sso/callback").unwrap()..];
    let cookie = format!("tg_sso={state_cookie}");
    request(gw.addr, "GET", path, &[("Cookie", &cookie)], b"").await
}

/// The query with its `name` parameter set to `value`.
fn with_param(url: &str, name: &str, value: &str) -> String {
    let (base, query) = url.split_once('?').unwrap();
    let parts: Vec<String> = query
        .split('&')
        .map(|p| match p.split_once('=') {
            Some((k, _)) if k == name => format!("{k}={value}"),
            _ => p.to_owned(),
        })
        .collect();
    format!("{base}?{}", parts.join("&"))
}

fn param(url: &str, name: &str) -> String {
    let query = url.split_once('?').unwrap().1;
    query
        .split('&')
        .find_map(|p| {
            p.split_once('=')
                .filter(|(k, _)| *k == name)
                .map(|(_, v)| v.to_owned())
        })
        .unwrap()
}

async fn accounts_with(gw: &Gateway, email: &str) -> i64 {
    let url = gw.config_db();
    let sql = "SELECT COUNT(*) FROM accounts WHERE email = $1";
    if url.starts_with("sqlite:") {
        let p = sqlx::SqlitePool::connect(&url).await.unwrap();
        sqlx::query_scalar(sql)
            .bind(email)
            .fetch_one(&p)
            .await
            .unwrap()
    } else {
        let p = sqlx::PgPool::connect(&url).await.unwrap();
        sqlx::query_scalar(sql)
            .bind(email)
            .fetch_one(&p)
            .await
            .unwrap()
    }
}

async fn members(gw: &Gateway, key: &str, org: &str) -> Vec<(String, String)> {
    let r = gw
        .api_as(
            key,
            "GET",
            &format!("/api/v1/orgs/{org}/members"),
            &json!({}),
        )
        .await;
    assert_eq!(r.status, 200, "{}", r.text());
    r.json()["data"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| {
            (
                m["email"].as_str().unwrap_or("").to_owned(),
                m["role"].as_str().unwrap().to_owned(),
            )
        })
        .collect()
}

#[tokio::test]
async fn people_sign_in_through_the_organizations_openid_provider() {
    let Some(chromium) = chromium() else {
        return skip("no Chromium at TOLLGATE_TEST_CHROMIUM or /usr/bin/chromium");
    };
    let Some(py) = python_with("import playwright.sync_api") else {
        return skip("no Python with playwright; run ./dev test to set one up");
    };
    let (_fake, gw) = paid_and_free(tollgate_bin!()).await;
    let base = format!("http://{}", gw.addr);
    let redirect = format!("{base}/api/v1/sso/callback");
    let Some(mut provider) = OidcProvider::start(&redirect, CLIENT_ID, CLIENT_SECRET) else {
        return;
    };
    let (_, owner_key) = gw.signup(&unique_email()).await;
    let r = gw
        .api_as(&owner_key, "POST", "/api/v1/orgs", &json!({"name": "Acme"}))
        .await;
    let org = r.json()["id"].as_str().unwrap().to_owned();
    let settings = json!({"issuer": provider.issuer(), "client_id": CLIENT_ID, "client_secret": CLIENT_SECRET,
                          "allowed_domains": ["acme.example"], "default_role": "member"});
    let path = format!("/api/v1/orgs/{org}/sso");
    // Bad settings first: nothing stored.
    for bad in [
        json!({"issuer": "ftp://x", "client_id": "a", "client_secret": "b", "allowed_domains": ["acme.example"]}),
        json!({"issuer": provider.issuer(), "client_id": "a", "client_secret": "b", "allowed_domains": []}),
        json!({"issuer": provider.issuer(), "client_id": "a", "client_secret": "b", "allowed_domains": ["not a domain"]}),
        json!({"issuer": provider.issuer(), "client_id": "a", "client_secret": "b", "allowed_domains": ["acme.example"], "default_role": "owner"}),
        json!({"issuer": "http://127.0.0.1:9", "client_id": "a", "client_secret": "b", "allowed_domains": ["acme.example"]}),
    ] {
        gw.api_as(&owner_key, "PUT", &path, &bad)
            .await
            .error(400, "invalid_request");
    }
    // Before any settings: the redirect URI to register with the provider.
    let r = gw.api_as(&owner_key, "GET", &path, &json!({})).await.json();
    assert_eq!(r["configured"], false, "{r}");
    assert_eq!(r["redirect_uri"], redirect.as_str());
    let r = gw.api_as(&owner_key, "PUT", &path, &settings).await;
    assert_eq!(r.status, 200, "{}", r.text());
    assert!(
        r.json().get("client_secret").is_none(),
        "the secret is never shown"
    );
    assert_eq!(r.json()["redirect_uri"], redirect.as_str());
    let start = format!("{base}/api/v1/sso/{org}/start");

    // A first sign-in in a real browser: the account and its membership are made.
    let alice = format!("alice-{}@acme.example", std::process::id());
    let out = sign_in(&py, &chromium, &start, &alice, false);
    assert!(
        out["final_url"].as_str().unwrap().ends_with("/dashboard"),
        "{out}"
    );
    assert!(
        out["cookies"]
            .as_array()
            .unwrap()
            .iter()
            .any(|c| c == "tg_session"),
        "{out}"
    );
    assert_eq!(out["console_errors"], json!([]), "{out}");
    assert!(members(&gw, &owner_key, &org)
        .await
        .contains(&(alice.clone(), "member".into())));
    assert_eq!(accounts_with(&gw, &alice).await, 1);

    // Stopped before the callback: a wrong state, then the right one, then the same again.
    let bob = format!("bob-{}@acme.example", std::process::id());
    let out = sign_in(&py, &chromium, &start, &bob, true);
    let (url, cookie) = (
        out["callback_url"].as_str().unwrap().to_owned(),
        out["cookies"]["tg_sso"].as_str().unwrap().to_owned(),
    );
    callback(&gw, &with_param(&url, "state", "forged"), "forged")
        .await
        .error(400, "invalid_request");
    callback(&gw, &url, "another-browser")
        .await
        .error(400, "invalid_request");
    assert_eq!(
        accounts_with(&gw, &bob).await,
        0,
        "nothing made by a refused callback"
    );
    let r = callback(&gw, &url, &cookie).await;
    assert_eq!(r.status, 200, "{}", r.text());
    let session = r.header("set-cookie").unwrap_or_default().to_owned();
    assert!(session.contains("tg_session="), "{session}");
    assert_eq!(accounts_with(&gw, &bob).await, 1);
    callback(&gw, &url, &cookie)
        .await
        .error(400, "invalid_request");

    // The code replayed under a fresh state: the provider refuses it, nothing is made.
    let carol = format!("carol-{}@acme.example", std::process::id());
    let out = sign_in(&py, &chromium, &start, &carol, true);
    let fresh = out["callback_url"].as_str().unwrap().to_owned();
    let replayed = with_param(&fresh, "code", &param(&url, "code"));
    callback(&gw, &replayed, out["cookies"]["tg_sso"].as_str().unwrap())
        .await
        .error(403, "permission_error");
    assert_eq!(accounts_with(&gw, &carol).await, 0);

    // A domain not allowed.
    let mallory = format!("mallory-{}@other.example", std::process::id());
    let out = sign_in(&py, &chromium, &start, &mallory, true);
    let r = callback(
        &gw,
        out["callback_url"].as_str().unwrap(),
        out["cookies"]["tg_sso"].as_str().unwrap(),
    )
    .await;
    let e = r.error(403, "permission_error");
    assert!(
        e["error"]["message"].as_str().unwrap().contains("domain"),
        "{e}"
    );
    assert_eq!(accounts_with(&gw, &mallory).await, 0);

    // Tampered ID tokens (the provider's answer rewritten, re-signed with its own key where the
    // tampering is not the signature itself): each refused, nothing made.
    for mode in [
        "signature",
        "audience",
        "issuer",
        "expired",
        "nonce",
        "alg_none",
        "other_key",
        "unverified_email",
    ] {
        let who = format!("{mode}-{}@acme.example", std::process::id());
        let out = sign_in(&py, &chromium, &start, &who, true);
        provider.tamper(Some(mode)).await;
        let r = callback(
            &gw,
            out["callback_url"].as_str().unwrap(),
            out["cookies"]["tg_sso"].as_str().unwrap(),
        )
        .await;
        provider.tamper(None).await;
        let e = r.error(403, "permission_error");
        assert_eq!(accounts_with(&gw, &who).await, 0, "{mode}: {e}");
        assert!(
            !members(&gw, &owner_key, &org)
                .await
                .iter()
                .any(|(m, _)| *m == who),
            "{mode}"
        );
    }

    // The provider rotates its signing key: the next sign-in is verified with the new one.
    provider.rotate_key();
    let dave = format!("dave-{}@acme.example", std::process::id());
    let out = sign_in(&py, &chromium, &start, &dave, true);
    let r = callback(
        &gw,
        out["callback_url"].as_str().unwrap(),
        out["cookies"]["tg_sso"].as_str().unwrap(),
    )
    .await;
    assert_eq!(r.status, 200, "{}\n{}", r.text(), provider.log());
    assert_eq!(accounts_with(&gw, &dave).await, 1);

    // SSO required: a password session is refused the organization; a sign-on session is not.
    let mut required = settings.clone();
    required["required"] = json!(true);
    assert_eq!(
        gw.api_as(&owner_key, "PUT", &path, &required).await.status,
        200
    );
    let sso_cookie = session.split(';').next().unwrap().to_owned();
    let r = request(
        gw.addr,
        "GET",
        &format!("/api/v1/orgs/{org}"),
        &[("Cookie", &sso_cookie)],
        b"",
    )
    .await;
    assert_eq!(r.status, 200, "{}", r.text());
    let owner_email = gw
        .api_as(&owner_key, "GET", "/api/v1/auth/me", &json!({}))
        .await
        .json()["email"]
        .as_str()
        .unwrap()
        .to_owned();
    let password_cookie = gw.login(&owner_email).await;
    let r = request(
        gw.addr,
        "GET",
        &format!("/api/v1/orgs/{org}"),
        &[("Cookie", &password_cookie)],
        b"",
    )
    .await;
    let e = r.error(403, "permission_error");
    assert!(
        e["error"]["message"]
            .as_str()
            .unwrap()
            .contains("single sign-on"),
        "{e}"
    );
    // Garbage at the callback: clear JSON errors, nothing made, the gateway unharmed.
    let accounts_before = accounts_with(&gw, "garbage@acme.example").await;
    for (path, status, kind) in [
        ("/api/v1/sso/callback", 400, "invalid_request"),
        ("/api/v1/sso/callback?code=x", 400, "invalid_request"),
        (
            "/api/v1/sso/callback?state=%zz&code=x",
            400,
            "invalid_request",
        ),
        (
            "/api/v1/sso/callback?error=access_denied&state=x",
            403,
            "permission_error",
        ),
    ] {
        let r = request(gw.addr, "GET", path, &[("Cookie", "tg_sso=x")], b"").await;
        r.error(status, kind);
    }
    assert_eq!(
        accounts_with(&gw, "garbage@acme.example").await,
        accounts_before
    );
    // Without settings, the start is 404; the gateway stays healthy throughout.
    get(gw.addr, "/api/v1/sso/org_nosuch/start")
        .await
        .error(404, "not_found");
    assert!(gw.is_healthy().await);
}
