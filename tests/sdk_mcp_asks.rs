//! The whole conversation of a call with code nobody here wrote: a FastMCP tool server (the
//! official `mcp` Python SDK, stateful) whose tool asks the client to sample and to elicit
//! mid-call, and the same SDK's client with a sampling and an elicitation callback, through
//! `/mcp/{slug}` and `/mcp`. The client reaches two gateway instances through a round-robin
//! front (one connection each way in turn), so its answers land on an instance other than the
//! one holding the call; each call completes and is charged once.
//!
//! Needs a Python with `mcp` 1.x (`./dev test` sets up `.venv`); without one the test prints
//! `SKIPPED: …` and passes, unless `TOLLGATE_TEST_REQUIRE_SERVICES=1` (CI).

use std::process::Command;

use serde_json::json;
use tollgate_testkit::*;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_sdk_client_answers_a_fastmcp_servers_sampling_and_elicitation_through_two_instances() {
    let Some(py) = python_with("import mcp.server.fastmcp") else {
        return skip("no Python with the mcp package (1.x); run ./dev test");
    };
    let server = FastMcpServer::start(&py, false).await;
    let mut front = RoundRobin::bind().await;
    let front_addr = front.addr;
    let fake = FakeOpenAi::start("p").await;
    let cfg = format!(
        "{}[mcp]\nallow_private_upstreams = true\ncall_timeout = 20\nallowed_hosts = [\"{front_addr}\"]\n",
        one_model_config(&fake, "m-2024-01-01")
    );
    let opts = Opts {
        env: vec![(
            "TOLLGATE_MCP_RELAY_SECRET".into(),
            "sdk-relay-secret-0123456789abcdef0123456789".into(),
        )],
        ..Opts::default()
    };
    let one = Gateway::start_opts(tollgate_bin!(), &cfg, opts).await;
    let two = one.second(tollgate_bin!(), &cfg).await;
    front.serve(vec![one.addr, two.addr]);

    let (_dev, dev_key) = one.signup(&unique_email()).await;
    let n = unique_email();
    let slug = format!(
        "asks-{}",
        n.trim_start_matches('u').split('@').next().unwrap()
    );
    let r = one
        .api_as(
            &dev_key,
            "POST",
            "/api/v1/mcp/services",
            &json!({"slug": slug, "upstream_url": server.url(), "default_credits": 5}),
        )
        .await;
    assert_eq!(r.status, 201, "{}", r.text());
    let path = format!("/api/v1/admin/mcp/services/{slug}/approve");
    let r = one.api_as(ADMIN_TOKEN, "POST", &path, &json!({})).await;
    assert_eq!(r.status, 200, "{}", r.text());

    let before = (one.balance(&one.key).await, one.balance(&dev_key).await);
    let script = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/sdk/mcp_asks.py");
    let env = [
        ("TOLLGATE_BASE_URL", format!("http://{front_addr}")),
        ("TOLLGATE_API_KEY", one.key.clone()),
        ("TOLLGATE_SLUG", slug.clone()),
    ];
    let out =
        tokio::task::block_in_place(|| Command::new(&py).arg(script).envs(env).output().unwrap());
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success() && stdout.contains("sdk: all passed"),
        "SDK script failed\nstdout:\n{stdout}\nstderr:\n{}\nfirst:\n{}\nsecond:\n{}",
        String::from_utf8_lossy(&out.stderr),
        one.log(),
        two.log()
    );
    // Both instances served the client.
    assert!(
        front.counts().iter().all(|c| *c > 0),
        "{:?}",
        front.counts()
    );
    // Four calls of `ask` at 5 credits, each charged once; the developer's share 4 each.
    assert_eq!(before.0 - one.balance(&one.key).await, 20_000_000);
    assert_eq!(one.balance(&dev_key).await - before.1, 16_000_000);
}
