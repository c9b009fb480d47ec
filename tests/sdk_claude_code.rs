//! Interoperability with Claude Code (npm `@anthropic-ai/claude-code`, pinned), run as
//! `claude -p` with telemetry and auto-update off, `ANTHROPIC_BASE_URL` = Tollgate: on a Claude
//! model behind the fake Anthropic provider (which sees Claude Code's `anthropic-beta` header)
//! and on an OpenAI-compatible model behind the fake OpenAI provider (Claude Code sends a
//! `system` turn inside `messages`, adaptive thinking and context management), each answering
//! a prompt and a tool-using prompt; the charge equals the usage rows, one per model call.
//! Cache breakpoints (issue 53): Claude Code's second turn (`--continue`) reads the prompt cache
//! its first wrote, behind the fake's prompt cache, billed at the cache-read rate.
//!
//! Needs Claude Code: `./dev test` installs it under `.tools/` (`TOLLGATE_TEST_CLAUDE` names
//! another). Without it the tests print `SKIPPED: …` and pass, unless
//! `TOLLGATE_TEST_REQUIRE_SERVICES=1` (CI), where a missing agent is a failure.

use std::process::{Command, Stdio};

use tollgate_testkit::*;

/// Runs `claude -p PROMPT --model MODEL` against the gateway; returns its output.
async fn claude(bin: &str, gw: &Gateway, model: &str, prompt: &str) -> String {
    claude_in(bin, gw, model, prompt, &(temp_dir(), temp_dir()), &[]).await
}

/// `claude -p PROMPT --model MODEL EXTRA…` with this home and working directory (where Claude
/// Code keeps its sessions, for `--continue`).
async fn claude_in(
    bin: &str,
    gw: &Gateway,
    model: &str,
    prompt: &str,
    dirs: &(std::path::PathBuf, std::path::PathBuf),
    extra: &[&str],
) -> String {
    let (bin, home, work) = (bin.to_owned(), dirs.0.clone(), dirs.1.clone());
    let extra: Vec<String> = extra.iter().map(|e| e.to_string()).collect();
    let (base, key, model, prompt) = (
        format!("http://{}", gw.addr),
        gw.key.clone(),
        model.to_owned(),
        prompt.to_owned(),
    );
    let out = tokio::task::spawn_blocking(move || {
        Command::new(bin)
            .args(["-p", &prompt, "--model", &model])
            .args(&extra)
            .current_dir(&work)
            .env("HOME", &home)
            .env("ANTHROPIC_BASE_URL", base)
            .env("ANTHROPIC_API_KEY", key)
            // Its background calls (titles, summaries) go to the same model.
            .env("ANTHROPIC_SMALL_FAST_MODEL", &model)
            .env("ANTHROPIC_DEFAULT_HAIKU_MODEL", &model)
            .env("DISABLE_TELEMETRY", "1")
            .env("DISABLE_AUTOUPDATER", "1")
            .env("CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC", "1")
            .stdin(Stdio::null())
            .output()
    })
    .await
    .unwrap()
    .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    assert!(
        out.status.success(),
        "claude -p failed\nstdout:\n{stdout}\nstderr:\n{}\ngateway:\n{}",
        String::from_utf8_lossy(&out.stderr),
        gw.log()
    );
    stdout
}

/// Once the gateway is idle: no holds, and the balance fell by exactly the usage rows, one per
/// model call the provider saw.
async fn books_match(gw: &Gateway, initial: i64, calls: usize) {
    let b = books::settled(&gw.config_db(), &gw.user_id).await;
    assert_eq!(b.holds, 0);
    let charged: i64 = b.rows.iter().map(|(_, c)| c).sum();
    assert_eq!(initial - b.money, charged);
    assert!(b.rows.iter().all(|(_, c)| *c > 0), "{:?}", b.rows);
    assert_eq!(b.rows.len(), calls, "one usage row per model call");
}

#[tokio::test]
async fn claude_code_works_on_a_claude_model_and_forwards_its_betas() {
    let Some(bin) = claude_code() else {
        return skip("no Claude Code; run ./dev test to install it under .tools/");
    };
    let a = FakeAnthropic::start("a").await;
    let cfg = format!(
        "{FAST_TIMEOUTS}{}[[models]]\nid = \"claude-x\"\nprovider = \"anth\"\nupstream_model = \"claude-up\"\ntier = \"powerful\"\ninput_credits_per_1k = 3\noutput_credits_per_1k = 15\nmax_output_tokens = 64000\n",
        anthropic_provider("anth", &[&a], "")
    );
    let gw = Gateway::start(tollgate_bin!(), &cfg).await;
    let initial = books::read(&gw.config_db(), &gw.user_id).await.money;

    let out = claude(&bin, &gw, "claude-x", "Say hello").await;
    assert!(out.contains(a.reply_text().trim()), "{out}");
    let sent = a.requests();
    let last = sent.last().unwrap();
    let beta = last.header("anthropic-beta").unwrap_or_default();
    assert!(
        beta.contains("claude-code"),
        "betas not forwarded: {beta:?}"
    );
    assert_eq!(last.json()["model"], "claude-up");

    // A tool-using prompt: the fake calls a tool until Claude Code sends its result back.
    a.set_mode(AnthropicMode::Tools);
    let out = claude(&bin, &gw, "claude-x", "What is the weather in Paris?").await;
    assert!(out.contains(a.reply_text().trim()), "{out}");
    let results = a.requests().iter().any(|r| {
        r.json()["messages"].as_array().is_some_and(|m| {
            m.iter().any(|m| {
                m["content"]
                    .as_array()
                    .is_some_and(|b| b.iter().any(|b| b["type"] == "tool_result"))
            })
        })
    });
    assert!(results, "no tool_result came back from Claude Code");
    let calls = a
        .requests()
        .iter()
        .filter(|r| r.path.ends_with("/v1/messages"))
        .count();
    books_match(&gw, initial, calls).await;
}

