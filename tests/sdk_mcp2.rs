//! The official `mcp` 2.x Python SDK through the marketplace (issue 30, part): a tool server
//! made with its MCPServer (speaking 2026-07-28 and the handshake era) registers, is approved
//! and is called by its Client in each mode, `2026-07-28` (stateless only), `auto` (discover,
//! else initialize) and `legacy` (initialize), on `/mcp` and `/mcp/{slug}`; each call charged
//! the price exactly, the developer paid its share; the price shown in each tool's `_meta`.
//!
//! Needs a Python with `mcp` 2.x (`./dev test` sets up `.venv-mcp2`); without one the test
//! prints `SKIPPED: …` and passes, unless `TOLLGATE_TEST_REQUIRE_SERVICES=1` (CI).

use std::process::Command;

use serde_json::{json, Value};
use tollgate_testkit::*;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_mcp_2_sdk_in_every_mode_lists_and_calls_through_both_endpoints() {
    let Some(py) = python_mcp2() else {
        return skip("no Python with the mcp package (2.x); run ./dev test");
    };
    let tools = FastMcpServer::sdk2(&py).await;
    let fake = FakeOpenAi::start("p").await;
    let cfg = format!(
        "{}[mcp]\nallow_private_upstreams = true\n",
        one_model_config(&fake, "m-2024-01-01")
    );
    let gw = Gateway::start(tollgate_bin!(), &cfg).await;
    let (_dev, dev_key) = gw.signup(&unique_email()).await;
    let slug = format!(
        "sdk2-{}",
        unique_email()
            .trim_start_matches('u')
            .split('@')
            .next()
            .unwrap()
    );
    let body = json!({"slug": slug, "upstream_url": tools.url(), "default_credits": 5}).to_string();
    let auth = format!("Bearer {dev_key}");
    let r = request(
        gw.addr,
        "POST",
        "/api/v1/mcp/services",
        &[("Authorization", &auth)],
        body.as_bytes(),
    )
    .await;
    assert_eq!(r.status, 201, "{}", r.text());
    let admin = format!("Bearer {ADMIN_TOKEN}");
    let path = format!("/api/v1/admin/mcp/services/{slug}/approve");
    let r = request(gw.addr, "POST", &path, &[("Authorization", &admin)], b"{}").await;
    assert_eq!(r.status, 200, "{}", r.text());

    let before = (gw.balance(&gw.key).await, gw.balance(&dev_key).await);
    let script = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/sdk/mcp2_sdk.py");
    let mut calls = 0;
    for mode in ["2026-07-28", "auto", "legacy"] {
        for (path, tool) in [
            ("/mcp".to_string(), format!("{slug}__echo")),
            (format!("/mcp/{slug}"), "echo".to_string()),
        ] {
            let url = format!("http://{}{path}", gw.addr);
            let out = tokio::task::block_in_place(|| {
                Command::new(&py)
                    .arg(script)
                    .args([&url, &gw.key, &tool, mode])
                    .output()
                    .unwrap()
            });
            let stdout = String::from_utf8_lossy(&out.stdout);
            assert!(
                out.status.success(),
                "{mode} {path}: the SDK failed\nstdout:\n{stdout}\nstderr:\n{}\ngateway:\n{}",
                String::from_utf8_lossy(&out.stderr),
                gw.log()
            );
            let v: Value = serde_json::from_str(stdout.trim().lines().last().unwrap_or_default())
                .unwrap_or_else(|e| panic!("{mode} {path}: {e}: {stdout}"));
            assert_eq!(v["text"], "hi", "{mode} {path}: {v}");
            assert_eq!(v["error"], false, "{mode} {path}: {v}");
            assert_eq!(v["price"], 5, "{mode} {path}: {v}");
            assert!(
                v["tools"]
                    .as_array()
                    .unwrap()
                    .iter()
                    .any(|t| t == tool.as_str()),
                "{v}"
            );
            calls += 1;
        }
    }
    // Six calls at 5 credits; the developer's share of each, rounded up: 4.
    assert_eq!(before.0 - gw.balance(&gw.key).await, calls * 5_000_000);
    assert_eq!(gw.balance(&dev_key).await - before.1, calls * 4_000_000);
}
