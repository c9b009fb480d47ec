//! Retention on an injected clock: records written today, read by instances whose clocks are
//! 8 and then 31 days ahead (`TOLLGATE_CLOCK_OFFSET_MS`) on the same ledger: the first nulls
//! the payloads (`payload_retention_days = 7`) and keeps the records; the second deletes the
//! records (`retention_days = 30`). On a ledger of its own: the moved clocks sweep everything
//! they see.

use std::time::{Duration, Instant};

use serde_json::{json, Value};
use tollgate_testkit::*;

use super::common::*;

const DAY_MS: i64 = 86_400_000;

/// A ledger no other test uses: a SQLite file, or a new database on the run's Postgres.
async fn own_ledger() -> String {
    match std::env::var("TOLLGATE_TEST_DATABASE_URL") {
        Ok(url) if !url.is_empty() => {
            let nanos = std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .unwrap()
                .as_nanos();
            let name = format!("tollgate_rl_{}_{nanos}", std::process::id());
            let pool = sqlx::PgPool::connect(&url).await.unwrap();
            sqlx::query(&format!("CREATE DATABASE {name}"))
                .execute(&pool)
                .await
                .unwrap();
            pool.close().await;
            let base = url.split('?').next().unwrap();
            let root = &base[..base.rfind('/').unwrap()];
            format!("{root}/{name}")
        }
        _ => format!("sqlite://{}/ledger.db", temp_dir().display()),
    }
}

/// An instance on `db` whose clock is `days` ahead, its reaper every 0.2 s.
async fn later(cfg: &str, db: &str, days: i64) -> Gateway {
    let o = Opts {
        database_url: Some(db.to_owned()),
        no_account: true,
        storage: "hold_reap_interval_secs = 0.2".into(),
        env: vec![
            ("RL_TEST_PROVIDER_KEY".into(), PROVIDER_KEY.into()),
            (
                "TOLLGATE_CLOCK_OFFSET_MS".into(),
                (days * DAY_MS).to_string(),
            ),
        ],
        ..Opts::default()
    };
    Gateway::start_opts(tollgate_bin!(), cfg, o).await
}

/// The record as the operator reads it (`None`: gone).
async fn admin_record(gw: &Gateway, id: &str) -> Option<Value> {
    let r = gw
        .api_as(
            ADMIN_TOKEN,
            "GET",
            &format!("/api/v1/admin/requests/{id}"),
            &json!({}),
        )
        .await;
    match r.status {
        200 => Some(r.json()),
        404 => None,
        s => panic!("{s}: {}", r.text()),
    }
}

async fn until(what: &str, mut ok: impl AsyncFnMut() -> bool) {
    let start = Instant::now();
    while !ok().await {
        assert!(start.elapsed() < Duration::from_secs(15), "{what}");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

#[tokio::test]
async fn payloads_go_after_their_retention_and_records_after_theirs() {
    let fake = FakeOpenAi::start("p").await;
    let cfg = format!(
        "{FAST_TIMEOUTS}{}{}[telemetry.request_log]\npayload_retention_days = 7\nretention_days = 30\n",
        provider("p", &[&fake], "api_key_env = \"RL_TEST_PROVIDER_KEY\""),
        model("m", "p", "economy", ""),
    );
    let db = own_ledger().await;
    let o = Opts {
        database_url: Some(db.clone()),
        ..opts()
    };
    let gw = Gateway::start_opts(tollgate_bin!(), &cfg, o).await;
    let key = gw.key.clone();
    let v = gw
        .api_as(
            &key,
            "PATCH",
            "/api/v1/auth/me",
            &json!({"log_payloads": true}),
        )
        .await;
    assert_eq!(v.status, 200, "{}", v.text());
    let (_, id, _) = chat(&gw, &key, "m", "kept a week", false).await;
    let r = record(&gw, &key, &id).await;
    assert!(
        r["request_body"].as_str().unwrap().contains("kept a week"),
        "{r}"
    );

    // Eight days on: the payloads are gone, the record stays.
    let week = later(&cfg, &db, 8).await;
    until("payloads nulled after 7 days", async || {
        admin_record(&week, &id)
            .await
            .is_some_and(|r| r["payload_stored"] == false)
    })
    .await;
    let r = admin_record(&week, &id).await.unwrap();
    assert!(
        r["request_body"].is_null() && r["response_body"].is_null(),
        "{r}"
    );
    assert_eq!(r["status"], 200);
    drop(week);

    // Thirty-one days on: the record is gone.
    let month = later(&cfg, &db, 31).await;
    until("records deleted after 30 days", async || {
        admin_record(&month, &id).await.is_none()
    })
    .await;
    assert!(admin_record(&gw, &id).await.is_none());
}
