//! The ledger store itself, without the binary: the lease round (settle a batch, top up, give
//! back) on whichever store the tests run against (SQLite, or Postgres when
//! `TOLLGATE_TEST_DATABASE_URL` is set).

use tollgate::ledger::{LeaseRound, Ledger, Settlement};
use tollgate_filters::credits::HoldSize;
use tollgate_testkit::{database_url, temp_dir, unique_email};

fn lease_round<'a>(
    lease: &'a str,
    account: &'a str,
    rows: &'a [(Settlement, i64)],
    topup: i64,
    give_back: i64,
    release: bool,
) -> LeaseRound<'a> {
    LeaseRound {
        lease_id: lease,
        account_id: account,
        rows,
        topup,
        topup_min_balance: topup * 4,
        release,
        give_back,
        expires_at: LEASE_EXPIRY,
    }
}

const LEASE_EXPIRY: i64 = 1 << 50;

/// The lease round itself, on whichever store the tests run against: a retried batch is not
/// charged twice, giving back and topping up move exact amounts, and a lease the reaper already
/// refunded has its batch charged to the balance (clamped), once.
#[tokio::test]
async fn lease_rounds_are_idempotent_and_survive_a_reaped_lease() {
    let dir = temp_dir();
    let ledger = Ledger::connect(&database_url(&dir), std::time::Duration::from_secs(2))
        .await
        .unwrap();
    let account = format!("usr_{}", unique_email().replace(['@', '.', '+'], "_"));
    ledger
        .create_account(&account, None, None, 1_000_000, None, 0)
        .await
        .unwrap()
        .unwrap();
    let lease = format!("lease_test_{account}");
    let size = HoldSize {
        prompt_cost: 0,
        wanted: 100_000,
        minimum: 400_000,
        output_per_1k: 0,
        choices: 1,
    };
    assert_eq!(
        ledger
            .hold(&lease, &account, &size, LEASE_EXPIRY)
            .await
            .unwrap(),
        Some((100_000, 900_000))
    );
    let row = |id: String, cost: i64| {
        (
            Settlement {
                hold_id: id.clone(),
                request_id: id,
                account_id: account.clone(),
                key_id: None,
                model_requested: "m".into(),
                model_used: Some("m".into()),
                provider: Some("p".into()),
                prompt_tokens: 1,
                completion_tokens: 1,
                cost,
                status: 200,
                latency_ms: 1,
                now_ms: 1,
                hold_note: None,
                saving: Default::default(),
                tool: None,
            },
            0,
        )
    };
    let rows = vec![
        row(format!("{account}_r1"), 7_000),
        row(format!("{account}_r2"), 3_000),
    ];
    let r = |rows, topup, give_back, release| {
        lease_round(&lease, &account, rows, topup, give_back, release)
    };
    let first = ledger.lease_sync(&r(&rows, 0, 0, false)).await.unwrap();
    assert_eq!(
        (first.charged, first.balance, first.lost),
        (10_000, 900_000, false)
    );
    // The same batch again (a commit whose acknowledgement was lost): nothing charged twice.
    let again = ledger.lease_sync(&r(&rows, 0, 0, false)).await.unwrap();
    assert_eq!(again.charged, 0);
    assert_eq!(ledger.usage_totals(&account).await.unwrap(), (2, 10_000));
    // A batch that is partly written (the two above and a new free row): only the new row is
    // written, nothing charged again.
    let mut partly = rows.clone();
    partly.push(row(format!("{account}_free"), 0));
    let mixed = ledger.lease_sync(&r(&partly, 0, 0, false)).await.unwrap();
    assert_eq!(mixed.charged, 0);
    assert_eq!(ledger.usage_totals(&account).await.unwrap(), (3, 10_000));
    // Top up 50,000 (the balance keeps at least 4× that), then give 20,000 back: the lease
    // now holds 100,000 − 10,000 + 50,000 − 20,000 = 120,000.
    let up = ledger.lease_sync(&r(&[], 50_000, 0, false)).await.unwrap();
    assert_eq!((up.topped_up, up.balance), (50_000, 850_000));
    let back = ledger.lease_sync(&r(&[], 0, 20_000, false)).await.unwrap();
    assert_eq!(back.balance, 870_000);
    // A top-up the balance cannot cover four times over is refused and moves nothing.
    let refused = ledger.lease_sync(&r(&[], 300_000, 0, false)).await.unwrap();
    assert_eq!((refused.topped_up, refused.balance), (0, 870_000));

    // The reaper refunds the lease (as if this instance had stalled past its expiry): all
    // 120,000 come back; a later batch is then charged to the balance directly, once.
    // Only this lease is made to expire (the database may be shared with other tests' holds).
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_millis() as i64;
    let expire = LeaseRound {
        expires_at: now - 1,
        ..r(&[], 0, 0, false)
    };
    ledger.lease_sync(&expire).await.unwrap();
    assert!(ledger.release_expired_holds(now).await.unwrap() >= 1);
    assert_eq!(
        ledger.account(&account).await.unwrap().unwrap().balance,
        990_000
    );
    let late = vec![row(format!("{account}_r3"), 5_000)];
    let lost = ledger.lease_sync(&r(&late, 0, 0, true)).await.unwrap();
    assert!(lost.lost);
    assert_eq!(lost.balance, 985_000);
    assert_eq!(ledger.usage_totals(&account).await.unwrap(), (4, 15_000));
    assert_eq!(
        1_000_000 - lost.balance,
        15_000,
        "initial − final = sum of usage rows"
    );
}

