//! The dashboard's Requests page in a real browser: Playwright for Python driving headless
//! Chromium through `testkit/python/dashboard_requests.py` against the real gateway, a failing
//! provider and a fake one. The account holder turns payload logging on, a request (failed over
//! from the failing provider) is listed, opened with its two legs and its payloads (its key
//! redacted), and exported as JSON lines. Any console error, uncaught exception, failed request
//! or 4xx/5xx fails it.
//!
//! Needs Chromium (`TOLLGATE_TEST_CHROMIUM`, else `/usr/bin/chromium`) and a Python with
//! `playwright` (`./dev test` sets up `.venv`); without them the test prints `SKIPPED: …` and
//! passes, unless `TOLLGATE_TEST_REQUIRE_SERVICES=1`.

use std::path::PathBuf;
use std::process::Command;

use tollgate_testkit::*;

const PASSWORD: &str = "correct horse battery";

fn chromium() -> Option<String> {
    let path =
        std::env::var("TOLLGATE_TEST_CHROMIUM").unwrap_or_else(|_| "/usr/bin/chromium".into());
    std::path::Path::new(&path).exists().then_some(path)
}

#[tokio::test]
async fn a_request_is_listed_and_opened_with_its_legs_and_payload_in_a_real_browser() {
    let Some(chromium) = chromium() else {
        return skip("no Chromium at TOLLGATE_TEST_CHROMIUM or /usr/bin/chromium");
    };
    let Some(py) = python_with("import playwright.sync_api") else {
        return skip("no Python with playwright; run ./dev test to set one up");
    };
    let good = FakeOpenAi::start("good").await;
    let bad = FakeOpenAi::start("bad").await;
    bad.set_mode(Mode::Status(503));
    let cfg = format!(
        "{FAST_TIMEOUTS}{}{}{}{}",
        provider("bad", &[&bad], ""),
        provider("good", &[&good], ""),
        model("m-bad", "bad", "economy", ""),
        model("m", "good", "economy", ""),
    );
    let gw = Gateway::start(tollgate_bin!(), &cfg).await;
    let email = unique_email();
    let (_, key) = gw.signup(&email).await;
    let shots: PathBuf = std::env::var("TOLLGATE_TEST_SCREENSHOTS")
        .map(PathBuf::from)
        .unwrap_or_else(|_| temp_dir());
    std::fs::create_dir_all(&shots).unwrap();
    let script = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/testkit/python/dashboard_requests.py"
    );
    let envs: Vec<(&str, String)> = vec![
        ("TOLLGATE_URL", format!("http://{}", gw.addr)),
        ("TOLLGATE_CHROMIUM", chromium),
        ("TOLLGATE_PASSWORD", PASSWORD.into()),
        ("TOLLGATE_MODEL", "m-bad".into()),
        ("TOLLGATE_EMAIL", email),
        ("TOLLGATE_KEY", key),
        ("TOLLGATE_SCREENSHOTS", shots.display().to_string()),
    ];
    let out = tokio::task::spawn_blocking(move || {
        Command::new(py).arg("-u").arg(script).envs(envs).output()
    })
    .await
    .unwrap()
    .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    println!(
        "dashboard_requests.py:\n{stdout}\n{stderr}\nscreenshots in {}",
        shots.display()
    );
    assert!(
        out.status.success(),
        "the requests journey failed ({}):\nstdout:\n{stdout}\nstderr:\n{stderr}\ngateway log:\n{}",
        out.status,
        gw.log()
    );
    assert!(
        stdout.contains("dashboard_requests: all passed"),
        "{stdout}"
    );
}
