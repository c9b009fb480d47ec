//! The pricing page and the dashboard in a real browser: Playwright for Python driving headless
//! Chromium through the journeys of `tests/browser/journeys.py` against the real gateway, a
//! fake provider, a fake Stripe and fake tool servers. Each journey fails on a console error,
//! an uncaught exception, a failed request, a 5xx, or a 4xx it did not expect.
//!
//! Needs Chromium (`TOLLGATE_TEST_CHROMIUM`, else `/usr/bin/chromium`) and a Python with
//! `playwright` (`./dev test` sets up `.venv`); without them the test prints `SKIPPED: …` and
//! passes, unless `TOLLGATE_TEST_REQUIRE_SERVICES=1`.
//! `TOLLGATE_TEST_SCREENSHOTS=<dir>` keeps the screenshots there (else a temporary directory).

use std::path::PathBuf;
use std::process::Command;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use tollgate_filters::time::format_date;
use tollgate_testkit::*;

const PASSWORD: &str = "correct horse battery";
/// Seconds from the gateway's start to the alias change (journey c sees it before and after).
const ALIAS_DELAY: i64 = 25;

fn chromium() -> Option<String> {
    let path =
        std::env::var("TOLLGATE_TEST_CHROMIUM").unwrap_or_else(|_| "/usr/bin/chromium".into());
    std::path::Path::new(&path).exists().then_some(path)
}

/// `2026-11-23T01:02:03Z`
fn rfc3339(unix: i64) -> String {
    let s = unix.rem_euclid(86_400);
    format!(
        "{}T{:02}:{:02}:{:02}Z",
        format_date(unix),
        s / 3600,
        s % 3600 / 60,
        s % 60
    )
}

fn now() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_secs() as i64)
        .unwrap_or(0)
}

/// The asset paths the shell links (`/assets/…`), in order.
fn linked_assets(html: &str) -> Vec<String> {
    html.split("\"/assets/")
        .skip(1)
        .filter_map(|s| s.split('"').next())
        .map(|s| format!("/assets/{s}"))
        .collect()
}

#[tokio::test]
async fn pages_and_assets_are_served_with_a_strict_policy_and_the_right_caching() {
    let fake = FakeOpenAi::start("p").await;
    let cfg = format!(
        "{}{}",
        provider("p", &[&fake], ""),
        model("m-2024-01-01", "p", "economy", "")
    );
    let gw = Gateway::start_opts(
        tollgate_bin!(),
        &cfg,
        Opts {
            no_account: true,
            ..Opts::default()
        },
    )
    .await;
    let page = get(gw.addr, "/").await;
    assert_eq!(page.status, 200);
    assert_eq!(
        page.header("content-type"),
        Some("text/html; charset=utf-8")
    );
    assert_eq!(page.header("cache-control"), Some("no-cache"));
    let csp = page.header("content-security-policy").unwrap_or("");
    for rule in [
        "default-src 'none'",
        "script-src 'self'",
        "style-src 'self'",
        "connect-src 'self'",
        "frame-ancestors 'none'",
    ] {
        assert!(csp.contains(rule), "{rule} missing from {csp}");
    }
    assert!(!csp.contains("unsafe"), "{csp}");
    assert_eq!(page.header("x-content-type-options"), Some("nosniff"));
    assert_eq!(page.header("referrer-policy"), Some("same-origin"));
    let html = page.text();
    assert!(!html.contains("{{"), "a placeholder was left in the shell");
    assert!(
        !html.contains("http://") && !html.contains("https://"),
        "the shell links another origin"
    );
    let assets = linked_assets(&html);
    assert!(assets.len() >= 9, "{assets:?}");
    assert!(assets
        .iter()
        .any(|a| a.starts_with("/assets/favicon.") && a.ends_with(".svg")));
    for path in &assets {
        let r = get(gw.addr, path).await;
        assert_eq!(r.status, 200, "{path}");
        assert_eq!(
            r.header("cache-control"),
            Some("public, max-age=31536000, immutable"),
            "{path}"
        );
        let want = match path.rsplit('.').next() {
            Some("js") => "text/javascript; charset=utf-8",
            Some("css") => "text/css; charset=utf-8",
            _ => "image/svg+xml",
        };
        assert_eq!(r.header("content-type"), Some(want), "{path}");
        assert!(!r.body.is_empty(), "{path}");
    }
    // The plain name is served for a hand-typed link, but never cached as immutable.
    let plain = get(gw.addr, "/assets/app.js").await;
    assert_eq!(plain.status, 200);
    assert_eq!(plain.header("cache-control"), Some("no-cache"));
    get(gw.addr, "/assets/app.0123456789abcdef.js")
        .await
        .error(404, "not_found");
    get(gw.addr, "/assets/..%2fCargo.toml")
        .await
        .error(404, "not_found");
    for path in [
        "/pricing",
        "/dashboard",
        "/dashboard/keys",
        "/dashboard/operator",
    ] {
        let r = get(gw.addr, path).await;
        assert_eq!(r.status, 200, "{path}");
        assert_eq!(r.text(), html, "{path} is not the one shell");
    }
    let missing = get(gw.addr, "/dashboard/nothing").await;
    assert_eq!(missing.status, 404);
    assert_eq!(missing.text(), html, "an unknown page still gets the shell");
}

