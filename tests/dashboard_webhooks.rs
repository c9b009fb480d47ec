//! The dashboard's Webhooks page in a real browser: Playwright for Python driving headless
//! Chromium through `testkit/python/dashboard_webhooks.py` against the real gateway and a real
//! receiver. The account holder adds an endpoint (its event ticked), sees its secret once,
//! sends a test event and sees it delivered in the log; the receiver got it, signed with that
//! secret. Any console error, uncaught exception, failed request or 4xx/5xx fails it.
//!
//! Needs Chromium (`TOLLGATE_TEST_CHROMIUM`, else `/usr/bin/chromium`) and a Python with
//! `playwright` (`./dev test` sets up `.venv`); without them the test prints `SKIPPED: …` and
//! passes, unless `TOLLGATE_TEST_REQUIRE_SERVICES=1`.

use std::path::PathBuf;
use std::process::Command;
use std::time::Duration;

use tollgate_testkit::*;

const PASSWORD: &str = "correct horse battery";

fn chromium() -> Option<String> {
    let path =
        std::env::var("TOLLGATE_TEST_CHROMIUM").unwrap_or_else(|_| "/usr/bin/chromium".into());
    std::path::Path::new(&path).exists().then_some(path)
}

#[tokio::test]
async fn an_endpoint_is_made_and_tested_from_the_dashboard_in_a_real_browser() {
    let Some(chromium) = chromium() else {
        return skip("no Chromium at TOLLGATE_TEST_CHROMIUM or /usr/bin/chromium");
    };
    let Some(py) = python_with("import playwright.sync_api") else {
        return skip("no Python with playwright; run ./dev test to set one up");
    };
    let fake = FakeOpenAi::start("p").await;
    let cfg = format!(
        "{}[webhooks]\nallow_private_targets = true\npoll_interval_ms = 100\n",
        one_model_config(&fake, "m")
    );
    let gw = Gateway::start(tollgate_bin!(), &cfg).await;
    let email = unique_email();
    gw.signup(&email).await;
    let rx = Receiver::start().await;
    let shots: PathBuf = std::env::var("TOLLGATE_TEST_SCREENSHOTS")
        .map(PathBuf::from)
        .unwrap_or_else(|_| temp_dir());
    std::fs::create_dir_all(&shots).unwrap();
    let script = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/testkit/python/dashboard_webhooks.py"
    );
    let envs: Vec<(&str, String)> = vec![
        ("TOLLGATE_URL", format!("http://{}", gw.addr)),
        ("TOLLGATE_CHROMIUM", chromium),
        ("TOLLGATE_PASSWORD", PASSWORD.into()),
        ("TOLLGATE_EMAIL", email),
        ("TOLLGATE_RECEIVER_URL", rx.url("/dashboard-hook")),
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
    assert!(
        out.status.success() && stdout.contains("dashboard_webhooks: all passed"),
        "the webhooks journey failed ({}):\nstdout:\n{stdout}\nstderr:\n{stderr}\ngateway log:\n{}",
        out.status,
        gw.log()
    );
    let secret = stdout
        .lines()
        .find_map(|l| l.strip_prefix("secret: "))
        .expect("the page's secret")
        .trim()
        .to_owned();
    // The receiver got the test event the page sent, signed with the secret the page showed.
    let d = rx.wait_for("webhook.test", Duration::from_secs(10)).await;
    assert_eq!(d.request.path, "/dashboard-hook");
    let sig = d.header("tollgate-signature").unwrap();
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_secs() as i64;
    assert_eq!(
        tollgate_filters::webhook::verify(sig, &d.request.body, &secret, now, 300),
        Ok(())
    );
}
