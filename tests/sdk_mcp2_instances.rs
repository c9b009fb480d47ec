//! Two instances of one deployment (Postgres + Redis when set, else one SQLite file) behind a
//! round-robin front serve one client's calls in turn (issue 30's acceptance): a 2026-only
//! tool server (the `mcp` 2.x SDK's MCPServer, stateless) registered on one and approved, then
//! listed and called through `/mcp` and `/mcp/{slug}` by the 2.x SDK's Client in 2026-only
//! mode and in auto mode, and by the 1.x SDK's client, each request on a new connection so
//! that the instances take them alternately; every call charged exactly once, the developer
//! paid its share of each. And the 1.x client's callbacks giving that server the input it asks
//! for (an input-required result the gateway turns into requests to the client), through the
//! front too when Redis carries the answers between instances.
//!
//! Needs Pythons with `mcp` 2.x and 1.x (`./dev test` sets up `.venv-mcp2` and `.venv`);
//! without them the test prints `SKIPPED: …` and passes, unless
//! `TOLLGATE_TEST_REQUIRE_SERVICES=1` (CI).

use std::process::Command;

use serde_json::{json, Value};
use tollgate_testkit::*;

fn run(py: &str, script: &str, args: &[&str]) -> String {
    let script = format!("{}/tests/sdk/{script}", env!("CARGO_MANIFEST_DIR"));
    let out =
        tokio::task::block_in_place(|| Command::new(py).arg(script).args(args).output().unwrap());
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    assert!(
        out.status.success(),
        "{args:?}: the SDK failed\nstdout:\n{stdout}\nstderr:\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    stdout
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_instances_serve_one_clients_calls_in_turn_for_both_sdk_generations() {
    let Some(py2) = python_mcp2() else {
        return skip("no Python with the mcp package (2.x); run ./dev test");
    };
    let Some(py1) = python_with("import mcp.server.fastmcp") else {
        return skip("no Python with the mcp package (1.x); run ./dev test");
    };
    let tools = FastMcpServer::sdk2(&py2).await;
    let mut front = RoundRobin::bind().await;
    let fake = FakeOpenAi::start("p").await;
    let cfg = format!(
        "{}[mcp]\nallow_private_upstreams = true\nallowed_hosts = [\"{}\"]\n",
        one_model_config(&fake, "m-2024-01-01"),
        front.addr
    );
    let one = Gateway::start(tollgate_bin!(), &cfg).await;
    let two = one.second(tollgate_bin!(), &cfg).await;
    front.serve(vec![one.addr, two.addr]);
    let (_dev, dev_key) = one.signup(&unique_email()).await;
    let n = unique_email();
    let slug = format!(
        "two-{}",
        n.trim_start_matches('u').split('@').next().unwrap()
    );
    let r = one
        .api_as(
            &dev_key,
            "POST",
            "/api/v1/mcp/services",
            &json!({"slug": slug, "upstream_url": tools.url(), "default_credits": 5}),
        )
        .await;
    assert_eq!(r.status, 201, "{}", r.text());
    let path = format!("/api/v1/admin/mcp/services/{slug}/approve");
    let r = one.api_as(ADMIN_TOKEN, "POST", &path, &json!({})).await;
    assert_eq!(r.status, 200, "{}", r.text());

    let before = (one.balance(&one.key).await, one.balance(&dev_key).await);
    let mut calls = 0;
    for (path, tool) in [
        ("/mcp".to_string(), format!("{slug}__echo")),
        (format!("/mcp/{slug}"), "echo".to_string()),
    ] {
        let url = format!("http://{}{path}", front.addr);
        for mode in ["2026-07-28", "auto"] {
            let seen = front.counts();
            let out = run(&py2, "mcp2_sdk.py", &[&url, &one.key, &tool, mode, "4"]);
            let v: Value = serde_json::from_str(out.trim().lines().last().unwrap()).unwrap();
            assert_eq!(
                (v["calls"].as_u64(), v["price"].as_u64()),
                (Some(4), Some(5)),
                "{v}"
            );
            // This client's requests went to both instances.
            let now = front.counts();
            assert!(
                now[0] > seen[0] && now[1] > seen[1],
                "{mode} {path}: {seen:?} → {now:?}"
            );
            calls += 4;
        }
        let seen = front.counts();
        let out = run(&py1, "mcp1_calls.py", &[&url, &one.key, &tool, "4"]);
        assert!(out.contains("sdk1: 4 calls"), "{out}");
        let now = front.counts();
        assert!(
            now[0] > seen[0] && now[1] > seen[1],
            "1.x {path}: {seen:?} → {now:?}"
        );
        calls += 4;
    }
    // Every call charged once at 5 credits; the developer's share of each, rounded up: 4.
    assert_eq!(before.0 - one.balance(&one.key).await, calls * 5_000_000);
    assert_eq!(one.balance(&dev_key).await - before.1, calls * 4_000_000);
    let auth = format!("Bearer {dev_key}");
    let h = [("Authorization", auth.as_str())];
    let e = request(two.addr, "GET", "/api/v1/mcp/earnings", &h, b"")
        .await
        .json();
    assert_eq!(e["total_calls"], calls);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_1x_client_gives_the_input_a_2026_server_asks_for_through_both_endpoints_and_instances() {
    let Some(py2) = python_mcp2() else {
        return skip("no Python with the mcp package (2.x); run ./dev test");
    };
    let Some(py1) = python_with("import mcp.server.fastmcp") else {
        return skip("no Python with the mcp package (1.x); run ./dev test");
    };
    let tools = FastMcpServer::sdk2(&py2).await;
    let mut front = RoundRobin::bind().await;
    let fake = FakeOpenAi::start("p").await;
    let cfg = format!(
        "{}[mcp]\nallow_private_upstreams = true\nallowed_hosts = [\"{}\"]\n",
        one_model_config(&fake, "m-2024-01-01"),
        front.addr
    );
    let opts = Opts {
        env: vec![(
            "TOLLGATE_MCP_RELAY_SECRET".into(),
            "inputs-relay-secret-0123456789abcdef012345".into(),
        )],
        ..Opts::default()
    };
    let gw = Gateway::start_opts(tollgate_bin!(), &cfg, opts).await;
    // With Redis, the answers an SDK posts on other connections may land on either instance
    // (passed on to the call's through Redis); without it, one instance (the stickiness).
    let second = match gw.redis_prefix() {
        Some(_) => Some(gw.second(tollgate_bin!(), &cfg).await),
        None => None,
    };
    let mut backends = vec![gw.addr];
    backends.extend(second.as_ref().map(|g| g.addr));
    front.serve(backends);
    let (_dev, dev_key) = gw.signup(&unique_email()).await;
    let n = unique_email();
    let slug = format!(
        "greet-{}",
        n.trim_start_matches('u').split('@').next().unwrap()
    );
    let r = gw
        .api_as(
            &dev_key,
            "POST",
            "/api/v1/mcp/services",
            &json!({"slug": slug, "upstream_url": tools.url(), "default_credits": 5}),
        )
        .await;
    assert_eq!(r.status, 201, "{}", r.text());
    let path = format!("/api/v1/admin/mcp/services/{slug}/approve");
    let r = gw.api_as(ADMIN_TOKEN, "POST", &path, &json!({})).await;
    assert_eq!(r.status, 200, "{}", r.text());
    let before = (gw.balance(&gw.key).await, gw.balance(&dev_key).await);
    for (path, tool) in [
        (format!("/mcp/{slug}"), "greet".to_string()),
        ("/mcp".to_string(), format!("{slug}__greet")),
    ] {
        let url = format!("http://{}{path}", front.addr);
        let out = run(&py1, "mcp1_inputs.py", &[&url, &gw.key, &tool]);
        assert!(out.contains("sdk1 inputs: ok"), "{out}");
    }
    assert!(
        front.counts().iter().all(|c| *c > 0),
        "{:?}",
        front.counts()
    );
    // Four calls (each asked and retried once upstream), each charged once.
    assert_eq!(before.0 - gw.balance(&gw.key).await, 20_000_000);
    assert_eq!(gw.balance(&dev_key).await - before.1, 16_000_000);
}
