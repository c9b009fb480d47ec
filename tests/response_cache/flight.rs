//! Single flight: identical requests at once on one instance wait for the first one's reply
//! instead of each calling the provider; each is answered the same and charged as it should
//! be (the first in full, the others their fraction), and the books balance.

use std::time::Duration;

use tollgate_testkit::*;

use crate::common::*;

#[tokio::test]
async fn fifty_identical_requests_call_the_provider_once() {
    // A slow stream (about a second), so that all fifty arrive while the first is upstream.
    let fake = FakeOpenAi::builder("p")
        .mode(Mode::Slow(Duration::from_millis(100)))
        .start()
        .await;
    let gw = gateway(&fake, "charge_fraction = 0.25").await;
    let initial = gw.balance(&gw.key).await;
    let b = body("Fifty of us ask the same", true);
    let tasks: Vec<_> = (0..50)
        .map(|_| {
            let (addr, key, b) = (gw.addr, gw.key.clone(), b.clone());
            tokio::spawn(async move {
                let auth = format!("Bearer {key}");
                let h = [
                    ("Content-Type", "application/json"),
                    ("Authorization", auth.as_str()),
                    ("X-Tollgate-Cache", "on"),
                ];
                request(
                    addr,
                    "POST",
                    "/v1/chat/completions",
                    &h,
                    &serde_json::to_vec(&b).unwrap(),
                )
                .await
            })
        })
        .collect();
    let mut replies = Vec::new();
    for t in tasks {
        replies.push(t.await.unwrap());
    }
    assert_eq!(fake.chat_count(), 1, "one provider call for fifty requests");
    let misses: Vec<&Response> = replies.iter().filter(|r| said(r) == Some("miss")).collect();
    assert_eq!(misses.len(), 1);
    let full = stream_charged(misses[0]);
    let events = events_without_cost(misses[0]);
    for r in &replies {
        assert_eq!(r.status, 200, "{}", r.text());
        assert_eq!(events_without_cost(r), events);
        if said(r) == Some("hit") {
            // A quarter of the price, rounded up once, as the cost's parts are.
            let quarter = stream_charged(r);
            assert!(
                (full / 4..=full / 4 + 1).contains(&quarter),
                "{quarter} of {full}"
            );
        }
    }
    let all: Vec<&Response> = replies.iter().collect();
    books::check(&gw.config_db(), &gw.user_id, initial, &ids(&all)).await;
    let total: i64 = replies.iter().map(stream_charged).sum();
    assert_eq!(initial - gw.balance(&gw.key).await, total);
}
