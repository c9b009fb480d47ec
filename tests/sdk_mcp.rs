//! Interoperability of the tool marketplace with code nobody here wrote: tool servers made with
//! the official `mcp` Python SDK's FastMCP (one stateful with SSE replies, one stateless with
//! JSON), registered and approved, then listed and called through `/mcp` and `/mcp/{slug}` by
//! the same SDK's client. Charges and earnings exact for prices 1, 7, 59 and 60.
//!
//! Needs a Python with `mcp` 1.x (`./dev test` sets up `.venv`); without one the test prints
//! `SKIPPED: …` and passes, unless `TOLLGATE_TEST_REQUIRE_SERVICES=1` (CI).

use std::process::Command;

use serde_json::json;
use tollgate_testkit::*;

fn python() -> Option<String> {
    python_with("import mcp.server.fastmcp")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_official_mcp_sdk_lists_and_calls_tools_through_the_gateway() {
    let Some(py) = python() else {
        return skip("no Python with the mcp package (1.x); run ./dev test");
    };
    let stateful = FastMcpServer::start(&py, false).await;
    let stateless = FastMcpServer::start(&py, true).await;
    let fake = FakeOpenAi::start("p").await;
    let cfg = format!(
        "{}[mcp]\nallow_private_upstreams = true\n",
        one_model_config(&fake, "m-2024-01-01")
    );
    let gw = Gateway::start(tollgate_bin!(), &cfg).await;
    let (_dev, dev_key) = gw.signup(&unique_email()).await;
    let n = unique_email();
    let n = n
        .trim_start_matches('u')
        .split('@')
        .next()
        .unwrap()
        .to_owned();
    let mut slugs = Vec::new();
    for (price, server) in [
        (1, &stateful),
        (7, &stateful),
        (59, &stateless),
        (60, &stateless),
    ] {
        let slug = format!("p{price}-{n}");
        let b = serde_json::to_vec(
            &json!({"slug": slug, "upstream_url": server.url(), "default_credits": price}),
        )
        .unwrap();
        let auth = format!("Bearer {dev_key}");
        let r = request(
            gw.addr,
            "POST",
            "/api/v1/mcp/services",
            &[("Authorization", &auth)],
            &b,
        )
        .await;
        assert_eq!(r.status, 201, "{}", r.text());
        let admin = format!("Bearer {ADMIN_TOKEN}");
        let path = format!("/api/v1/admin/mcp/services/{slug}/approve");
        let r = request(gw.addr, "POST", &path, &[("Authorization", &admin)], b"{}").await;
        assert_eq!(r.status, 200, "{}", r.text());
        slugs.push(slug);
    }
    let before = (gw.balance(&gw.key).await, gw.balance(&dev_key).await);
    let script = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/sdk/mcp_sdk.py");
    let env = [
        ("TOLLGATE_BASE_URL", format!("http://{}", gw.addr)),
        ("TOLLGATE_API_KEY", gw.key.clone()),
        ("TOLLGATE_SLUGS", slugs.join(",")),
    ];
    let out =
        tokio::task::block_in_place(|| Command::new(&py).arg(script).envs(env).output().unwrap());
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success() && stdout.contains("sdk: all passed"),
        "SDK script failed\nstdout:\n{stdout}\nstderr:\n{}\ngateway:\n{}",
        String::from_utf8_lossy(&out.stderr),
        gw.log()
    );
    // add on each of the four, echo once more on the first (price 1): 128 credits; the
    // developer's shares 1 + 1, 6, 48, 48.
    assert_eq!(before.0 - gw.balance(&gw.key).await, 128_000_000);
    assert_eq!(gw.balance(&dev_key).await - before.1, 104_000_000);
    let auth = format!("Bearer {dev_key}");
    let e = request(
        gw.addr,
        "GET",
        "/api/v1/mcp/earnings",
        &[("Authorization", &auth)],
        b"",
    )
    .await
    .json();
    assert_eq!(e["total_calls"], 5);
    assert_eq!(e["total_credits_earned"].as_f64(), Some(104.0));
}