#[tokio::test]
async fn claude_code_works_on_an_openai_compatible_model() {
    let Some(bin) = claude_code() else {
        return skip("no Claude Code; run ./dev test to install it under .tools/");
    };
    let fake = FakeOpenAi::start("p").await;
    let cfg = format!(
        "{FAST_TIMEOUTS}{}{}",
        provider("p", &[&fake], ""),
        model("gpt-x", "p", "powerful", "")
            .replace("max_output_tokens = 1000", "max_output_tokens = 64000")
    );
    let gw = Gateway::start(tollgate_bin!(), &cfg).await;
    let initial = books::read(&gw.config_db(), &gw.user_id).await.money;

    let out = claude(&bin, &gw, "gpt-x", "Say hello").await;
    assert!(out.contains(fake.reply_text().trim()), "{out}");
    let sent = fake.requests().last().unwrap().json();
    let roles: Vec<&str> = sent["messages"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|m| m["role"].as_str())
        .collect();
    assert!(
        roles.contains(&"system") && roles.contains(&"user"),
        "{roles:?}"
    );
    assert_eq!(sent["model"], "up-gpt-x");

    // A tool-using prompt: the fake streams a call of Claude Code's first tool; Claude Code
    // answers it (an error, the arguments are not its tool's), and the fake then answers.
    fake.set_stream_tool_calls(true);
    let out = claude(&bin, &gw, "gpt-x", "Use a tool").await;
    assert!(out.contains(fake.reply_text().trim()), "{out}");
    let tool_back = fake.requests().iter().any(|r| {
        r.json()["messages"]
            .as_array()
            .is_some_and(|m| m.iter().any(|m| m["role"] == "tool"))
    });
    assert!(tool_back, "no tool result came back from Claude Code");
    books_match(&gw, initial, fake.chat_count()).await;
}

/// Claude Code marks its own breakpoints: the gateway passes them as they are (adding none,
/// though the model opted in) and bills what the provider's cache did. Its second turn
/// (`--continue`) reads the conversation the first wrote, at the cache-read rate: every usage
/// row is the fake's reported counts at the model's rates.
#[tokio::test]
async fn claude_code_reads_the_cache_on_its_second_turn_and_pays_the_read_rate() {
    let Some(bin) = claude_code() else {
        return skip("no Claude Code; run ./dev test to install it under .tools/");
    };
    let a = FakeAnthropic::start("a").await;
    a.set_mode(AnthropicMode::PromptCache);
    let cfg = format!(
        "{FAST_TIMEOUTS}{}[[models]]\nid = \"claude-x\"\nprovider = \"anth\"\ntier = \"powerful\"\ninput_credits_per_1k = 3\noutput_credits_per_1k = 15\ncache_read_credits_per_1k = 0.3\ncache_write_credits_per_1k = 3.75\nmax_output_tokens = 64000\ncache_breakpoints = true\n",
        anthropic_provider("anth", &[&a], "")
    );
    let gw = Gateway::start(tollgate_bin!(), &cfg).await;
    let initial = books::read(&gw.config_db(), &gw.user_id).await.money;
    let dirs = (temp_dir(), temp_dir());

    let out = claude_in(&bin, &gw, "claude-x", "Say hello", &dirs, &[]).await;
    assert!(out.contains(a.reply_text().trim()), "{out}");
    let first_turn = a.count();
    let out = claude_in(
        &bin,
        &gw,
        "claude-x",
        "Say it again",
        &dirs,
        &["--continue"],
    )
    .await;
    assert!(out.contains(a.reply_text().trim()), "{out}");

    let sent = a.requests();
    let usage = a.cache_usage();
    assert_eq!(sent.len(), usage.len());
    // The second turn's conversation (the first turn's question in it) read from the cache.
    let continued: Vec<usize> = (first_turn..sent.len())
        .filter(|&i| {
            let body = sent[i].json();
            body["messages"].to_string().contains("Say hello")
        })
        .collect();
    assert!(!continued.is_empty(), "no request of turn 2 carried turn 1");
    assert!(
        continued.iter().any(|&i| usage[i].read > 0),
        "turn 2 read nothing from the cache: {usage:?}"
    );
    // Claude Code's own marks only, never more than Anthropic's limit of four.
    for r in &sent {
        let n = tollgate_filters::anthropic::breakpoints::count_breakpoints(&r.body);
        assert!(n <= 4, "{n} marks: {}", r.json());
    }
    // Every call billed at the rates: input 3, cache writes 3.75, reads 0.3, output 15 per 1K.
    let words = a.reply_words();
    let expected: i64 = sent
        .iter()
        .zip(&usage)
        .map(|(r, u)| {
            let output = words.min(r.json()["max_tokens"].as_u64().unwrap_or(u64::MAX));
            (u.input * 3_000 + u.write * 3_750 + u.read * 300 + output * 15_000) as i64
        })
        .sum();
    let b = books::settled(&gw.config_db(), &gw.user_id).await;
    let charged: i64 = b.rows.iter().map(|(_, c)| c).sum();
    assert_eq!(charged, expected, "{usage:?}");
    books_match(&gw, initial, sent.len()).await;
}
