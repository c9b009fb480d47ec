//! What the usage table's schema promises the hot path (migration 0013), on whichever store the
//! tests run against: a credit lease's usage rows run no trigger, a chat row is no entry in the
//! developer index, and the direct settlement (through the view `usage_settlements` on SQLite)
//! still writes its row, moves the money and drops its hold in one atomic statement.

use tollgate::ledger::{Ledger, Settlement};
use tollgate_filters::credits::HoldSize;
use tollgate_testkit::{database_url, temp_dir, unique_email};

#[tokio::test]
async fn usage_rows_run_no_trigger_and_the_direct_settlement_still_moves_the_money() {
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

    // The schema: no trigger on `usage` (on SQLite the settlement's is on the view), and the
    // developer index only where there is a developer.
    match &ledger {
        Ledger::Sqlite(p) => {
            let on_usage: Vec<(String,)> = sqlx::query_as(
                "SELECT name FROM sqlite_master WHERE type = 'trigger' AND tbl_name = 'usage'",
            )
            .fetch_all(p)
            .await
            .unwrap();
            assert_eq!(on_usage, [], "a trigger on usage runs for every lease row");
            let (on_view,): (String,) = sqlx::query_as(
                "SELECT tbl_name FROM sqlite_master WHERE type = 'trigger' AND name = 'usage_settle'",
            )
            .fetch_one(p)
            .await
            .unwrap();
            assert_eq!(on_view, "usage_settlements");
            let (index,): (String,) = sqlx::query_as(
                "SELECT sql FROM sqlite_master WHERE type = 'index' AND name = 'usage_developer'",
            )
            .fetch_one(p)
            .await
            .unwrap();
            assert!(index.contains("WHERE developer_id IS NOT NULL"), "{index}");
            // The earnings query (src/ledger/mcp.rs) still finds its rows by the partial index:
            // `developer_id = $1` implies the index's condition.
            let plan: Vec<(i64, i64, i64, String)> = sqlx::query_as(
                "EXPLAIN QUERY PLAN SELECT tool_slug FROM usage \
                 WHERE developer_id = $1 AND kind = 'tool' AND credits > 0 \
                 ORDER BY created_at DESC, request_id DESC LIMIT 50",
            )
            .bind(&account)
            .fetch_all(p)
            .await
            .unwrap();
            assert!(
                plan.iter().any(|r| r.3.contains("INDEX usage_developer")),
                "{plan:?}"
            );
        }
        Ledger::Postgres(p) => {
            let (index,): (String,) = sqlx::query_as(
                "SELECT indexdef FROM pg_indexes WHERE tablename = 'usage' AND indexname = 'usage_developer'",
            )
            .fetch_one(p)
            .await
            .unwrap();
            assert!(
                index.contains("WHERE (developer_id IS NOT NULL)"),
                "{index}"
            );
        }
    }

    // The direct settlement: the row written, the hold gone, the balance refunded less the
    // charge, all by one statement; the same request settled again fails and moves nothing.
    let req = format!("req_schema_{account}");
    let size = HoldSize {
        prompt_cost: 0,
        wanted: 50_000,
        minimum: 50_000,
        output_per_1k: 0,
        choices: 1,
    };
    assert_eq!(
        ledger.hold(&req, &account, &size, 1 << 50).await.unwrap(),
        Some((50_000, 950_000))
    );
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
        tool: None,
    };
    let done = ledger.settle(&s).await.unwrap();
    assert_eq!((done.charged, done.balance), (7_000, 993_000));
    let balance = ledger.account(&account).await.unwrap().unwrap().balance;
    assert_eq!(balance, 993_000);
    assert!(
        !ledger.cancel_hold(&req).await.unwrap(),
        "the settlement dropped its hold"
    );
    assert!(
        ledger.settle(&s).await.is_err(),
        "a second row for one request"
    );
    assert_eq!(
        ledger.account(&account).await.unwrap().unwrap().balance,
        993_000,
        "the failed second settlement moved no money"
    );
    assert_eq!(ledger.usage_totals(&account).await.unwrap(), (1, 7_000));
}
