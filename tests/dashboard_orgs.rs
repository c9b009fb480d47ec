//! The dashboard's organizations in a real browser: Playwright for Python driving headless
//! Chromium through `testkit/python/dashboard_orgs.py` against the real gateway and a fake
//! provider. The owner creates an organization, the operator funds it, the owner invites a
//! member, the member opens the link, signs up, joins and creates an organization key, whose
//! request is charged to the organization; the owner sees it in the usage and caps the member,
//! whose next request is refused by the cap. Any console error, uncaught exception, failed
//! request or 4xx/5xx in either browser context fails it.
//!
//! Needs Chromium (`TOLLGATE_TEST_CHROMIUM`, else `/usr/bin/chromium`) and a Python with
//! `playwright` (`./dev test` sets up `.venv`); without them the test prints `SKIPPED: …` and
//! passes, unless `TOLLGATE_TEST_REQUIRE_SERVICES=1`.
//! `TOLLGATE_TEST_SCREENSHOTS=<dir>` keeps the screenshots there (else a temporary directory).

use std::path::PathBuf;
use std::process::Command;
use std::time::{Duration, Instant};

use tollgate_testkit::*;

const PASSWORD: &str = "correct horse battery";
const MODEL: &str = "m-2024-01-01";

fn chromium() -> Option<String> {
    let path =
        std::env::var("TOLLGATE_TEST_CHROMIUM").unwrap_or_else(|_| "/usr/bin/chromium".into());
    std::path::Path::new(&path).exists().then_some(path)
}

#[tokio::test]
async fn an_organization_is_run_from_the_dashboard_in_a_real_browser() {
    let Some(chromium) = chromium() else {
        return skip("no Chromium at TOLLGATE_TEST_CHROMIUM or /usr/bin/chromium");
    };
    let Some(py) = python_with("import playwright.sync_api") else {
        return skip("no Python with playwright; run ./dev test to set one up");
    };
    let fake = FakeOpenAi::start("p").await;
    let gw = Gateway::start(tollgate_bin!(), &one_model_config(&fake, MODEL)).await;
    let owner = unique_email();
    gw.signup(&owner).await;
    let member = unique_email();
    let shots: PathBuf = std::env::var("TOLLGATE_TEST_SCREENSHOTS")
        .map(PathBuf::from)
        .unwrap_or_else(|_| temp_dir());
    std::fs::create_dir_all(&shots).unwrap();
    let script = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/testkit/python/dashboard_orgs.py"
    );
    let envs: Vec<(&str, String)> = vec![
        ("TOLLGATE_URL", format!("http://{}", gw.addr)),
        ("TOLLGATE_CHROMIUM", chromium),
        ("TOLLGATE_PASSWORD", PASSWORD.into()),
        ("TOLLGATE_MODEL", MODEL.into()),
        ("TOLLGATE_ADMIN_TOKEN", ADMIN_TOKEN.into()),
        ("TOLLGATE_OWNER_EMAIL", owner),
        ("TOLLGATE_MEMBER_EMAIL", member.clone()),
        ("TOLLGATE_SCREENSHOTS", shots.display().to_string()),
    ];
    let started = Instant::now();
    let out = tokio::task::spawn_blocking(move || {
        Command::new(py).arg("-u").arg(script).envs(envs).output()
    })
    .await
    .unwrap()
    .unwrap();
    let took = started.elapsed();
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    println!(
        "dashboard_orgs.py ({took:.1?}):\n{stdout}\n{stderr}\nscreenshots in {}",
        shots.display()
    );
    assert!(
        out.status.success(),
        "the organizations journey failed ({}):\nstdout:\n{stdout}\nstderr:\n{stderr}\ngateway log:\n{}",
        out.status,
        gw.log()
    );
    assert!(stdout.contains("dashboard_orgs: all passed"), "{stdout}");
    assert!(
        took < Duration::from_secs(90),
        "the organizations journey took {took:?}"
    );
    // One request reached the provider: the one the cap refused never left the gateway.
    let reached = fake.requests();
    assert_eq!(reached.len(), 1, "requests upstream: {}", reached.len());
    assert_eq!(reached[0].json()["model"], format!("up-{MODEL}"));
    // The member really is a member, as the API says too.
    let cookie = gw.login(&member).await;
    let orgs = request(gw.addr, "GET", "/api/v1/orgs", &[("Cookie", &cookie)], b"").await;
    assert_eq!(orgs.status, 200, "{}", orgs.text());
    let list = orgs.json();
    assert_eq!(list["data"][0]["role"], "member", "{list}");
}
