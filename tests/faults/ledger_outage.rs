//! Postgres stopped for 15 s under load, then started: an account without a credit lease gets
//! 503 within the acquire timeout (never a 500, never a hang), an account with a funded lease
//! on this instance keeps being served, `/readyz` says the ledger is down, and after the
//! restart every usage row is written exactly once and every request succeeds within 5 s.
//! Under 50 requests a second that each need a database hold, every one is answered within the
//! acquire timeout and half a second, each on its own deadline (the ledger's circuit).

use std::time::{Duration, Instant};

use tollgate_testkit::books;
use tollgate_testkit::*;

use super::load;

/// `storage.acquire_timeout_ms` of this test.
const ACQUIRE: Duration = Duration::from_millis(1000);

/// A Postgres cluster of the test's own, a fake provider and a gateway on both with `storage`
/// and this test's acquire timeout; `None` (the skip said) without a cluster.
async fn start(storage: &str) -> Option<(PrivatePostgres, FakeOpenAi, Gateway)> {
    let pg = match PrivatePostgres::try_start() {
        Ok(pg) => pg,
        Err(why) => {
            skip(&format!("no Postgres cluster of this test's own: {why}"));
            return None;
        }
    };
    let fake = FakeOpenAi::start("p").await;
    let opts = Opts {
        database_url: Some(pg.url()),
        storage: format!("{storage}\nacquire_timeout_ms = {}", ACQUIRE.as_millis()),
        ..Opts::default()
    };
    let gw = Gateway::start_opts(tollgate_bin!(), &one_model_config(&fake, "m"), opts).await;
    Some((pg, fake, gw))
}

