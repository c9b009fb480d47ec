//! One balance: two instances on one ledger (and one Redis when the run has one) show the
//! same balance after every request, and the charge of a stream is in it the moment its last
//! event (`[DONE]`, `message_stop`) arrives, not only once the connection closes.

use std::time::Duration;

use serde_json::json;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;
use tollgate_testkit::books;
use tollgate_testkit::*;

/// Sends a streaming request and returns as soon as `last` (the stream's final event) has
/// arrived, with the connection still open: what a client that acts on `[DONE]` sees.
async fn stream_until(
    addr: std::net::SocketAddr,
    key: &str,
    path: &str,
    body: &serde_json::Value,
    last: &str,
) -> String {
    let body = serde_json::to_vec(body).unwrap();
    let head = format!(
        "POST {path} HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer {}\r\nContent-Type: application/json\r\nContent-Length: {}\r\n\r\n",
        key,
        body.len()
    );
    let mut s = TcpStream::connect(addr).await.unwrap();
    s.write_all(head.as_bytes()).await.unwrap();
    s.write_all(&body).await.unwrap();
    let mut got = Vec::new();
    let mut buf = [0u8; 4096];
    while !String::from_utf8_lossy(&got).contains(last) {
        let n = tokio::time::timeout(Duration::from_secs(10), s.read(&mut buf))
            .await
            .expect("the stream goes on")
            .unwrap();
        assert!(
            n > 0,
            "closed before {last}: {}",
            String::from_utf8_lossy(&got)
        );
        got.extend_from_slice(&buf[..n]);
    }
    // `s` stays open until here: the balance is read while the stream's connection lives.
    String::from_utf8_lossy(&got).into_owned()
}

#[tokio::test]
async fn two_instances_show_one_balance_after_every_request_and_every_stream() {
    let fake = FakeOpenAi::start("p").await;
    let cfg = one_model_config(&fake, "m");
    // Long idle: the leases stay taken all through the test, as under steady traffic.
    let storage = "lease_idle_secs = 60\nlease_sync_ms = 20".to_string();
    let one = Gateway::start_opts(
        tollgate_bin!(),
        &cfg,
        Opts {
            storage,
            ..Opts::default()
        },
    )
    .await;
    let two = one.second(tollgate_bin!(), &cfg).await;
    let db = one.config_db();
    let initial = books::read(&db, &one.user_id).await.money;
    let expected = || async {
        initial
            - books::read(&db, &one.user_id)
                .await
                .rows
                .iter()
                .map(|r| r.1)
                .sum::<i64>()
    };

    let mut ids = Vec::new();
    let chat = json!({"model": "m", "messages": user("hi"), "max_tokens": 20});
    for i in 0..6 {
        let (served, other) = if i % 2 == 0 {
            (&one, &two)
        } else {
            (&two, &one)
        };
        let r = served.chat_as(Some(&one.key), &chat).await;
        ids.push(r.header("x-request-id").unwrap().to_string());
        assert_eq!(r.status, 200, "{}", r.text());
        // The instance that served it first (it writes its pending row), then the other.
        let a = served.balance(&one.key).await;
        let b = other.balance(&one.key).await;
        assert_eq!(a, b, "request {i}: instances disagree on the balance");
        // The response said the same (its own instance's view after settling).
        let shown: f64 = r.header("x-credits-remaining").unwrap().parse().unwrap();
        assert_eq!(
            (shown * 1e6).round() as i64,
            a,
            "request {i}: X-Credits-Remaining"
        );
        assert_eq!(a, expected().await, "request {i}: not the ledger's balance");
        // And the other way round, once one lease round has passed.
        tokio::time::sleep(Duration::from_millis(60)).await;
        assert_eq!(
            other.balance(&one.key).await,
            served.balance(&one.key).await
        );
    }
    // Both instances hold a lease now: neither shows the other's unspent part as spent.
    let leased = books::read(&db, &one.user_id).await.hold_rows;
    assert_eq!(leased.len(), 2, "a lease on each instance: {leased:?}");

    let chat_stream =
        json!({"model": "m", "messages": user("hi"), "max_tokens": 20, "stream": true});
    let messages_stream = json!({"model": "m", "max_tokens": 20, "stream": true,
        "messages": [{"role": "user", "content": "hi"}]});
    for i in 0..6 {
        let (gw, other) = if i % 2 == 0 {
            (&one, &two)
        } else {
            (&two, &one)
        };
        let got = if i < 4 {
            stream_until(
                gw.addr,
                &one.key,
                "/v1/chat/completions",
                &chat_stream,
                "data: [DONE]",
            )
            .await
        } else {
            stream_until(
                gw.addr,
                &one.key,
                "/v1/messages",
                &messages_stream,
                "event: message_stop",
            )
            .await
        };
        let a = gw.balance(&one.key).await;
        let b = other.balance(&one.key).await;
        assert_eq!(a, b, "stream {i}: instances disagree right after [DONE]");
        let id = got
            .lines()
            .find_map(|l| l.strip_prefix("x-request-id: "))
            .unwrap_or_else(|| panic!("no request id: {got}"));
        ids.push(id.trim().to_string());
        assert_eq!(
            a,
            expected().await,
            "stream {i}: the charge is not in the balance at [DONE]: {got}"
        );
    }
    // One usage row per request the client saw answered, and no other.
    let rows = books::read(&db, &one.user_id).await.rows;
    let mut seen: Vec<&str> = rows.iter().map(|r| r.0.as_str()).collect();
    let mut want: Vec<&str> = ids.iter().map(String::as_str).collect();
    seen.sort_unstable();
    want.sort_unstable();
    assert_eq!(seen, want);
}