/// The reaper's round deletes expired dashboard sessions and leaves live ones.
#[tokio::test]
async fn expired_sessions_are_deleted_and_live_ones_kept() {
    let dir = temp_dir();
    let ledger = Ledger::connect(&database_url(&dir), std::time::Duration::from_secs(2))
        .await
        .unwrap();
    let account = format!("usr_{}", unique_email().replace(['@', '.', '+'], "_"));
    ledger
        .create_account(&account, None, None, 0, None, 0)
        .await
        .unwrap()
        .unwrap();
    let (old, live) = (format!("{account}_old"), format!("{account}_live"));
    ledger.create_session(&old, &account, 1_000).await.unwrap();
    ledger.create_session(&live, &account, 5_000).await.unwrap();
    assert!(ledger.delete_expired_sessions(2_000).await.unwrap() >= 1);
    assert_eq!(
        ledger.session_account(&old, 0).await.unwrap(),
        None,
        "deleted"
    );
    assert_eq!(
        ledger.session_account(&live, 2_000).await.unwrap(),
        Some(account)
    );
}

/// Topping a hold up (before a failover to a pricier model) moves exactly the extra from the
/// balance into the hold, or changes nothing: when the balance is short, when the hold has
/// expired (the reaper may be refunding it), when the hold is another account's.
#[tokio::test]
async fn a_hold_is_topped_up_exactly_or_not_at_all() {
    let dir = temp_dir();
    let ledger = Ledger::connect(&database_url(&dir), std::time::Duration::from_secs(2))
        .await
        .unwrap();
    let account = format!("usr_{}", unique_email().replace(['@', '.', '+'], "_"));
    ledger
        .create_account(&account, None, None, 1_000_000, None, 0)
        .await
        .unwrap()
        .unwrap();
    let size = |wanted| HoldSize {
        prompt_cost: 0,
        wanted,
        minimum: wanted,
        output_per_1k: 0,
        choices: 1,
    };
    let live = format!("{account}_live");
    let old = format!("{account}_old");
    ledger
        .hold(&live, &account, &size(100_000), 5_000)
        .await
        .unwrap()
        .unwrap();
    ledger
        .hold(&old, &account, &size(100_000), 10)
        .await
        .unwrap()
        .unwrap();
    let balance = |l: &Ledger| {
        let (l, a) = (l.clone(), account.clone());
        async move { l.account(&a).await.unwrap().unwrap().balance }
    };
    assert_eq!(balance(&ledger).await, 800_000);
    assert!(!ledger
        .top_up_hold(&live, &account, 800_001, 1_000)
        .await
        .unwrap());
    assert!(!ledger.top_up_hold(&old, &account, 1, 1_000).await.unwrap());
    assert!(!ledger
        .top_up_hold(&live, "usr_someone_else", 1, 1_000)
        .await
        .unwrap());
    assert_eq!(balance(&ledger).await, 800_000, "nothing moved");
    assert!(ledger
        .top_up_hold(&live, &account, 300_000, 1_000)
        .await
        .unwrap());
    assert_eq!(balance(&ledger).await, 500_000);
    // The reaper refunds the grown hold whole (the expired one too). Test clocks are tiny
    // numbers, so no other test's holds are in reach on a shared database.
    let reaped = ledger.release_expired_holds(6_000).await.unwrap();
    assert_eq!(reaped, 2);
    assert_eq!(balance(&ledger).await, 1_000_000);
}

