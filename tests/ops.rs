//! What operators and model-list clients see: the lists, pricing, the deprecation lifecycle,
//! metrics, SIGHUP reload with a request in flight, and `check-config`.

use std::process::Command;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use serde_json::json;
use tollgate_filters::time::format_date;
use tollgate_testkit::*;

fn date_in_days(days: i64) -> String {
    let now = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap()
        .as_secs() as i64;
    format_date(now + days * 86_400)
}

async fn catalog_gateway(fake: &FakeOpenAi) -> Gateway {
    let noticed = format!(
        "deprecated_at = \"{}\"\nretires_at = \"{}\"\nreplacement = \"new-2026-06-01\"",
        date_in_days(-5),
        date_in_days(40)
    );
    let retired = format!(
        "deprecated_at = \"{}\"\nretires_at = \"{}\"\nreplacement = \"new-2026-06-01\"",
        date_in_days(-100),
        date_in_days(-10)
    );
    let gone = format!(
        "deprecated_at = \"{}\"\nretires_at = \"{}\"\nreplacement = \"new-2026-06-01\"",
        date_in_days(-200),
        date_in_days(-95)
    );
    let cfg = format!(
        "{FAST_TIMEOUTS}{}{}{}{}{}{}[aliases]\n\"new\" = \"new-2026-06-01\"\n",
        provider("p", &[fake], ""),
        model("new-2026-06-01", "p", "normal", "guest = true"),
        model("noticed-2025-01-01", "p", "normal", &noticed),
        model("retired-2024-01-01", "p", "normal", &retired),
        model("gone-2023-01-01", "p", "normal", &gone),
        model("big-2026-01-01", "p", "powerful", ""),
    );
    Gateway::start(tollgate_bin!(), &cfg).await
}

#[tokio::test]
async fn the_model_list_and_pricing_show_what_is_served() {
    let fake = FakeOpenAi::start("p").await;
    let gw = catalog_gateway(&fake).await;
    let r = get(gw.addr, "/v1/models").await;
    assert_eq!(r.status, 200);
    assert!(r.header("x-request-id").is_some());
    let v = r.json();
    assert_eq!(v["object"], "list");
    let ids: Vec<&str> = v["data"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| m["id"].as_str().unwrap())
        .collect();
    for id in [
        "new-2026-06-01",
        "noticed-2025-01-01",
        "big-2026-01-01",
        "new",
        "normal",
        "powerful",
    ] {
        assert!(ids.contains(&id), "{id} missing from {ids:?}");
    }
    assert!(!ids.contains(&"gone-2023-01-01") && !ids.contains(&"retired-2024-01-01"));
    assert!(
        !ids.contains(&"economy"),
        "a tier with no model is not listed"
    );
    for m in v["data"].as_array().unwrap() {
        assert_eq!(m["object"], "model");
        assert!(m["created"].is_i64() && m["owned_by"].is_string());
    }

    let p = get(gw.addr, "/v1/models/pricing").await.json();
    let new = p["data"]
        .as_array()
        .unwrap()
        .iter()
        .find(|m| m["id"] == "new-2026-06-01")
        .unwrap();
    assert_eq!(new["provider"], "p");
    assert_eq!(new["tier"], "normal");
    assert_eq!(new["aliases"], json!(["new"]));
    assert_eq!(new["input_credits_per_1k"], 1.0);
    assert_eq!(new["output_credits_per_1k"], 2.0);
    assert_eq!(new["max_output_tokens"], 1000);
    assert_eq!(new["guest"], true);
    let noticed = p["data"]
        .as_array()
        .unwrap()
        .iter()
        .find(|m| m["id"] == "noticed-2025-01-01")
        .unwrap();
    assert_eq!(noticed["retires_at"], date_in_days(40));
    assert_eq!(noticed["replacement"], "new-2026-06-01");
}