#[tokio::test]
async fn the_dashboard_works_in_a_real_browser() {
    let Some(chromium) = chromium() else {
        return skip("no Chromium at TOLLGATE_TEST_CHROMIUM or /usr/bin/chromium");
    };
    let Some(py) = python_with("import playwright.sync_api") else {
        return skip("no Python with playwright; run ./dev test to set one up");
    };
    let fake = FakeOpenAi::start("p").await;
    let stripe = FakeStripe::start().await;
    let tools = FakeToolServer::start().await;
    let no_tools = FakeToolServer::empty().await;
    let at = now() + ALIAS_DELAY;
    let cfg = format!(
        "{FAST_TIMEOUTS}{}{}{}{}\
         [aliases]\n\"m\" = \"m-2024-01-01\"\n\n\
         [[alias_changes]]\nalias = \"m\"\nto = \"m-2025-06-01\"\nat = \"{}\"\nannounced = \"{}\"\n\n\
         [billing]\nstripe_api_base = \"{}\"\nsecret_key_env = \"TOLLGATE_TEST_STRIPE_KEY\"\n\
         webhook_secret_env = \"TOLLGATE_TEST_STRIPE_WEBHOOK_SECRET\"\napi_timeout = 2\n\
         [billing.credit_packs.small]\ncredits = 1000\nstripe_price = \"price_small\"\nprice_label = \"$5\"\n\n\
         [mcp]\nallow_private_upstreams = true\ncall_timeout = 2\n",
        provider("p", &[&fake], ""),
        model(
            "m-2024-01-01",
            "p",
            "economy",
            "deprecated_at = \"2030-01-01\"\nretires_at = \"2030-03-01\"\nreplacement = \"m-2025-06-01\""
        ),
        model("m-2025-06-01", "p", "economy", ""),
        model("g-2024-01-01", "p", "normal", "guest = true"),
        rfc3339(at),
        rfc3339(at - 15 * 86_400),
        stripe.base(),
    );
    let operator = unique_email();
    let plans = "[plans.guest]\nrequests_per_hour = 100000\nrequests_per_day = 100000\n\
                 [plans.pro]\ngrant_credits = 10000\nstripe_price = \"price_pro\"\nprice_label = \"$20 / month\"\n";
    let gw = Gateway::start_opts(
        tollgate_bin!(),
        &cfg,
        Opts {
            plans: Some(plans.into()),
            server_extra: format!("admin_emails = [\"{operator}\"]\n"),
            ..Opts::default()
        },
    )
    .await;
    gw.signup(&operator).await;
    let shots: PathBuf = std::env::var("TOLLGATE_TEST_SCREENSHOTS")
        .map(PathBuf::from)
        .unwrap_or_else(|_| temp_dir());
    std::fs::create_dir_all(&shots).unwrap();
    let script = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/browser/journeys.py");
    let envs: Vec<(&str, String)> = vec![
        ("TOLLGATE_URL", format!("http://{}", gw.addr)),
        ("TOLLGATE_CHROMIUM", chromium),
        ("TOLLGATE_STRIPE_URL", stripe.base()),
        ("TOLLGATE_STRIPE_KEY", FAKE_STRIPE_KEY.into()),
        ("TOLLGATE_WEBHOOK_SECRET", WEBHOOK_SECRET.into()),
        ("TOLLGATE_TOOLS_URL", tools.url()),
        ("TOLLGATE_NO_TOOLS_URL", no_tools.url()),
        ("TOLLGATE_OPERATOR_EMAIL", operator),
        ("TOLLGATE_PASSWORD", PASSWORD.into()),
        ("TOLLGATE_FUNDED_KEY", gw.key.clone()),
        ("TOLLGATE_MODEL", "m-2024-01-01".into()),
        ("TOLLGATE_ALIAS", "m".into()),
        ("TOLLGATE_ALIAS_TO", "m-2025-06-01".into()),
        ("TOLLGATE_ALIAS_AT", at.to_string()),
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
        "journeys.py ({took:.1?}):\n{stdout}\n{stderr}\nscreenshots in {}",
        shots.display()
    );
    assert!(
        out.status.success(),
        "browser journeys failed ({}):\nstdout:\n{stdout}\nstderr:\n{stderr}\ngateway log:\n{}",
        out.status,
        gw.log()
    );
    assert!(stdout.contains("journeys: all passed"), "{stdout}");
    assert!(
        took < Duration::from_secs(90),
        "the browser journeys took {took:?}"
    );
    // The alias changed without a reload, and the fake saw the new target's upstream name.
    assert!(
        fake.requests()
            .iter()
            .any(|r| r.json()["model"] == "up-m-2025-06-01"),
        "no request reached the alias's new target"
    );
}