/// What the fault handling asks of the store, on whichever store the tests run against: a
/// retried settlement is written once (its row already there: nothing changes), a hold whose
/// write reported an error is cancelled and refunded once, and the leases' unspent part is
/// what their rows hold.
#[tokio::test]
async fn a_retried_settlement_is_written_once_and_a_cancelled_hold_refunded_once() {
    let dir = temp_dir();
    let ledger = Ledger::connect(&database_url(&dir), std::time::Duration::from_secs(2))
        .await
        .unwrap();
    let account = format!("usr_{}", unique_email().replace(['@', '.', '+'], "_"));
    ledger
        .create_account(&account, None, None, 1_000_000, None, 0)
        .await
        .unwrap()
        .unwrap();
    let size = |wanted: i64| HoldSize {
        prompt_cost: 0,
        wanted,
        minimum: wanted,
        output_per_1k: 0,
        choices: 1,
    };
    let balance = |ledger: &Ledger| {
        let (ledger, account) = (ledger.clone(), account.clone());
        async move { ledger.account(&account).await.unwrap().unwrap().balance }
    };
    let req = format!("req_retry_{account}");
    assert!(ledger
        .hold(&req, &account, &size(50_000), LEASE_EXPIRY)
        .await
        .unwrap()
        .is_some());
    let s = Settlement {
        hold_id: req.clone(),
        request_id: req.clone(),
        account_id: account.clone(),
        key_id: None,
        model_requested: "m".into(),
        model_used: Some("m".into()),
        provider: Some("p".into()),
        prompt_tokens: 1,
        completion_tokens: 1,
        cost: 7_000,
        status: 200,
        latency_ms: 1,
        now_ms: 1,
        hold_note: None,
        saving: Default::default(),
        tool: None,
    };
    let first = ledger.settle_once(&s).await.unwrap().unwrap();
    assert_eq!((first.charged, first.balance), (7_000, 993_000));
    assert_eq!(
        ledger.settle_once(&s).await.unwrap(),
        None,
        "already written"
    );
    assert_eq!(balance(&ledger).await, 993_000, "charged once");
    // The settlement dropped its hold in its one statement (on SQLite, the trigger of the view
    // `usage_settlements`); settled again without the check, the request's second row is
    // refused and the statement moves no money.
    assert!(!ledger.cancel_hold(&req).await.unwrap(), "hold dropped");
    assert!(ledger.settle(&s).await.is_err(), "a second row");
    assert_eq!(balance(&ledger).await, 993_000, "nothing moved");
    let (rows, spent) = ledger.usage_totals(&account).await.unwrap();
    assert_eq!((rows, spent), (1, 7_000));

    // A hold to cancel, and one that was never written.
    let held = format!("req_cancel_{account}");
    ledger
        .hold(&held, &account, &size(20_000), LEASE_EXPIRY)
        .await
        .unwrap();
    assert_eq!(balance(&ledger).await, 973_000);
    assert!(ledger.cancel_hold(&held).await.unwrap());
    assert!(!ledger.cancel_hold(&held).await.unwrap(), "refunded once");
    assert!(!ledger.cancel_hold("req_never_written").await.unwrap());
    assert_eq!(balance(&ledger).await, 993_000);

    // Leases (ids `lease_…`) count as unspent balance; request holds do not.
    let lease = format!("lease_one_{account}");
    ledger
        .hold(&lease, &account, &size(100_000), LEASE_EXPIRY)
        .await
        .unwrap();
    ledger
        .hold(&held, &account, &size(10_000), LEASE_EXPIRY)
        .await
        .unwrap();
    assert_eq!(ledger.leased(&account).await.unwrap(), 100_000);
    assert_eq!(
        balance(&ledger).await + ledger.leased(&account).await.unwrap(),
        983_000
    );
}