#[tokio::test]
async fn a_deprecated_model_gets_headers_then_its_replacement_then_a_404() {
    let fake = FakeOpenAi::start("p").await;
    let gw = catalog_gateway(&fake).await;
    // In notice: served as itself, with Deprecation and Sunset.
    let r = gw
        .chat(json!({"model":"noticed-2025-01-01","messages":user("hi")}))
        .await;
    assert_eq!(r.status, 200);
    assert_eq!(r.json()["model"], "noticed-2025-01-01");
    assert!(r.header("deprecation").unwrap().starts_with('@'));
    assert!(r.header("sunset").unwrap().ends_with("00:00:00 GMT"));
    let r = gw
        .chat(json!({"model":"noticed-2025-01-01","messages":user("hi"),"stream":true}))
        .await;
    assert!(r.header("sunset").is_some());
    // Not deprecated: no headers.
    let r = gw.chat(json!({"model":"new","messages":user("hi")})).await;
    assert!(r.header("deprecation").is_none());
    // Retired less than 90 days ago: served by the replacement.
    let r = gw
        .chat(json!({"model":"retired-2024-01-01","messages":user("hi")}))
        .await;
    assert_eq!(r.status, 200);
    assert_eq!(r.json()["model"], "new-2026-06-01");
    // Retired more than 90 days ago: 404 naming the replacement.
    let r = gw
        .chat(json!({"model":"gone-2023-01-01","messages":user("hi")}))
        .await;
    let v = r.error(404, "model_not_found");
    assert!(v["error"]["message"]
        .as_str()
        .unwrap()
        .contains("new-2026-06-01"));
}

#[tokio::test]
async fn metrics_and_health_endpoints_report_traffic_and_providers() {
    let fake = FakeOpenAi::start("p").await;
    let gw = catalog_gateway(&fake).await;
    gw.chat(json!({"model":"new","messages":user("hi")})).await;
    fake.set_mode(Mode::Status(500));
    gw.chat(json!({"model":"new","messages":user("hi")})).await;
    let m = get(gw.metrics_addr, "/metrics").await;
    assert_eq!(m.status, 200);
    let text = m.text();
    for needle in [
        "tollgate_requests_total{model=\"new-2026-06-01\",provider=\"p\",route=\"chat\",status=\"200\"} 1",
        "tollgate_request_duration_seconds_bucket",
        "tollgate_upstream_attempts_total{outcome=\"5xx\",provider=\"p\"}",
        "tollgate_failovers_total{model=\"new-2026-06-01\",reason=\"5xx\"}",
        "tollgate_upstream_healthy",
        "status=\"502\"",
    ] {
        assert!(text.contains(needle), "missing {needle} in\n{text}");
    }
    assert_eq!(get(gw.addr, "/healthz").await.json()["status"], "ok");
    let ready = get(gw.addr, "/readyz").await;
    assert_eq!(ready.status, 200);
    assert_eq!(ready.json()["providers"]["p"], true);
}

