//! A receiver down for a minute (its port closed for half of it, answering 503 for the other
//! half) then up gets every event queued meanwhile exactly once by its `Tollgate-Event-Id`, in
//! the order the events were made; the log shows the retries.

use std::time::{Duration, Instant};

use serde_json::json;
use tollgate_testkit::*;

use super::{endpoint, gateway, log};

async fn test_event(gw: &Gateway, id: &str) -> String {
    let path = format!("/api/v1/webhooks/{id}/test");
    let r = gw.api_as(&gw.key, "POST", &path, &json!({})).await;
    assert_eq!(r.status, 202, "{}", r.text());
    r.json()["event_id"].as_str().unwrap().to_owned()
}

#[tokio::test]
async fn a_receiver_down_for_a_minute_gets_every_event_once_in_order() {
    let (_f, gw) = gateway().await;
    let rx = Receiver::start().await;
    let (id, _) = endpoint(&gw, &gw.key, &rx.url("/in"), &["key.expired"]).await;
    rx.down();
    let started = Instant::now();
    let mut sent = Vec::new();
    // Events made through the minute: the first half with the port closed, the second with
    // the receiver answering 503.
    for i in 0..6 {
        sent.push(test_event(&gw, &id).await);
        sent.push(test_event(&gw, &id).await);
        if i == 2 {
            tokio::time::sleep(Duration::from_secs(30).saturating_sub(started.elapsed())).await;
            rx.answer(503);
            rx.up().await;
        }
        tokio::time::sleep(Duration::from_secs(9)).await;
    }
    tokio::time::sleep(Duration::from_secs(60).saturating_sub(started.elapsed())).await;
    assert!(rx.accepted().is_empty(), "nothing is accepted while down");
    let refused = rx.all().len();
    assert!(refused >= 3, "the 503s were retried: {refused}");
    rx.answer(200);
    let got = rx
        .wait_until(Duration::from_secs(30), "every event", |d| {
            d.len() >= sent.len()
        })
        .await;
    // A moment more: nothing comes twice.
    tokio::time::sleep(Duration::from_secs(2)).await;
    let ids: Vec<String> = rx.accepted().iter().map(|d| d.event_id()).collect();
    assert_eq!(ids, sent, "each event once, in order");
    assert_eq!(got.len(), sent.len());
    // Every attempt before was the oldest event: in order, never a later one first.
    let first_refused: Vec<String> = rx
        .all()
        .iter()
        .filter(|d| d.answered == 503)
        .map(|d| d.event_id())
        .collect();
    assert!(
        first_refused.iter().all(|e| *e == sent[0]),
        "{first_refused:?}"
    );
    let rows = log(&gw, &gw.key, &id).await;
    assert_eq!(rows.len(), sent.len());
    assert!(rows.iter().all(|r| r["status"] == "delivered"), "{rows:?}");
    let oldest = rows.last().unwrap();
    assert!(oldest["attempts"].as_i64().unwrap() > 3, "{oldest}");
    assert_eq!(oldest["last_status"], 200);
}
