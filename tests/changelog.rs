//! The model changelog: a scheduled alias change is listed before it takes effect, the alias
//! switches at its time without a reload, deprecations and retirements are listed with their
//! dates, newest first; `check-config` refuses a change announced less than 14 days ahead.

use std::process::Command;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use serde_json::json;
use tollgate_filters::time::format_date;
use tollgate_testkit::*;

fn now() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap()
        .as_secs() as i64
}

/// A UTC time `secs` from now, as the config writes it.
fn instant(secs: i64) -> String {
    let t = now() + secs;
    let s = t.rem_euclid(86_400);
    format!(
        "{}T{:02}:{:02}:{:02}Z",
        format_date(t),
        s / 3600,
        s % 3600 / 60,
        s % 60
    )
}

#[tokio::test]
async fn an_alias_switches_at_its_announced_time_without_a_reload() {
    let fake = FakeOpenAi::start("p").await;
    let at = instant(3);
    let cfg = format!(
        "{FAST_TIMEOUTS}{}{}{}{}[aliases]\n\"latest\" = \"old-2026-01-01\"\n\
         [[alias_changes]]\nalias = \"latest\"\nto = \"new-2026-06-01\"\nat = \"{at}\"\nannounced = \"{}\"\n\
         [[alias_changes]]\nalias = \"latest\"\nto = \"old-2026-01-01\"\nat = \"{}\"\nannounced = \"{}\"\n",
        provider("p", &[&fake], ""),
        model("old-2026-01-01", "p", "economy", ""),
        model("new-2026-06-01", "p", "economy", ""),
        model("gone-2026-01-01", "p", "economy", &format!("deprecated_at = \"{}\"\nretires_at = \"{}\"\nreplacement = \"new-2026-06-01\"", format_date(now() - 40 * 86_400), format_date(now() + 5 * 86_400))),
        format_date(now() - 15 * 86_400),
        format_date(now() + 60 * 86_400),
        // Announced in the future: not listed yet.
        format_date(now() + 30 * 86_400),
    );
    let gw = Gateway::start(tollgate_bin!(), &cfg).await;
    let log = get(gw.addr, "/v1/models/changelog").await;
    assert_eq!(log.status, 200, "{}", log.text());
    let data = log.json()["data"].as_array().unwrap().clone();
    let kinds: Vec<&str> = data.iter().map(|e| e["kind"].as_str().unwrap()).collect();
    // Newest first: the retirement (in 5 days), the alias change (in 3 s), the deprecation.
    assert_eq!(
        kinds,
        ["retirement", "alias_change", "deprecation"],
        "{data:?}"
    );
    let change = &data[1];
    assert_eq!(
        (
            change["alias"].as_str(),
            change["from"].as_str(),
            change["to"].as_str(),
            change["in_effect"].as_bool()
        ),
        (
            Some("latest"),
            Some("old-2026-01-01"),
            Some("new-2026-06-01"),
            Some(false)
        )
    );
    assert!(change["text"].as_str().unwrap().contains("will point"));
    let r = gw
        .chat(json!({"model": "latest", "messages": user("hi")}))
        .await;
    assert_eq!(r.status, 200, "{}", r.text());
    assert_eq!(r.json()["model"], "old-2026-01-01");
    let models = get(gw.addr, "/v1/models").await.json();
    assert!(models["data"]
        .as_array()
        .unwrap()
        .iter()
        .any(|m| m["id"] == "latest" && m["alias_of"] == "old-2026-01-01"));
    tokio::time::sleep(Duration::from_secs(4)).await;
    let r = gw
        .chat(json!({"model": "latest", "messages": user("hi")}))
        .await;
    assert_eq!(r.status, 200, "{}", r.text());
    assert_eq!(r.json()["model"], "new-2026-06-01");
    let models = get(gw.addr, "/v1/models").await.json();
    assert!(models["data"]
        .as_array()
        .unwrap()
        .iter()
        .any(|m| m["id"] == "latest" && m["alias_of"] == "new-2026-06-01"));
    let log = get(gw.addr, "/v1/models/changelog").await.json();
    let change = log["data"]
        .as_array()
        .unwrap()
        .iter()
        .find(|e| e["kind"] == "alias_change")
        .unwrap()
        .clone();
    assert_eq!(change["in_effect"], true);
    assert!(change["text"].as_str().unwrap().contains("now points"));
}

#[test]
fn check_config_refuses_an_alias_change_announced_less_than_14_days_ahead() {
    let dir = temp_dir();
    let file = dir.join("t.toml");
    let base = "[[providers]]\nname = \"p\"\nendpoints = [\"http://127.0.0.1:9\"]\n[[models]]\nid = \"a\"\nprovider = \"p\"\ntier = \"economy\"\ninput_credits_per_1k = 1\noutput_credits_per_1k = 1\n[[models]]\nid = \"b\"\nprovider = \"p\"\ntier = \"economy\"\ninput_credits_per_1k = 1\noutput_credits_per_1k = 1\n[aliases]\n\"x\" = \"a\"\n";
    let check = |change: &str| {
        std::fs::write(&file, format!("{base}{change}")).unwrap();
        let out = Command::new(env!("CARGO_BIN_EXE_tollgate"))
            .args(["check-config", "--config"])
            .arg(&file)
            .output()
            .unwrap();
        (
            out.status.success(),
            String::from_utf8_lossy(&out.stderr).to_string(),
        )
    };
    let (ok, err) = check("[[alias_changes]]\nalias = \"x\"\nto = \"b\"\nat = \"2027-03-10\"\nannounced = \"2027-03-01\"\n");
    assert!(
        !ok && err.contains("alias_changes[0].at") && err.contains("14 days"),
        "{err}"
    );
    let (ok, err) = check("[[alias_changes]]\nalias = \"x\"\nto = \"nope\"\nat = \"2027-03-20T12:00:00\"\nannounced = \"2027-03-01\"\n");
    assert!(
        !ok && err.contains("alias_changes[0].to") && err.contains("alias_changes[0].at"),
        "{err}"
    );
    let (ok, err) = check("[[alias_changes]]\nalias = \"a\"\nto = \"b\"\nat = \"2027-03-20\"\nannounced = \"2027-03-01\"\n");
    assert!(!ok && err.contains("alias_changes[0].alias"), "{err}");
    let (ok, err) = check("[[alias_changes]]\nalias = \"x\"\nto = \"b\"\nat = \"2027-03-15T00:00:00Z\"\nannounced = \"2027-03-01\"\n");
    assert!(ok, "{err}");
    let _ = std::fs::remove_dir_all(dir);
}
