//! Bad input, refused by name with nothing charged or stored and the gateway still healthy:
//! the `X-Tollgate-Cache` header, the body's `tollgate.cache`, the key setting, and absurd
//! `[response_cache]` values at `check-config` and at start.

use std::process::Command;

use serde_json::json;
use tollgate_testkit::*;

use crate::common::*;

#[tokio::test]
async fn bad_cache_headers_and_extensions_are_refused_by_name() {
    let fake = FakeOpenAi::start("p").await;
    let gw = gateway(&fake, "").await;
    let initial = gw.balance(&gw.key).await;
    let b = body("bad input", false);
    let r = chat(&gw, &gw.key, &b, &[("X-Tollgate-Cache", "sometimes")]).await;
    let e = r.error(400, "invalid_request");
    assert!(
        e["error"]["message"]
            .as_str()
            .unwrap()
            .contains("X-Tollgate-Cache"),
        "{e}"
    );
    for (ext, name) in [
        (json!({"cache": "yes"}), "tollgate.cache"),
        (json!({"cache": 1}), "tollgate.cache"),
        (json!({"cahce": true}), "tollgate.cahce"),
        (json!("cache"), "tollgate"),
    ] {
        let mut bad = b.clone();
        bad["tollgate"] = ext;
        let r = chat(&gw, &gw.key, &bad, &[]).await;
        let e = r.error(400, "invalid_request");
        assert!(
            e["error"]["message"].as_str().unwrap().contains(name),
            "{e}"
        );
    }
    // Over the Messages API too, in its own error shape.
    let m = json!({"model": "m", "max_tokens": 10, "messages": [{"role": "user", "content": "x"}],
                   "tollgate": {"cache": "on"}});
    let r = post(&gw, &gw.key, "/v1/messages", &m, &[]).await;
    assert_eq!(r.status, 400, "{}", r.text());
    assert!(r.text().contains("tollgate.cache"), "{}", r.text());
    assert_eq!(fake.chat_count(), 0);
    assert_eq!(gw.balance(&gw.key).await, initial, "nothing charged");
    assert!(gw.usage(&gw.key).await["recent"]
        .as_array()
        .unwrap()
        .is_empty());
    assert!(gw.is_healthy().await);
    // And the same request, well formed, is served.
    assert_eq!(chat(&gw, &gw.key, &b, ON).await.status, 200);
}

#[tokio::test]
async fn the_key_setting_must_be_a_boolean() {
    let fake = FakeOpenAi::start("p").await;
    let gw = gateway(&fake, "").await;
    for v in [json!("yes"), json!(1), json!(null)] {
        let r = gw
            .api_as(
                &gw.key,
                "POST",
                "/api/v1/keys",
                &json!({"name": "k", "response_cache": v}),
            )
            .await;
        let e = r.error(400, "invalid_request");
        assert!(
            e["error"]["message"]
                .as_str()
                .unwrap()
                .contains("response_cache"),
            "{e}"
        );
    }
    let keys = gw
        .api_as(&gw.key, "GET", "/api/v1/keys", &json!({}))
        .await
        .json();
    let names: Vec<&str> = keys["data"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|k| k["name"].as_str())
        .collect();
    assert!(!names.contains(&"k"), "nothing half-written: {names:?}");
}

#[test]
fn absurd_config_values_are_refused_by_name() {
    let dir = temp_dir();
    let file = dir.join("t.toml");
    let base = "[[providers]]\nname = \"p\"\nendpoints = [\"http://127.0.0.1:9\"]\n[[models]]\nid = \"m\"\nprovider = \"p\"\ntier = \"economy\"\ninput_credits_per_1k = 1\noutput_credits_per_1k = 1\n[response_cache]\n";
    let check = |section: &str| {
        std::fs::write(&file, format!("{base}{section}")).unwrap();
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
    for (section, name) in [
        ("ttl_secs = 0", "response_cache.ttl_secs"),
        ("ttl_secs = 31536000", "response_cache.ttl_secs"),
        ("max_entry_bytes = 100", "response_cache.max_entry_bytes"),
        (
            "max_entry_bytes = 1099511627776",
            "response_cache.max_entry_bytes",
        ),
        (
            "max_total_bytes = 2048\nmax_entry_bytes = 4096",
            "response_cache.max_total_bytes",
        ),
        ("charge_fraction = 2", "response_cache.charge_fraction"),
        ("charge_fraction = -0.5", "response_cache.charge_fraction"),
        ("ttl = 60", "ttl"),
    ] {
        let (ok, err) = check(section);
        assert!(!ok && err.contains(name), "{section}: {err}");
    }
    let (ok, err) = check(
        "ttl_secs = 600\nmax_entry_bytes = 65536\nmax_total_bytes = 1048576\ncharge_fraction = 0.1",
    );
    assert!(ok, "{err}");
}