#[tokio::test]
async fn sighup_reloads_without_dropping_a_request_in_flight() {
    let fake = FakeOpenAi::start("p").await;
    fake.set_mode(Mode::Slow(Duration::from_millis(150)));
    let before = one_model_config(&fake, "m1");
    let gw = Gateway::start(tollgate_bin!(), &before).await;
    let addr = gw.addr;
    let key = gw.key.clone();
    let in_flight = tokio::spawn(async move {
        let body =
            serde_json::to_vec(&json!({"model":"m1","messages":user("hi"),"stream":true})).unwrap();
        let auth = format!("Bearer {key}");
        request(
            addr,
            "POST",
            "/v1/chat/completions",
            &[("Authorization", &auth)],
            &body,
        )
        .await
    });
    tokio::time::sleep(Duration::from_millis(300)).await;
    let after = format!(
        "{FAST_TIMEOUTS}{}{}{}[aliases]\n\"fresh\" = \"m2\"\n",
        provider("p", &[&fake], ""),
        model("m1", "p", "economy", ""),
        model("m2", "p", "powerful", ""),
    );
    gw.reload_with(&after);
    let mut reloaded = false;
    for _ in 0..50 {
        let ids = get(gw.addr, "/v1/models").await.text();
        if ids.contains("\"fresh\"") {
            reloaded = true;
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert!(reloaded, "new models after SIGHUP: {}", gw.log());
    let r = in_flight.await.unwrap();
    assert_eq!(r.status, 200);
    assert_eq!(
        r.sse_data().last().unwrap(),
        "[DONE]",
        "the in-flight stream finished: {}",
        r.text()
    );
    fake.set_mode(Mode::Ok);
    assert_eq!(
        gw.chat(json!({"model":"fresh","messages":user("hi")}))
            .await
            .json()["model"],
        "m2"
    );

    // An invalid file is refused and the running config stays.
    gw.reload_with("[[models]]\nid = \"broken\"\n");
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert!(gw.log().contains("config reload refused"), "{}", gw.log());
    assert_eq!(
        gw.chat(json!({"model":"fresh","messages":user("hi")}))
            .await
            .status,
        200
    );
    let metrics = get(gw.metrics_addr, "/metrics").await.text();
    assert!(metrics.contains("tollgate_config_reloads_total{result=\"refused\"} 1"));
    assert!(metrics.contains("tollgate_config_reloads_total{result=\"ok\"} 1"));
}

#[test]
fn check_config_reports_every_problem_with_its_path() {
    let dir = temp_dir();
    let bad = dir.join("bad.toml");
    std::fs::write(
        &bad,
        "[server]\nlisten = \"x\"\n[[providers]]\nname = \"p\"\nendpoints = []\n[[models]]\nid = \"m\"\nprovider = \"nope\"\ntier = \"cheap\"\ninput_credits_per_1k = -1\noutput_credits_per_1k = 1\n",
    )
    .unwrap();
    let out = Command::new(env!("CARGO_BIN_EXE_tollgate"))
        .args(["check-config", "--config"])
        .arg(&bad)
        .output()
        .unwrap();
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    for path in [
        "server.listen",
        "providers[0].endpoints",
        "models[0].provider",
        "models[0].tier",
        "models[0].input_credits_per_1k",
    ] {
        assert!(err.contains(path), "{path} not in {err}");
    }
    let out = Command::new(env!("CARGO_BIN_EXE_tollgate"))
        .args([
            "check-config",
            "--config",
            concat!(env!("CARGO_MANIFEST_DIR"), "/conf/tollgate.toml"),
        ])
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let out = Command::new(env!("CARGO_BIN_EXE_tollgate"))
        .args(["check-config", "--config", "/nonexistent.toml"])
        .output()
        .unwrap();
    assert!(!out.status.success());
    let _ = std::fs::remove_dir_all(dir);
}

#[tokio::test]
async fn served_model_listing_survives_garbage_requests() {
    let fake = FakeOpenAi::start("p").await;
    let gw = catalog_gateway(&fake).await;
    let before = get(gw.addr, "/v1/models").await.json();
    // What cannot be parsed as HTTP (a request line that is not one, a Content-Length that is
    // not a number) the HTTP server refuses before the gateway sees it: a bare 400, and the
    // connection closed. A CONNECT (Tollgate tunnels nothing) is a bare 405, closed.
    for (raw, status) in [
        (&b"GARBAGE\r\n\r\n"[..], 400),
        (
            b"POST /v1/chat/completions HTTP/1.1\r\nContent-Length: abc\r\n\r\n{}",
            400,
        ),
        (
            b"CONNECT example.com:443 HTTP/1.1\r\nHost: example.com:443\r\n\r\n",
            405,
        ),
    ] {
        let r = tokio::time::timeout(Duration::from_secs(2), raw_request(gw.addr, raw))
            .await
            .expect("an answer, not a hang");
        assert_eq!(r.status, status, "{}", String::from_utf8_lossy(raw));
        assert_eq!(r.header("connection"), Some("close"));
    }
    // Well-formed HTTP that makes no sense on the listing gets the gateway's JSON error.
    request(gw.addr, "DELETE", "/v1/models", &[], b"")
        .await
        .error(405, "invalid_request");
    request(gw.addr, "POST", "/v1/models", &[], b"\x00\xff{{{")
        .await
        .error(405, "invalid_request");
    request(
        gw.addr,
        "GET",
        "/v1/models",
        &[("Authorization", "Bearer garbage")],
        b"",
    )
    .await
    .error(401, "authentication_error");
    // And the listing is still whole.
    let r = get(gw.addr, "/v1/models").await;
    assert_eq!(r.status, 200, "{}", r.text());
    assert!(r.header("x-request-id").is_some());
    let v = r.json();
    assert_eq!(v["object"], "list");
    assert!(v["data"].as_array().is_some_and(|d| !d.is_empty()), "{v}");
    assert_eq!(v, before, "the same list as before the garbage");
}

#[tokio::test]
async fn the_log_has_no_colour_codes_off_a_terminal_and_is_json_on_request() {
    let fake = FakeOpenAi::start("p").await;
    let cfg = one_model_config(&fake, "m-2024-01-01");
    for json_lines in [false, true] {
        let server_extra = if json_lines {
            "log_format = \"json\"\n".to_string()
        } else {
            String::new()
        };
        let gw = Gateway::start_opts(
            tollgate_bin!(),
            &cfg,
            Opts {
                server_extra,
                ..Opts::default()
            },
        )
        .await;
        let r = gw
            .chat(json!({"model": "m-2024-01-01", "messages": user("hi")}))
            .await;
        assert_eq!(r.status, 200, "{}", r.text());
        let id = r.header("x-request-id").unwrap().to_string();
        // Lines reach stderr from the writer thread, off the request path: wait for ours.
        let mut log = String::new();
        for _ in 0..100 {
            log = gw.log();
            if log.contains(&id) {
                break;
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        assert!(log.contains(&id), "{log}");
        assert!(!log.contains('\u{1b}'), "ANSI codes in a log file: {log}");
        if json_lines {
            let lines: Vec<serde_json::Value> = log
                .lines()
                .filter(|l| !l.trim().is_empty())
                .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("not JSON ({e}): {l}")))
                .collect();
            let line = lines
                .iter()
                .find(|l| l["request_id"] == id.as_str())
                .unwrap();
            assert_eq!(line["message"], "chat completion");
            assert_eq!(line["level"], "INFO");
            assert_eq!(line["status"], 200);
            assert_eq!(line["route"], "chat");
            // Metered against the account's credit lease: logged as leased, not yet as
            // charged (the lease's next round commits its usage row).
            assert!(
                line["leased_micros"].as_i64().is_some_and(|m| m > 0),
                "{line}"
            );
            assert!(line.get("charged_micros").is_none(), "{line}");
            assert_eq!(line["model_used"], "m-2024-01-01");
            // The Messages API goes through the same pipeline and gets the same line.
            let auth = format!("Bearer {}", gw.key);
            let body = json!({"model": "m-2024-01-01", "max_tokens": 16,
                "messages": [{"role": "user", "content": "hi"}]});
            let r = request(
                gw.addr,
                "POST",
                "/v1/messages",
                &[
                    ("Authorization", auth.as_str()),
                    ("Content-Type", "application/json"),
                ],
                &serde_json::to_vec(&body).unwrap(),
            )
            .await;
            assert_eq!(r.status, 200, "{}", r.text());
            let id = r.header("x-request-id").unwrap().to_string();
            let mut found = None;
            for _ in 0..100 {
                found = gw
                    .log()
                    .lines()
                    .filter_map(|l| serde_json::from_str::<serde_json::Value>(l).ok())
                    .find(|l| l["request_id"] == id.as_str() && l["message"] == "chat completion");
                if found.is_some() {
                    break;
                }
                tokio::time::sleep(Duration::from_millis(20)).await;
            }
            let line = found
                .unwrap_or_else(|| panic!("no access-log line for /v1/messages: {}", gw.log()));
            assert_eq!(line["route"], "messages");
            assert_eq!(line["status"], 200);
        }
    }
    // A bad format is refused with its path.
    let dir = temp_dir();
    let file = dir.join("t.toml");
    std::fs::write(&file, "[server]\nlog_format = \"xml\"\n").unwrap();
    let out = Command::new(env!("CARGO_BIN_EXE_tollgate"))
        .args(["check-config", "--config"])
        .arg(&file)
        .output()
        .unwrap();
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("server.log_format"));
}
