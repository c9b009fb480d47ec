//! A settlement that fails after its stream was served (the ledger went down mid-stream) is
//! kept and written when the ledger returns, exactly once; one still waiting at shutdown is
//! logged with its amounts.

use std::time::{Duration, Instant};

use tollgate_testkit::books;
use tollgate_testkit::*;

async fn metric(gw: &Gateway, line: &str) -> i64 {
    let text = get(gw.metrics_addr, "/metrics").await.text();
    text.lines()
        .find_map(|l| l.strip_prefix(line))
        .map_or(0, |v| v.trim().parse().unwrap_or(0))
}

/// A stream that takes about two seconds, started now; resolves to the response.
fn slow_stream(gw: &Gateway) -> tokio::task::JoinHandle<Response> {
    let (addr, key) = (gw.addr, gw.key.clone());
    tokio::spawn(async move {
        let body = serde_json::json!({"model": "m", "messages": user("hi"), "max_tokens": 20, "stream": true});
        let b = serde_json::to_vec(&body).unwrap();
        let auth = format!("Bearer {key}");
        let headers = [
            ("Content-Type", "application/json"),
            ("Authorization", auth.as_str()),
        ];
        request(addr, "POST", "/v1/chat/completions", &headers, &b).await
    })
}

#[tokio::test]
async fn a_settlement_that_fails_after_serving_is_written_when_the_ledger_returns() {
    let pg = match PrivatePostgres::try_start() {
        Ok(pg) => pg,
        Err(why) => return skip(&format!("no Postgres cluster of this test's own: {why}")),
    };
    let fake = FakeOpenAi::builder("p")
        .words(6)
        .mode(Mode::Slow(Duration::from_millis(400)))
        .start()
        .await;
    let cfg = one_model_config(&fake, "m");
    let gw = Gateway::start_opts(
        tollgate_bin!(),
        &cfg,
        Opts {
            database_url: Some(pg.url()),
            // Every hold and settlement in the database.
            storage: "lease_holds = 0\nacquire_timeout_ms = 500".into(),
            ..Opts::default()
        },
    )
    .await;
    let initial = books::read(&pg.url(), &gw.user_id).await.money;

    let stream = slow_stream(&gw);
    tokio::time::sleep(Duration::from_millis(700)).await;
    pg.stop();
    let r = stream.await.unwrap();
    assert_eq!(r.status, 200, "{}", r.text());
    assert!(r.text().contains("[DONE]"), "{}", r.text());
    let id = r.header("x-request-id").unwrap().to_string();
    assert!(
        metric(&gw, "tollgate_ledger_queued{what=\"settlements\"} ").await >= 1,
        "the settlement waits: {}",
        gw.log()
    );
    pg.start_again();
    let t = Instant::now();
    while metric(
        &gw,
        "tollgate_settlement_retries_total{result=\"committed\"} ",
    )
    .await
        < 1
    {
        assert!(t.elapsed() < Duration::from_secs(10), "{}", gw.log());
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert_eq!(
        metric(&gw, "tollgate_ledger_queued{what=\"settlements\"} ").await,
        0
    );
    // Log lines reach the file from a writer thread, off the request path: wait for it.
    let line = format!("queued settlement committed: charged request_id={id}");
    let t = Instant::now();
    while !gw.log().contains(&line) {
        assert!(t.elapsed() < Duration::from_secs(5), "{}", gw.log());
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    books::check(&pg.url(), &gw.user_id, initial, &[id]).await;

    // Down again mid-stream, and the gateway stops before the ledger is back: the amounts
    // are in the log for an operator.
    let stream = slow_stream(&gw);
    tokio::time::sleep(Duration::from_millis(700)).await;
    pg.stop();
    let r = stream.await.unwrap();
    assert_eq!(r.status, 200);
    let id = r.header("x-request-id").unwrap().to_string();
    let mut gw = gw;
    gw.signal("TERM");
    let t = Instant::now();
    while gw.child.try_wait().unwrap().is_none() {
        assert!(t.elapsed() < Duration::from_secs(10), "did not stop");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let log = gw.log();
    let line = log
        .lines()
        .find(|l| l.contains("settlement NOT written at shutdown") && l.contains(&id))
        .unwrap_or_else(|| panic!("no shutdown line for {id}: {log}"));
    assert!(line.contains("cost_credits="), "{line}");
}
