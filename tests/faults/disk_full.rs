//! SQLite on a full disk: while the disk is full no request is served without its charge being
//! durable (503 instead), none is a 500 or hangs, and within 5 s of space coming back every
//! request succeeds again.

use std::time::Duration;

use tollgate_testkit::books;
use tollgate_testkit::*;

use super::load;

#[tokio::test]
async fn a_full_disk_serves_nothing_for_free_and_recovers_within_seconds() {
    let disk = match SmallTmpfs::mount(4096) {
        Ok(d) => d,
        Err(why) => return skip(&format!("no tmpfs to fill: {why}")),
    };
    let fake = FakeOpenAi::start("p").await;
    let cfg = one_model_config(&fake, "m");
    let db = format!("sqlite://{}/ledger.db", disk.path().display());
    let gw = Gateway::start_opts(
        tollgate_bin!(),
        &cfg,
        Opts {
            database_url: Some(db.clone()),
            storage: "lease_holds = 4\nlease_sync_ms = 20\nlease_idle_secs = 1\nacquire_timeout_ms = 1000".into(),
            ..Opts::default()
        },
    )
    .await;
    let initial = books::read(&db, &gw.user_id).await.money;

    let load = load::Load::start(gw.addr, &gw.key, 4, Duration::from_millis(20));
    tokio::time::sleep(Duration::from_secs(1)).await;
    disk.fill().expect("fill the tmpfs");
    let full_at = load.started.elapsed();
    tokio::time::sleep(Duration::from_secs(4)).await;
    let ls = |when: &str| {
        let files: Vec<String> = std::fs::read_dir(disk.path())
            .unwrap()
            .flatten()
            .map(|e| {
                format!(
                    "{:?}={}",
                    e.file_name(),
                    e.metadata().map_or(0, |m| m.len())
                )
            })
            .collect();
        eprintln!("{when}: {files:?}");
    };
    ls("full");
    disk.free();
    let freed_at = load.started.elapsed();
    ls("freed");
    tokio::time::sleep(Duration::from_secs(8)).await;
    let outcomes = load.finish().await;
    ls("end");

    let during: Vec<_> = outcomes
        .iter()
        .filter(|o| o.sent > full_at && o.sent < freed_at)
        .collect();
    eprintln!(
        "disk full: {} requests during ({}), {} in all ({})",
        during.len(),
        load::summary(&during.iter().map(|o| (*o).clone()).collect::<Vec<_>>()),
        outcomes.len(),
        load::summary(&outcomes)
    );
    for o in &outcomes {
        assert!(
            o.status == 200 || o.status == 503,
            "only 200 or 503 while the disk fills: {} after {:?} ({:?}): {}\n{}",
            o.status,
            o.sent,
            o.took,
            o.body,
            load::problems(&gw.log())
        );
    }
    // Within 5 s of space coming back, every request succeeds.
    let late: Vec<_> = outcomes
        .iter()
        .filter(|o| o.sent > freed_at + Duration::from_secs(5))
        .collect();
    assert!(!late.is_empty());
    for o in &late {
        assert_eq!(
            o.status,
            200,
            "not recovered {:?} after space came back: {}\n{}",
            o.sent - freed_at,
            o.body,
            load::problems(&gw.log())
        );
    }
    load::check_refusals(&outcomes.iter().collect::<Vec<_>>(), fake.chat_count());
    books::check(&db, &gw.user_id, initial, &load::ok_ids(&outcomes)).await;
    // The usage API's totals agree with the rows.
    let usage = gw.usage(&gw.key).await;
    let requests: u64 = usage["by_day"]
        .as_array()
        .unwrap()
        .iter()
        .map(|d| d["requests"].as_u64().unwrap())
        .sum();
    let rows = books::read(&db, &gw.user_id).await.rows.len() as u64;
    assert_eq!(requests, rows, "usage totals against the rows");
    assert!(gw.is_healthy().await);
}
