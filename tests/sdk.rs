//! Interoperability with a client nobody here wrote: the official `openai` Python SDK.
//!
//! Needs a Python with `openai` installed: `TOLLGATE_TEST_PYTHON` names it (`./dev test` and
//! `.ci/run` set up `.venv`). Without one the test prints `SKIPPED: …` and passes, unless
//! `TOLLGATE_TEST_REQUIRE_SERVICES=1` (CI), where a missing SDK is a failure.

use std::process::Command;

use tollgate_testkit::*;

fn python() -> Option<String> {
    python_with("import openai")
}

/// Runs `tests/sdk/<script>` with `py` against the gateway's `/v1` and its key; asserts it
/// ended with `sdk: all passed` and returns its standard output.
async fn run_script(py: String, script: &str, gw: &Gateway) -> String {
    let script = format!("{}/tests/sdk/{script}", env!("CARGO_MANIFEST_DIR"));
    let base = format!("http://{}/v1", gw.addr);
    let key = gw.key.clone();
    let out = tokio::task::spawn_blocking(move || {
        Command::new(py)
            .arg(script)
            .env("TOLLGATE_BASE_URL", base)
            .env("TOLLGATE_API_KEY", key)
            .output()
    })
    .await
    .unwrap()
    .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        out.status.success() && stdout.contains("sdk: all passed"),
        "SDK script failed\nstdout:\n{stdout}\nstderr:\n{stderr}\ngateway:\n{}",
        gw.log()
    );
    stdout
}

#[tokio::test]
async fn the_official_openai_python_sdk_works_against_the_gateway() {
    let Some(py) = python() else {
        return skip("no Python with the openai package; run ./dev test to set one up");
    };
    let good = FakeOpenAi::start("good").await;
    let cfg = format!(
        "{FAST_TIMEOUTS}{}[[providers]]\nname = \"dead\"\nendpoints = [\"http://127.0.0.1:{}\"]\n\n{}{}[aliases]\n\"good\" = \"good-2024-01-01\"\n\"broken\" = \"broken-2024-01-01\"\n",
        provider("pg", &[&good], ""),
        free_port(),
        model("good-2024-01-01", "pg", "economy", ""),
        model("broken-2024-01-01", "dead", "powerful", ""),
    );
    let gw = Gateway::start(tollgate_bin!(), &cfg).await;
    run_script(py, "openai_sdk.py", &gw).await;
}

#[tokio::test]
async fn the_official_openai_python_sdk_creates_embeddings_and_is_charged_exactly() {
    let Some(py) = python() else {
        return skip("no Python with the openai package; run ./dev test to set one up");
    };
    let fake = FakeOpenAi::start("p").await;
    let cfg = format!(
        "{FAST_TIMEOUTS}{}[[models]]\nid = \"emb\"\nprovider = \"p\"\nkind = \"embedding\"\ninput_credits_per_1k = 10\noutput_credits_per_1k = 0\n\n{}",
        provider("p", &[&fake], ""),
        model("chat", "p", "economy", ""),
    );
    let gw = Gateway::start(tollgate_bin!(), &cfg).await;
    let initial = books::read(&gw.config_db(), &gw.user_id).await.money;
    let stdout = run_script(py, "openai_embeddings.py", &gw).await;
    let tokens: i64 = stdout
        .lines()
        .find_map(|l| l.strip_prefix("TOTAL_TOKENS="))
        .and_then(|n| n.trim().parse().ok())
        .expect("the script reports its tokens");
    // Once the credit lease is back, the balance fell by exactly those tokens at 10 credits
    // per 1K (10,000 µcr a token).
    let b = books::settled(&gw.config_db(), &gw.user_id).await;
    assert_eq!(initial - b.money, tokens * 10_000, "{stdout}");
}