/// SQLite's write-ahead log under a steady stream of commits (SQLite only: the log is
/// SQLite's). With checkpoints that never wait, SQLite never finds the log wholly copied before
/// the next write and never starts it over: it grows for as long as the writes go on. A
/// checkpoint that finds more than its limit in the log waits its turn and truncates it, so the
/// log stays near what is written between two checkpoints.
#[tokio::test]
async fn the_write_ahead_log_is_started_over_under_steady_writes() {
    use std::time::{Duration, Instant};
    const MB: u64 = 1 << 20;
    let dir = temp_dir();
    let url = format!("sqlite://{}/wal.db", dir.display());
    let ledger = Ledger::connect(&url, Duration::from_secs(2)).await.unwrap();
    let wal = dir.join("wal.db-wal");
    let account = "usr_wal";
    ledger
        .create_account(account, None, None, 1_000_000, None, 0)
        .await
        .unwrap()
        .unwrap();
    // One task commits back to back until told to stop; this one checkpoints every 20 ms with
    // the limit `restart_pages` until `done` says so, and returns the largest the log was
    // before a checkpoint.
    let run = |restart_pages: i64, done: &'static (dyn Fn(u64, Duration) -> bool + Sync)| {
        let (ledger, wal) = (ledger.clone(), wal.clone());
        async move {
            let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
            let writer = {
                let (ledger, stop) = (ledger.clone(), stop.clone());
                tokio::spawn(async move {
                    while !stop.load(std::sync::atomic::Ordering::Relaxed) {
                        ledger
                            .adjust_credits(account, 1, "test", "wal", 0)
                            .await
                            .unwrap();
                    }
                })
            };
            let (started, mut largest) = (Instant::now(), 0);
            while !done(largest, started.elapsed()) {
                tokio::time::sleep(Duration::from_millis(20)).await;
                largest = largest.max(std::fs::metadata(&wal).map_or(0, |m| m.len()));
                ledger.checkpoint(restart_pages).await.unwrap();
            }
            stop.store(true, std::sync::atomic::Ordering::Relaxed);
            writer.await.unwrap();
            largest
        }
    };
    // Checkpoints that never wait: the log passes 64 MB within 20 s (~2 s here).
    let grown = run(i64::MAX, &|largest, t| {
        largest > 64 * MB || t > Duration::from_secs(20)
    })
    .await;
    assert!(
        grown > 64 * MB,
        "the log grew to only {grown} bytes without restarts"
    );
    // Started over past 64 pages: truncated at once, and for 2 s of the same writes it stays a
    // few MB at most.
    ledger.checkpoint(64).await.unwrap();
    assert_eq!(std::fs::metadata(&wal).map_or(0, |m| m.len()), 0);
    let kept = run(64, &|_, t| t > Duration::from_secs(2)).await;
    eprintln!(
        "largest log: {} KB never restarted, {} KB restarted",
        grown / 1024,
        kept / 1024
    );
    assert!(
        kept < 16 * MB,
        "the log grew to {kept} bytes although restarted"
    );
}

/// The background checkpoint on whichever store the tests run against: on SQLite it empties a
/// log past its limit; on Postgres (whose log is the server's own) it does nothing and succeeds,
/// so the background service never logs a failure there.
#[tokio::test]
async fn a_checkpoint_succeeds_on_either_store() {
    let dir = temp_dir();
    let url = database_url(&dir);
    let ledger = Ledger::connect(&url, std::time::Duration::from_secs(2))
        .await
        .unwrap();
    let account = format!("usr_{}", unique_email().replace(['@', '.', '+'], "_"));
    ledger
        .create_account(&account, None, None, 1_000, None, 0)
        .await
        .unwrap()
        .unwrap();
    ledger.checkpoint(0).await.unwrap();
    if ledger.backend() == "sqlite" {
        let wal = dir.join("ledger.db-wal");
        assert_eq!(std::fs::metadata(&wal).map_or(0, |m| m.len()), 0);
    }
    // The store still answers after it.
    assert!(ledger.ping().await);
}
