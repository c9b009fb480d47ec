//! A repeated request is answered from the cache: no provider call, the same body or stream
//! events, charged its configured fraction of the list price, marked in usage, counted in
//! the savings, and the books balance.

use serde_json::json;
use tollgate_testkit::*;

use crate::common::*;

#[tokio::test]
async fn a_repeated_request_is_answered_from_the_cache_without_a_provider_call() {
    let fake = FakeOpenAi::start("p").await;
    let gw = gateway(&fake, "").await;
    let initial = gw.balance(&gw.key).await;
    let b = body("What is the capital of France?", false);
    let first = chat(&gw, &gw.key, &b, ON).await;
    assert_eq!(first.status, 200, "{}", first.text());
    assert_eq!(said(&first), Some("miss"));
    let cost = charged(&first);
    assert!(cost > 0);
    let second = chat(&gw, &gw.key, &b, ON).await;
    assert_eq!(second.status, 200, "{}", second.text());
    assert_eq!(said(&second), Some("hit"));
    assert!(second.header("age").is_some());
    assert_eq!(fake.chat_count(), 1, "a hit calls no provider");
    assert_eq!(without_cost(&first), without_cost(&second));
    // The default fraction: a hit is free, and its reply says so.
    assert_eq!(charged(&second), 0);
    assert_eq!(micros(&second.json()["usage"]["cost"]), 0);
    // Not opted in: no header, a provider call.
    let plain = chat(&gw, &gw.key, &b, &[]).await;
    assert_eq!(said(&plain), None);
    assert_eq!(fake.chat_count(), 2);
    let counted = |r: &str| format!("tollgate_response_cache_total{{result=\"{r}\"}}");
    assert_eq!(gw.metric(&counted("hit")).await, 1.0);
    assert_eq!(gw.metric(&counted("miss")).await, 1.0);

    let usage = gw.usage(&gw.key).await;
    let hit = usage["recent"]
        .as_array()
        .unwrap()
        .iter()
        .find(|r| r["request_id"] == second.header("x-request-id").unwrap())
        .expect("the hit's usage row")
        .clone();
    assert_eq!(hit["cache_hit"], true, "{hit}");
    assert_eq!(micros(&hit["credits"]), 0);
    assert_eq!(micros(&hit["saved"]), cost);
    let savings = &usage["savings"];
    assert_eq!(savings["response_cache_hits"], 1, "{savings}");
    assert_eq!(micros(&savings["response_cache"]), cost, "{savings}");
    books::check(
        &gw.config_db(),
        &gw.user_id,
        initial,
        &ids(&[&first, &second, &plain]),
    )
    .await;
}

#[tokio::test]
async fn a_hit_is_charged_its_configured_fraction_of_the_list_price() {
    let fake = FakeOpenAi::start("p").await;
    let gw = gateway(&fake, "charge_fraction = 0.5").await;
    let initial = gw.balance(&gw.key).await;
    let b = body("Half price, please", false);
    let first = chat(&gw, &gw.key, &b, ON).await;
    let second = chat(&gw, &gw.key, &b, ON).await;
    assert_eq!(said(&second), Some("hit"));
    assert_eq!(fake.chat_count(), 1);
    // The model's rates are whole credits per 1K tokens: half of the price is exact.
    let cost = charged(&first);
    assert_eq!(charged(&second), cost / 2, "miss {cost}");
    assert_eq!(micros(&second.json()["usage"]["cost"]), cost / 2);
    let details = &second.json()["usage"]["cost_details"];
    assert_eq!(
        micros(&details["input"]) + micros(&details["output"]),
        cost / 2,
        "{details}"
    );
    assert_eq!(gw.balance(&gw.key).await, initial - cost - cost / 2);
    let savings = &gw.usage(&gw.key).await["savings"];
    assert_eq!(
        micros(&savings["response_cache"]),
        cost - cost / 2,
        "{savings}"
    );
    books::check(
        &gw.config_db(),
        &gw.user_id,
        initial,
        &ids(&[&first, &second]),
    )
    .await;
}

#[tokio::test]
async fn a_cached_stream_is_replayed_as_a_stream() {
    let fake = FakeOpenAi::start("p").await;
    let gw = gateway(&fake, "charge_fraction = 0.5").await;
    let initial = gw.balance(&gw.key).await;
    let b = body("Stream me a greeting", true);
    let first = chat(&gw, &gw.key, &b, ON).await;
    assert_eq!(first.status, 200, "{}", first.text());
    assert_eq!(said(&first), Some("miss"));
    let second = chat(&gw, &gw.key, &b, ON).await;
    assert_eq!(second.status, 200, "{}", second.text());
    assert_eq!(said(&second), Some("hit"));
    assert!(second
        .header("content-type")
        .is_some_and(|t| t.starts_with("text/event-stream")));
    assert_eq!(fake.chat_count(), 1);
    let events = events_without_cost(&second);
    assert_eq!(events_without_cost(&first), events);
    assert!(events.len() > 3, "{events:?}");
    assert_eq!(events.last().map(String::as_str), Some("[DONE]"));
    let cost = stream_charged(&first);
    assert_eq!(stream_charged(&second), cost / 2);
    // A JSON request of the same body is another entry.
    let json_reply = chat(&gw, &gw.key, &body("Stream me a greeting", false), ON).await;
    assert_eq!(said(&json_reply), Some("miss"));
    assert_eq!(fake.chat_count(), 2);
    books::check(
        &gw.config_db(),
        &gw.user_id,
        initial,
        &ids(&[&first, &second, &json_reply]),
    )
    .await;
}

#[tokio::test]
async fn the_messages_door_replays_its_own_events() {
    let fake = FakeOpenAi::start("p").await;
    let gw = gateway(&fake, "").await;
    let b = json!({"model": "m", "max_tokens": 100, "stream": true,
                   "messages": [{"role": "user", "content": "Hello over Messages"}],
                   "tollgate": {"cache": true}});
    let first = post(&gw, &gw.key, "/v1/messages", &b, &[]).await;
    assert_eq!(first.status, 200, "{}", first.text());
    assert_eq!(said(&first), Some("miss"));
    let second = post(&gw, &gw.key, "/v1/messages", &b, &[]).await;
    assert_eq!(said(&second), Some("hit"), "{}", second.text());
    assert_eq!(fake.chat_count(), 1);
    assert!(
        second.text().contains("event: message_stop"),
        "{}",
        second.text()
    );
    assert_eq!(events_without_cost(&first), events_without_cost(&second));
    // The same question over chat completions is another door's entry.
    let chat_reply = chat(&gw, &gw.key, &body("Hello over Messages", true), ON).await;
    assert_eq!(said(&chat_reply), Some("miss"));
}
