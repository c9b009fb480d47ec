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
    run_script_with(py, script, gw, &[]).await
}

async fn run_script_with(py: String, script: &str, gw: &Gateway, env: &[(&str, &str)]) -> String {
    let script = format!("{}/tests/sdk/{script}", env!("CARGO_MANIFEST_DIR"));
    let base = format!("http://{}/v1", gw.addr);
    let key = gw.key.clone();
    let env: Vec<(String, String)> = env
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect();
    let out = tokio::task::spawn_blocking(move || {
        Command::new(py)
            .arg(script)
            .env("TOLLGATE_BASE_URL", base)
            .env("TOLLGATE_API_KEY", key)
            .envs(env)
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
    let stdout = run_script(py.clone(), "openai_embeddings.py", &gw).await;
    let tokens: i64 = stdout
        .lines()
        .find_map(|l| l.strip_prefix("TOTAL_TOKENS="))
        .and_then(|n| n.trim().parse().ok())
        .expect("the script reports its tokens");
    // Once the credit lease is back, the balance fell by exactly those tokens at 10 credits
    // per 1K (10,000 µcr a token).
    let b = books::settled(&gw.config_db(), &gw.user_id).await;
    assert_eq!(initial - b.money, tokens * 10_000, "{stdout}");

    // Inputs that count above the estimate of one token per 3 bytes: the SDK sees the exact
    // charge in usage.cost, cost_details and the header, and the balance falls by it.
    fake.set_mode(tollgate_testkit::openai::Mode::Usage(40, 0));
    let env = [("REPORTED", "40"), ("RATE", "10")];
    run_script_with(py, "openai_embeddings_cost.py", &gw, &env).await;
    let b = books::settled(&gw.config_db(), &gw.user_id).await;
    assert_eq!(initial - b.money, (tokens + 3 * 40) * 10_000);
}

#[tokio::test]
async fn the_official_openai_python_sdk_speaks_the_responses_api_and_is_charged_exactly() {
    let Some(py) = python() else {
        return skip("no Python with the openai package; run ./dev test to set one up");
    };
    let fake = FakeOpenAi::start("p").await;
    // `instruct` serves legacy completions (completions.create), at the same rates.
    let cfg = format!(
        "{}{}",
        one_model_config(&fake, "m"),
        model("instruct", "p", "economy", "completions = true")
    );
    let gw = Gateway::start(tollgate_bin!(), &cfg).await;
    let other = gw.second(tollgate_bin!(), &cfg).await;
    let initial = books::read(&gw.config_db(), &gw.user_id).await.money;
    let stdout = run_two(py, "openai_responses.py", &gw, &other).await;
    let (input, output) = tokens(&stdout);
    // Each request at 1 and 2 credits per 1K tokens (1,000 and 2,000 µcr a token), summed over
    // both instances once their credit leases are back.
    let b = books::settled(&gw.config_db(), &gw.user_id).await;
    assert_eq!(
        initial - b.money,
        input * 1_000 + output * 2_000,
        "{stdout}"
    );
}

#[tokio::test]
async fn an_openai_agents_sdk_agent_runs_its_function_tool_through_the_responses_api() {
    let Some(py) = python_with("import agents") else {
        return skip("no Python with the openai-agents package; run ./dev test to set one up");
    };
    let fake = FakeOpenAi::start("p").await;
    fake.set_stream_tool_calls(true);
    let gw = Gateway::start(tollgate_bin!(), &one_model_config(&fake, "m")).await;
    let initial = books::read(&gw.config_db(), &gw.user_id).await.money;
    let stdout = run_script(py, "openai_agents.py", &gw).await;
    let (input, output) = tokens(&stdout);
    let b = books::settled(&gw.config_db(), &gw.user_id).await;
    assert_eq!(
        initial - b.money,
        input * 1_000 + output * 2_000,
        "{stdout}"
    );
    // Four model calls: the tool call and the answer, twice.
    assert_eq!(fake.chat_count(), 4);
}

/// The `TOKENS=<input> <output>` line a script prints.
fn tokens(stdout: &str) -> (i64, i64) {
    stdout
        .lines()
        .find_map(|l| l.strip_prefix("TOKENS="))
        .and_then(|t| t.trim().split_once(' '))
        .map(|(i, o)| (i.parse().unwrap(), o.parse().unwrap()))
        .expect("the script reports its tokens")
}

/// [`run_script`] with a second instance's `/v1` as `TOLLGATE_BASE_URL_2`.
async fn run_two(py: String, script: &str, gw: &Gateway, other: &Gateway) -> String {
    let script = format!("{}/tests/sdk/{script}", env!("CARGO_MANIFEST_DIR"));
    let (base, base2, key) = (
        format!("http://{}/v1", gw.addr),
        format!("http://{}/v1", other.addr),
        gw.key.clone(),
    );
    let out = tokio::task::spawn_blocking(move || {
        Command::new(py)
            .arg(script)
            .env("TOLLGATE_BASE_URL", base)
            .env("TOLLGATE_BASE_URL_2", base2)
            .env("TOLLGATE_API_KEY", key)
            .output()
    })
    .await
    .unwrap()
    .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    assert!(
        out.status.success() && stdout.contains("sdk: all passed"),
        "SDK script failed\nstdout:\n{stdout}\nstderr:\n{}\ngateway:\n{}\nother:\n{}",
        String::from_utf8_lossy(&out.stderr),
        gw.log(),
        other.log()
    );
    stdout
}
