//! Interoperability with a coding agent nobody here wrote: the Codex CLI (npm `@openai/codex`)
//! on its default configuration (its hosted web search on) running `codex exec`
//! non-interactively against Tollgate as a custom model provider with `wire_api =
//! "responses"`: its tool call and the turn after it streamed through `/v1/responses` to an
//! OpenAI-compatible chat fake (the web search left out), and a turn on a provider that serves
//! the Responses API itself (the web search passed on, run, and relayed to Codex); each
//! request charged exactly.
//!
//! Needs the Codex CLI: `./dev test` installs it under `.tools/` (`TOLLGATE_TEST_CODEX` names
//! another). Without one the test prints `SKIPPED: …` and passes, unless
//! `TOLLGATE_TEST_REQUIRE_SERVICES=1` (CI), where a missing agent is a failure.

use std::process::{Command, Stdio};

use tollgate_testkit::*;

#[tokio::test]
async fn codex_exec_runs_a_turn_with_a_tool_call_through_the_responses_api() {
    let Some(codex) = codex() else {
        return skip("no Codex CLI; run ./dev test to install it under .tools/");
    };
    let fake = FakeOpenAi::start("p").await;
    // Codex streams; the fake calls Codex's first tool, then answers once it sees the result.
    fake.set_stream_tool_calls(true);
    let gw = Gateway::start(tollgate_bin!(), &one_model_config(&fake, "m")).await;
    let initial = books::read(&gw.config_db(), &gw.user_id).await.money;
    codex_exec(codex, &gw, "Say hello", &fake.reply_text()).await;
    // The tool call, then the answer after Codex sent the tool's output back.
    let sent: Vec<serde_json::Value> = fake.requests().iter().map(|r| r.json()).collect();
    assert!(sent.len() >= 2, "{} model calls", sent.len());
    assert!(
        sent.iter().any(|b| b["messages"]
            .as_array()
            .is_some_and(|m| m.iter().any(|m| m["role"] == "tool"))),
        "no tool output came back from Codex"
    );
    // Codex offered its web search; the chat provider never saw it.
    assert!(
        sent.iter().all(|b| b["tools"]
            .as_array()
            .is_some_and(|t| t.iter().all(|t| t["type"] == "function"
                && !t["function"]["name"]
                    .as_str()
                    .unwrap_or("")
                    .contains("search")))),
        "a hosted tool reached a chat provider"
    );
    // Every model call reported 11 prompt tokens and the reply's words: at 1 and 2 credits
    // per 1K tokens.
    let per_call = FakeOpenAi::PROMPT_TOKENS as i64 * 1_000 + fake.reply_words() as i64 * 2_000;
    let b = books::settled(&gw.config_db(), &gw.user_id).await;
    assert_eq!(initial - b.money, sent.len() as i64 * per_call);
    assert_eq!(b.rows.len(), sent.len(), "one usage row per model call");
}

#[tokio::test]
async fn codex_exec_on_its_defaults_searches_through_a_native_responses_provider() {
    let Some(codex) = codex() else {
        return skip("no Codex CLI; run ./dev test to install it under .tools/");
    };
    let fake = FakeOpenAi::start("p").await;
    let cfg = format!(
        "{FAST_TIMEOUTS}{}{}",
        provider("p", &[&fake], "responses_api = true"),
        model("m", "p", "economy", "")
    );
    let gw = Gateway::start(tollgate_bin!(), &cfg).await;
    let initial = books::read(&gw.config_db(), &gw.user_id).await.money;
    let (stdout, stderr) = codex_exec(codex, &gw, "What is new in Rust?", &fake.reply_text()).await;
    let sent: Vec<serde_json::Value> = fake
        .requests()
        .into_iter()
        .filter(|r| r.path.ends_with("/v1/responses"))
        .map(|r| r.json())
        .collect();
    assert!(!sent.is_empty());
    // Codex's web search reached the provider as Codex sent it, and the search it ran came
    // back to Codex (its events relayed: Codex prints the query).
    assert!(
        sent[0]["tools"]
            .as_array()
            .is_some_and(|t| t.iter().any(|t| t["type"] == "web_search")),
        "{}",
        sent[0]["tools"]
    );
    assert!(
        format!("{stdout}{stderr}").contains("fake news"),
        "Codex did not see the search\nstdout:\n{stdout}\nstderr:\n{stderr}"
    );
    let per_call = FakeOpenAi::PROMPT_TOKENS as i64 * 1_000 + fake.reply_words() as i64 * 2_000;
    let b = books::settled(&gw.config_db(), &gw.user_id).await;
    assert_eq!(initial - b.money, sent.len() as i64 * per_call);
    assert_eq!(b.rows.len(), sent.len(), "one usage row per model call");
}

/// `codex exec PROMPT` on Codex's default configuration, with Tollgate as its model provider
/// (model `m`): it must succeed and print `reply`. Returns its stdout and stderr.
async fn codex_exec(codex: String, gw: &Gateway, prompt: &str, reply: &str) -> (String, String) {
    let home = temp_dir();
    let work = temp_dir();
    let config = format!(
        "model = \"m\"\nmodel_provider = \"tollgate\"\n\n[model_providers.tollgate]\nname = \"Tollgate\"\nbase_url = \"http://{}/v1\"\nenv_key = \"TOLLGATE_API_KEY\"\nwire_api = \"responses\"\n",
        gw.addr
    );
    std::fs::write(home.join("config.toml"), config).unwrap();
    let key = gw.key.clone();
    let prompt = prompt.to_owned();
    let out = tokio::task::spawn_blocking(move || {
        Command::new(codex)
            .args(["exec", "--skip-git-repo-check", "--color", "never", &prompt])
            .current_dir(&work)
            .env("CODEX_HOME", &home)
            .env("TOLLGATE_API_KEY", key)
            .stdin(Stdio::null())
            .output()
    })
    .await
    .unwrap()
    .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
    assert!(
        out.status.success() && stdout.contains(reply.trim()),
        "codex exec failed\nstdout:\n{stdout}\nstderr:\n{stderr}\ngateway:\n{}",
        gw.log()
    );
    (stdout, stderr)
}
