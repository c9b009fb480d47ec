//! What the usage table's schema promises the hot path (migration 0013), on whichever store the
//! tests run against: a credit lease's usage rows run no trigger, and a chat row is no entry in
//! the developer index. (The direct settlement through the view `usage_settlements` is tested
//! with the other settlements, in `tests/ledger/store.rs`.)

use tollgate::ledger::Ledger;
use tollgate_testkit::{database_url, temp_dir};

#[tokio::test]
async fn usage_rows_run_no_trigger_and_chat_rows_skip_the_developer_index() {
    let dir = temp_dir();
    let url = database_url(&dir);
    let ledger = Ledger::connect(&url, std::time::Duration::from_secs(2))
        .await
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
            .bind("usr_developer")
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
}
