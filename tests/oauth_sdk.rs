//! OAuth sign-in driven by code nobody here wrote: the official `mcp` Python SDK's
//! `OAuthClientProvider` (1.x) discovers, registers and authorizes against the gateway, its
//! redirect handler driving Chromium through Playwright over the dashboard's consent page (log
//! in, see the client, approve), then lists and calls a tool through `/mcp` with the token and
//! refreshes it. Charged as a key: exactly the tool's price per call, to the signed-in account.
//!
//! Needs a Python with `mcp` 1.x and `playwright` (`./dev test` sets up `.venv`) and Chromium
//! (`TOLLGATE_TEST_CHROMIUM`, else `/usr/bin/chromium`); without them the test prints
//! `SKIPPED: …` and passes, unless `TOLLGATE_TEST_REQUIRE_SERVICES=1`.

use std::process::Command;

use serde_json::json;
use tollgate_testkit::*;

const PRICE: i64 = 5;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_official_sdk_signs_in_through_the_consent_page_and_calls_a_tool() {
    let Some(py) = python_with("import mcp.client.auth, playwright.async_api") else {
        return skip("no Python with the mcp 1.x and playwright packages; run ./dev test");
    };
    let chromium =
        std::env::var("TOLLGATE_TEST_CHROMIUM").unwrap_or_else(|_| "/usr/bin/chromium".into());
    if !std::path::Path::new(&chromium).exists() {
        return skip("no Chromium at TOLLGATE_TEST_CHROMIUM or /usr/bin/chromium");
    }
    let fake = FakeOpenAi::start("p").await;
    let tools = FakeToolServer::start().await;
    let cfg = format!(
        "{}[mcp]\nallow_private_upstreams = true\n",
        one_model_config(&fake, "m-2024-01-01")
    );
    let gw = Gateway::start(tollgate_bin!(), &cfg).await;
    let slug = format!(
        "sdkoa-{}",
        unique_email()
            .trim_start_matches('u')
            .split('@')
            .next()
            .unwrap()
    );
    let body = json!({"slug": slug, "upstream_url": tools.url(), "default_credits": PRICE});
    assert_eq!(
        gw.api_as(&gw.key, "POST", "/api/v1/mcp/services", &body)
            .await
            .status,
        201
    );
    let approve = format!("/api/v1/admin/mcp/services/{slug}/approve");
    assert_eq!(
        gw.api_as(ADMIN_TOKEN, "POST", &approve, &json!({}))
            .await
            .status,
        200
    );
    let email = unique_email();
    let (_, key) = gw.signup(&email).await;
    let before = gw.balance(&key).await;
    let script = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/sdk/oauth_sdk.py");
    let env = [
        ("TOLLGATE_BASE_URL", format!("http://{}", gw.addr)),
        ("TOLLGATE_EMAIL", email.clone()),
        ("TOLLGATE_PASSWORD", "correct horse battery".to_owned()),
        ("TOLLGATE_SLUG", slug.clone()),
        ("TOLLGATE_CHROMIUM", chromium),
    ];
    let out =
        tokio::task::block_in_place(|| Command::new(&py).arg(script).envs(env).output().unwrap());
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success() && stdout.contains("sdk-oauth: all passed"),
        "SDK script failed\nstdout:\n{stdout}\nstderr:\n{}\ngateway:\n{}",
        String::from_utf8_lossy(&out.stderr),
        gw.log()
    );
    // Two calls of the tool, charged to the account that approved, as a key's would be.
    assert_eq!(before - gw.balance(&key).await, 2 * PRICE * 1_000_000);
    // The grant is listed in the dashboard, acting as the key made for it.
    let cookie = gw.login(&email).await;
    let list = request(
        gw.addr,
        "GET",
        "/api/v1/oauth/grants",
        &[("Cookie", &cookie)],
        b"",
    )
    .await
    .json();
    assert_eq!(
        list["data"][0]["client_name"], "Tollgate SDK test",
        "{list}"
    );
    assert_eq!(list["data"][0]["key_name"], "OAuth: Tollgate SDK test");
    assert!(list["data"][0]["last_used_at"].is_number(), "{list}");
    // The refresh token the SDK rotated away is dead, and presenting it revokes the grant.
    let old = stdout
        .lines()
        .find_map(|l| l.strip_prefix("old refresh token: "))
        .unwrap()
        .trim();
    let form = format!("grant_type=refresh_token&refresh_token={old}&client_id=any");
    let r = request(
        gw.addr,
        "POST",
        "/oauth/token",
        &[("Content-Type", "application/x-www-form-urlencoded")],
        form.as_bytes(),
    )
    .await;
    assert_eq!(r.json()["error"], "invalid_grant", "{}", r.text());
    let list = request(
        gw.addr,
        "GET",
        "/api/v1/oauth/grants",
        &[("Cookie", &cookie)],
        b"",
    )
    .await
    .json();
    assert_eq!(list["data"], json!([]), "{list}");
}
