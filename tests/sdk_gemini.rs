//! Interoperability with Gemini clients nobody here wrote: Google's `google-genai` Python SDK
//! (generate, stream, count tokens, a function-call round trip) and the Gemini CLI (npm
//! `@google/gemini-cli`, pinned) run non-interactively with `GOOGLE_GEMINI_BASE_URL` = Tollgate,
//! over a fake OpenAI-compatible provider and a fake Anthropic one; each charge exact.
//!
//! Needs `.venv` with `google-genai` and the Gemini CLI under `.tools/` (`./dev test` sets both
//! up; `TOLLGATE_TEST_PYTHON`, `TOLLGATE_TEST_GEMINI` name others). Without them the tests print
//! `SKIPPED: …` and pass, unless `TOLLGATE_TEST_REQUIRE_SERVICES=1` (CI).

use std::process::{Command, Stdio};

use tollgate_testkit::*;

fn config(o: &FakeOpenAi, a: &FakeAnthropic) -> String {
    format!(
        "{FAST_TIMEOUTS}{}{}{}[[models]]\nid = \"claude-x\"\nprovider = \"anth\"\ntier = \"powerful\"\ninput_credits_per_1k = 3\noutput_credits_per_1k = 15\nmax_output_tokens = 2000\n",
        provider("oai", &[o], ""),
        anthropic_provider("anth", &[a], ""),
        model("gpt-x", "oai", "economy", ""),
    )
}

#[tokio::test]
async fn the_google_genai_sdk_generates_streams_counts_and_calls_functions() {
    let Some(py) = python_with("from google import genai") else {
        return skip("no Python with google-genai; run ./dev test to set one up");
    };
    let (o, a) = (
        FakeOpenAi::start("o").await,
        FakeAnthropic::start("a").await,
    );
    let gw = Gateway::start(tollgate_bin!(), &config(&o, &a)).await;
    let initial = books::read(&gw.config_db(), &gw.user_id).await.money;
    let script = format!("{}/tests/sdk/gemini_genai.py", env!("CARGO_MANIFEST_DIR"));
    let (base, key) = (format!("http://{}", gw.addr), gw.key.clone());
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
    assert!(
        out.status.success() && stdout.contains("sdk: all passed"),
        "SDK script failed\nstdout:\n{stdout}\nstderr:\n{}\ngateway:\n{}",
        String::from_utf8_lossy(&out.stderr),
        gw.log()
    );
    let (prompt, output): (i64, i64) = stdout
        .lines()
        .find_map(|l| l.strip_prefix("TOKENS="))
        .and_then(|t| t.trim().split_once(' '))
        .map(|(p, o)| (p.parse().unwrap(), o.parse().unwrap()))
        .expect("the script reports its tokens");
    let b = books::settled(&gw.config_db(), &gw.user_id).await;
    assert_eq!(
        initial - b.money,
        prompt * 1_000 + output * 2_000,
        "{stdout}"
    );
}

/// Runs `gemini -p PROMPT -m MODEL` against the gateway; returns its output and the costs it
/// read in the replies (its local telemetry logs each reply's `usageMetadata` as it parsed it).
async fn gemini(bin: &str, gw: &Gateway, model: &str, prompt: &str) -> (String, Vec<i64>) {
    let (bin, home, work) = (bin.to_owned(), temp_dir(), temp_dir());
    std::fs::create_dir_all(home.join(".gemini")).unwrap();
    let telemetry = home.join("telemetry.log");
    std::fs::write(
        home.join(".gemini/settings.json"),
        format!(
            r#"{{"security":{{"auth":{{"selectedType":"gemini-api-key"}}}},"privacy":{{"usageStatisticsEnabled":false}},"telemetry":{{"enabled":true,"target":"local","outfile":"{}","logPrompts":true}},"general":{{"disableAutoUpdate":true}}}}"#,
            telemetry.display()
        ),
    )
    .unwrap();
    let (base, key, model, prompt) = (
        format!("http://{}", gw.addr),
        gw.key.clone(),
        model.to_owned(),
        prompt.to_owned(),
    );
    let out = tokio::task::spawn_blocking(move || {
        Command::new(bin)
            .args(["-p", &prompt, "-m", &model])
            .current_dir(&work)
            .env("HOME", &home)
            .env("GOOGLE_GEMINI_BASE_URL", base)
            .env("GEMINI_API_KEY", key)
            .env("GEMINI_CLI_TRUST_WORKSPACE", "true")
            .stdin(Stdio::null())
            .output()
    })
    .await
    .unwrap()
    .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    assert!(
        out.status.success(),
        "gemini -p failed\nstdout:\n{stdout}\nstderr:\n{}\ngateway:\n{}",
        String::from_utf8_lossy(&out.stderr),
        gw.log()
    );
    let logged = std::fs::read_to_string(&telemetry).unwrap_or_default();
    (stdout, costs_in(&logged))
}

/// The `usageMetadata.cost` values (µcr) in the CLI's telemetry, where each reply is logged
/// as JSON text inside a string (`\"cost\":0.0123`).
fn costs_in(logged: &str) -> Vec<i64> {
    logged
        .split("\\\"cost\\\":")
        .skip(1)
        .filter_map(|rest| {
            let n: String = rest
                .chars()
                .take_while(|c| c.is_ascii_digit() || *c == '.')
                .collect();
            n.parse::<f64>().ok()
        })
        .map(|c| (c * 1e6).round() as i64)
        .collect()
}

#[tokio::test]
async fn the_gemini_cli_answers_through_both_provider_kinds() {
    let Some(bin) = gemini_cli() else {
        return skip("no Gemini CLI; run ./dev test to install it under .tools/");
    };
    let (o, a) = (
        FakeOpenAi::start("o").await,
        FakeAnthropic::start("a").await,
    );
    let gw = Gateway::start(tollgate_bin!(), &config(&o, &a)).await;
    let initial = books::read(&gw.config_db(), &gw.user_id).await.money;

    let (out, mut read) = gemini(&bin, &gw, "gpt-x", "Say hello").await;
    assert!(out.contains(o.reply_text().trim()), "{out}");
    let (out, more) = gemini(&bin, &gw, "claude-x", "Say hello").await;
    assert!(out.contains(a.reply_text().trim()), "{out}");
    read.extend(more);
    let sent = a.requests().pop().unwrap().json();
    assert!(
        sent["system"]
            .as_str()
            .is_some_and(|s| s.contains("Gemini CLI")),
        "{sent}"
    );

    // Every model call the providers saw has its usage row, and the balance fell by exactly those.
    let b = books::settled(&gw.config_db(), &gw.user_id).await;
    assert_eq!(b.holds, 0);
    let charged: i64 = b.rows.iter().map(|(_, c)| c).sum();
    assert_eq!(initial - b.money, charged);
    assert!(b.rows.iter().all(|(_, c)| *c > 0));
    assert_eq!(b.rows.len(), o.chat_count() + a.requests().len());
    // The CLI parsed each reply with its cost: every cost it read is a request's charge, and
    // every request's charge was read.
    assert!(!read.is_empty(), "the CLI's telemetry logged no cost");
    assert!(
        read.iter().all(|c| b.rows.iter().any(|(_, r)| r == c)),
        "costs read {read:?}, charged {:?}",
        b.rows
    );
    assert!(
        b.rows.iter().all(|(_, r)| read.contains(r)),
        "{read:?} {:?}",
        b.rows
    );
}
