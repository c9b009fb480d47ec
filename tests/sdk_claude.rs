//! Interoperability for Claude models with clients nobody here wrote: the official `openai`
//! Python SDK against models of provider kind `anthropic`, and the official `anthropic` SDK
//! against `/v1/messages` (to an Anthropic provider and to an OpenAI-compatible one).
//!
//! Needs a Python with `openai` and `anthropic` (`./dev test` and `.ci/run` set up `.venv`).
//! Without one the tests print `SKIPPED: …` and pass, unless `TOLLGATE_TEST_REQUIRE_SERVICES=1`
//! (CI), where a missing SDK is a failure.

use std::process::Command;

use tollgate_testkit::*;

fn python() -> Option<String> {
    python_with("import openai, anthropic")
}

fn claude(id: &str, provider: &str) -> String {
    claude_in(id, provider, "powerful")
}

fn claude_in(id: &str, provider: &str, tier: &str) -> String {
    format!("[[models]]\nid = \"{id}-2025-01-01\"\nprovider = \"{provider}\"\ntier = \"{tier}\"\ninput_credits_per_1k = 3\noutput_credits_per_1k = 15\ncache_read_credits_per_1k = 0.3\ncache_write_credits_per_1k = 3.75\nmax_output_tokens = 2000\n\n")
}

fn run(py: String, script: &str, env: Vec<(&'static str, String)>, gw: &Gateway) {
    let out = Command::new(py).arg(script).envs(env).output().unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        out.status.success(),
        "SDK script failed\nstdout:\n{stdout}\nstderr:\n{stderr}\ngateway:\n{}",
        gw.log()
    );
    assert!(stdout.contains("sdk: all passed"), "{stdout}");
}

/// µcr at the Claude models' rates.
fn cost(prompt: i64, cache_write: i64, cache_read: i64, output: i64) -> i64 {
    prompt * 3_000 + cache_write * 3_750 + cache_read * 300 + output * 15_000
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_openai_sdk_talks_to_claude_models_and_is_charged_exactly() {
    let Some(py) = python() else {
        return skip("no Python with the openai and anthropic packages; run ./dev test");
    };
    let (cache, tools) = (
        FakeAnthropic::start("cache").await,
        FakeAnthropic::start("tools").await,
    );
    cache.set_mode(AnthropicMode::Cache(100, 1000));
    tools.set_mode(AnthropicMode::Tools);
    let cfg = format!(
        "{FAST_TIMEOUTS}{}{}{}{}[aliases]\n\"claude-cache\" = \"claude-cache-2025-01-01\"\n\"claude-tools\" = \"claude-tools-2025-01-01\"\n",
        anthropic_provider("a1", &[&cache], ""),
        anthropic_provider("a2", &[&tools], ""),
        claude("claude-cache", "a1"),
        claude("claude-tools", "a2"),
    );
    let gw = Gateway::start(tollgate_bin!(), &cfg).await;
    let before = gw.balance(&gw.key).await;
    let env = vec![
        ("TOLLGATE_BASE_URL", format!("http://{}/v1", gw.addr)),
        ("TOLLGATE_API_KEY", gw.key.clone()),
    ];
    let script = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/sdk/openai_claude.py");
    tokio::task::block_in_place(|| run(py, script, env, &gw));
    // Two cached calls, a tool call (40 output tokens) and the answer after the tool results.
    let input = FakeAnthropic::INPUT_TOKENS as i64;
    let expected = 2 * cost(input, 100, 1000, cache.reply_words() as i64)
        + cost(input, 0, 0, 40)
        + cost(input, 0, 0, tools.reply_words() as i64);
    assert_eq!(before - gw.balance(&gw.key).await, expected);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_anthropic_sdk_talks_to_the_messages_api() {
    let Some(py) = python() else {
        return skip("no Python with the openai and anthropic packages; run ./dev test");
    };
    let (c, tools, busy) = (
        FakeAnthropic::start("c").await,
        FakeAnthropic::start("tools").await,
        FakeAnthropic::start("busy").await,
    );
    tools.set_mode(AnthropicMode::Tools);
    busy.set_mode(AnthropicMode::OverloadedEvent);
    let g = FakeOpenAi::start("g").await;
    let cfg = format!(
        "{FAST_TIMEOUTS}{}{}{}{}{}{}{}{}[aliases]\n\"claude\" = \"claude-2025-01-01\"\n\"claude-tools\" = \"claude-tools-2025-01-01\"\n\"claude-overloaded\" = \"claude-overloaded-2025-01-01\"\n\"gpt\" = \"gpt-2025-01-01\"\n",
        anthropic_provider("a1", &[&c], ""),
        anthropic_provider("a2", &[&tools], ""),
        anthropic_provider("a3", &[&busy], ""),
        provider("o", &[&g], ""),
        claude("claude", "a1"),
        claude("claude-tools", "a2"),
        // Alone in its tier: no sibling to fail over to.
        claude_in("claude-overloaded", "a3", "normal"),
        model("gpt-2025-01-01", "o", "economy", ""),
    );
    let gw = Gateway::start(tollgate_bin!(), &cfg).await;
    // A second account limited to one request an hour, for the 429.
    let (uid, limited) = gw.signup(&unique_email()).await;
    gw.admin_plan(&uid, "free", Some(1), None).await;
    let env = vec![
        ("TOLLGATE_BASE_URL", format!("http://{}", gw.addr)),
        ("TOLLGATE_API_KEY", gw.key.clone()),
        ("TOLLGATE_LIMITED_KEY", limited),
    ];
    let script = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/sdk/anthropic_sdk.py");
    tokio::task::block_in_place(|| run(py, script, env, &gw));
    // The beta header reached the Anthropic provider, never the OpenAI-compatible one.
    let beta =
        |r: &Recorded| r.header("anthropic-beta") == Some("mid-conversation-system-2026-04-07");
    assert!(
        c.requests().iter().any(beta),
        "the beta header was not forwarded"
    );
    assert!(!g.requests().iter().any(beta));
}