#[tokio::test]
async fn a_ledger_outage_is_503_for_the_unleased_while_leases_carry_the_rest() {
    let Some((pg, fake, gw)) = start("lease_holds = 1024\nlease_idle_secs = 1").await else {
        return;
    };
    // A second account whose lease goes back while it is idle: it holds in the database.
    let (idle_user, idle_key) = gw.signup(&unique_email()).await;
    gw.admin_credits(&idle_user, 1_000.0).await;
    gw.admin_plan(&idle_user, "business", None, None).await;
    let initial = books::read(&pg.url(), &gw.user_id).await.money;
    let idle_initial = books::read(&pg.url(), &idle_user).await.money;
    let first = load::one(gw.addr, &idle_key, Instant::now()).await;
    assert_eq!(first.status, 200, "{}", first.body);

    let busy = load::Load::start(gw.addr, &gw.key, 2, Duration::from_millis(50));
    // The idle account's lease is returned (idle 1 s, then one round).
    tokio::time::sleep(Duration::from_secs(3)).await;
    pg.stop();
    let stopped_at = busy.started.elapsed();
    let t = Instant::now();
    let mut idle_outcomes = Vec::new();
    let mut readyz = Vec::new();
    while t.elapsed() < Duration::from_secs(15) {
        idle_outcomes.push(load::one(gw.addr, &idle_key, busy.started).await);
        readyz.push(get(gw.addr, "/readyz").await.status);
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
    pg.start_again();
    let started_at = busy.started.elapsed();
    tokio::time::sleep(Duration::from_secs(7)).await;
    let after: Vec<load::Outcome> = {
        let mut v = Vec::new();
        for _ in 0..5 {
            v.push(load::one(gw.addr, &idle_key, busy.started).await);
        }
        v
    };
    let outcomes = busy.finish().await;
    let log = load::problems(&gw.log());

    let during = |o: &&load::Outcome| o.sent > stopped_at + ACQUIRE && o.sent < started_at;
    eprintln!(
        "ledger outage: leased account {} during, {} in all; unleased {} during",
        load::summary(&outcomes.iter().filter(during).cloned().collect::<Vec<_>>()),
        load::summary(&outcomes),
        load::summary(&idle_outcomes),
    );
    for o in outcomes.iter().chain(&idle_outcomes).chain(&after) {
        assert!(
            o.status == 200 || o.status == 503,
            "only 200 or 503 through a ledger outage: {} after {:?}: {}\n{log}",
            o.status,
            o.sent,
            o.body
        );
        if o.status == 503 {
            assert!(
                o.took < ACQUIRE * 2 + Duration::from_millis(500),
                "a 503 took {:?}, the store's acquire timeout is {ACQUIRE:?}",
                o.took
            );
        }
    }
    // The account with a funded lease was served while the ledger was down.
    let served = outcomes
        .iter()
        .filter(during)
        .filter(|o| o.status == 200)
        .count();
    assert!(
        served >= 20,
        "the leased account was served {served} times during the outage\n{log}"
    );
    // The other one could not be: its hold needs the ledger.
    assert!(
        idle_outcomes.iter().all(|o| o.status == 503),
        "{}",
        load::summary(&idle_outcomes)
    );
    assert!(readyz.iter().all(|s| *s == 503), "/readyz: {readyz:?}");
    assert_eq!(get(gw.addr, "/readyz").await.status, 200);
    // Within 5 s of the restart, everything succeeds again.
    for o in outcomes
        .iter()
        .filter(|o| o.sent > started_at + Duration::from_secs(5))
        .chain(&after)
    {
        assert_eq!(o.status, 200, "{}\n{log}", o.body);
    }
    let all: Vec<&load::Outcome> = outcomes
        .iter()
        .chain(&idle_outcomes)
        .chain(&after)
        .chain(std::iter::once(&first))
        .collect();
    load::check_refusals(&all, fake.chat_count());
    books::check(&pg.url(), &gw.user_id, initial, &load::ok_ids(&outcomes)).await;
    let idle_ok = load::ok_ids(&[vec![first], after].concat());
    books::check(&pg.url(), &idle_user, idle_initial, &idle_ok).await;
}

#[tokio::test]
async fn every_request_that_needs_the_ledger_is_answered_within_its_acquire_timeout() {
    // No credit leases: every request holds in the database.
    let Some((pg, fake, gw)) = start("lease_holds = 0").await else {
        return;
    };
    let initial = books::read(&pg.url(), &gw.user_id).await.money;
    let load = load::Load::open(gw.addr, &gw.key, Duration::from_millis(20));
    tokio::time::sleep(Duration::from_secs(2)).await;
    pg.stop();
    let stopped_at = load.started.elapsed();
    tokio::time::sleep(Duration::from_secs(15)).await;
    pg.start_again();
    let started_at = load.started.elapsed();
    tokio::time::sleep(Duration::from_secs(6)).await;
    let outcomes = load.finish().await;
    let log = load::problems(&gw.log());
    let during: Vec<&load::Outcome> = outcomes
        .iter()
        .filter(|o| o.sent >= stopped_at && o.sent < started_at)
        .collect();
    eprintln!(
        "ledger outage at 50 requests/s: {} during, {} in all",
        load::summary(&during.iter().map(|o| (*o).clone()).collect::<Vec<_>>()),
        load::summary(&outcomes),
    );
    assert!(
        during.len() >= 600,
        "{} requests during the outage",
        during.len()
    );
    let bound = ACQUIRE + Duration::from_millis(500);
    for o in &outcomes {
        assert!(
            o.status == 200 || o.status == 503,
            "only 200 or 503: {} after {:?}: {}\n{log}",
            o.status,
            o.sent,
            o.body
        );
        if o.sent >= stopped_at && o.sent < started_at {
            assert!(
                o.took <= bound,
                "a request sent {:?} into the load took {:?} (bound {bound:?})\n{log}",
                o.sent,
                o.took
            );
        }
    }
    assert!(
        during.iter().all(|o| o.status == 503),
        "served without a ledger"
    );
    // Served again soon after the restart.
    assert!(outcomes
        .iter()
        .filter(|o| o.sent > started_at + Duration::from_secs(3))
        .all(|o| o.status == 200));
    let all: Vec<&load::Outcome> = outcomes.iter().collect();
    load::check_refusals(&all, fake.chat_count());
    books::check(&pg.url(), &gw.user_id, initial, &load::ok_ids(&outcomes)).await;
}
