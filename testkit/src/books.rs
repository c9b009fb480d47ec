//! The books of an account read straight from the ledger (SQLite or Postgres), and what every
//! fault test checks at its end: for the account,
//! `initial − final balance = Σ usage rows` exactly, and every 200 the client saw has its one
//! usage row. The balance counts what credit leases still hold as the account's (it is).

use std::time::{Duration, Instant};

use sqlx::Row;

/// The account's money as the ledger has it: its balance plus every hold of it (leases and
/// requests in flight), and the usage rows with their charges.
pub struct Books {
    pub money: i64,
    pub holds: i64,
    /// (id, amount, expires_at ms)
    pub hold_rows: Vec<(String, i64, i64)>,
    pub rows: Vec<(String, i64)>,
    /// The usage rows of response cache hits (free when its `charge_fraction` is 0).
    pub cache_hits: Vec<String>,
}

pub async fn read(url: &str, account: &str) -> Books {
    // One snapshot for all four reads: a lease returned between reading the balance and reading
    // the holds would otherwise look like money gone (the balance still without it, the hold
    // already deleted).
    macro_rules! q {
        ($tx:expr) => {{
            let a: i64 = sqlx::query("SELECT balance FROM accounts WHERE user_id = $1")
                .bind(account)
                .fetch_one(&mut *$tx)
                .await
                .unwrap()
                .get(0);
            let h: i64 = sqlx::query(
                "SELECT CAST(COALESCE(SUM(amount), 0) AS BIGINT) FROM holds WHERE account_id = $1",
            )
            .bind(account)
            .fetch_one(&mut *$tx)
            .await
            .unwrap()
            .get(0);
            let rows = sqlx::query("SELECT request_id, credits FROM usage WHERE account_id = $1")
                .bind(account)
                .fetch_all(&mut *$tx)
                .await
                .unwrap()
                .iter()
                .map(|r| (r.get::<String, _>(0), r.get::<i64, _>(1)))
                .collect();
            let cache_hits = sqlx::query(
                "SELECT request_id FROM usage WHERE account_id = $1 AND cache_hit <> 0",
            )
            .bind(account)
            .fetch_all(&mut *$tx)
            .await
            .unwrap()
            .iter()
            .map(|r| r.get::<String, _>(0))
            .collect();
            let hold_rows =
                sqlx::query("SELECT id, amount, expires_at FROM holds WHERE account_id = $1")
                    .bind(account)
                    .fetch_all(&mut *$tx)
                    .await
                    .unwrap()
                    .iter()
                    .map(|r| {
                        (
                            r.get::<String, _>(0),
                            r.get::<i64, _>(1),
                            r.get::<i64, _>(2),
                        )
                    })
                    .collect();
            Books {
                money: a + h,
                holds: h,
                hold_rows,
                rows,
                cache_hits,
            }
        }};
    }
    if url.starts_with("sqlite:") {
        let p = sqlx::SqlitePool::connect(url)
            .await
            .expect("read the ledger");
        // A deferred transaction in WAL mode reads one snapshot from its first SELECT on.
        let mut tx = p.begin().await.expect("begin");
        let b = q!(tx);
        drop(tx);
        p.close().await;
        b
    } else {
        let p = sqlx::PgPool::connect(url).await.expect("read the ledger");
        let mut tx = p.begin().await.expect("begin");
        sqlx::query("SET TRANSACTION ISOLATION LEVEL REPEATABLE READ")
            .execute(&mut *tx)
            .await
            .expect("snapshot");
        let b = q!(tx);
        drop(tx);
        p.close().await;
        b
    }
}

/// Credit leases of the account in the ledger (rows of `holds` named `lease_…`).
pub async fn lease_rows(url: &str, account: &str) -> usize {
    read(url, account)
        .await
        .hold_rows
        .iter()
        .filter(|h| h.0.starts_with("lease_"))
        .count()
}

/// The books once the account holds nothing (its credit leases returned, their usage rows
/// written), or as they are after 20 s.
pub async fn settled(url: &str, account: &str) -> Books {
    let t = Instant::now();
    loop {
        let b = read(url, account).await;
        if b.holds == 0 || t.elapsed() > Duration::from_secs(20) {
            return b;
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

/// Waits until the account holds nothing (its leases returned, no request in flight), then
/// checks the books against `initial` and the request ids the client saw answered 200.
pub async fn check(url: &str, account: &str, initial: i64, ok: &[String]) {
    let books = settled(url, account).await;
    assert_eq!(
        books.holds, 0,
        "holds left after the gateway went idle: {:?}",
        books.hold_rows
    );
    let charged: i64 = books.rows.iter().map(|(_, c)| c).sum();
    assert_eq!(
        initial - books.money,
        charged,
        "initial − final balance must equal the sum of the usage rows"
    );
    let ids: std::collections::HashSet<&str> = books.rows.iter().map(|(r, _)| r.as_str()).collect();
    let missing: Vec<&String> = ok.iter().filter(|r| !ids.contains(r.as_str())).collect();
    assert!(
        missing.is_empty(),
        "{} of {} answers 200 have no usage row: {:?}",
        missing.len(),
        ok.len(),
        &missing[..missing.len().min(5)]
    );
    assert_eq!(
        books.rows.len(),
        ok.len(),
        "one usage row per request served, no more (every held request here was served)"
    );
    // A response cache hit produced no output upstream: it may be free.
    let free = books
        .rows
        .iter()
        .filter(|(r, c)| *c == 0 && !books.cache_hits.contains(r))
        .count();
    assert!(
        free == 0,
        "{free} usage rows charged nothing though every request produced output"
    );
}

/// Moves the account's stored responses past their retention, as the days would: their rows
/// stay, their expiry now in the past (the gateway's reads treat them as the reaper leaves
/// them).
pub async fn expire_responses(url: &str, account: &str) {
    let sql = "UPDATE responses SET expires_at = 1 WHERE account_id = $1";
    if url.starts_with("sqlite:") {
        let p = sqlx::SqlitePool::connect(url).await.expect("the ledger");
        sqlx::query(sql)
            .bind(account)
            .execute(&p)
            .await
            .expect("expire");
        p.close().await;
    } else {
        let p = sqlx::PgPool::connect(url).await.expect("the ledger");
        sqlx::query(sql)
            .bind(account)
            .execute(&p)
            .await
            .expect("expire");
        p.close().await;
    }
}
