//! Who and what the cache serves: one wallet's entries only, nothing with `no-store` or `off`,
//! a sampled request only when it asked itself; opted in by header, body extension or key.

use serde_json::json;
use tollgate_testkit::*;

use crate::common::*;

#[tokio::test]
async fn another_account_never_hits_an_entry() {
    let fake = FakeOpenAi::start("p").await;
    let gw = gateway(&fake, "").await;
    let b = body("A question two accounts ask", false);
    let mine = chat(&gw, &gw.key, &b, ON).await;
    assert_eq!(said(&mine), Some("miss"));
    let (other_user, other) = account(&gw).await;
    let initial = gw.balance(&other).await;
    let theirs = chat(&gw, &other, &b, ON).await;
    assert_eq!(theirs.status, 200, "{}", theirs.text());
    assert_eq!(said(&theirs), Some("miss"));
    assert_eq!(fake.chat_count(), 2);
    assert_eq!(charged(&theirs), charged(&mine), "charged in full");
    // Each now hits its own.
    let again = chat(&gw, &other, &b, ON).await;
    assert_eq!(said(&again), Some("hit"));
    assert_eq!(said(&chat(&gw, &gw.key, &b, ON).await), Some("hit"));
    assert_eq!(fake.chat_count(), 2);
    books::check(
        &gw.config_db(),
        &other_user,
        initial,
        &ids(&[&theirs, &again]),
    )
    .await;
}

#[tokio::test]
async fn no_store_is_neither_read_nor_written() {
    let fake = FakeOpenAi::start("p").await;
    let gw = gateway(&fake, "").await;
    let b = body("Keep this out of any cache", false);
    let no_store: &[(&str, &str)] = &[("X-Tollgate-Cache", "on"), ("Cache-Control", "no-store")];
    let r = chat(&gw, &gw.key, &b, no_store).await;
    assert_eq!(r.status, 200);
    assert_eq!(said(&r), Some("bypass"));
    // Not written: the next opted-in request misses.
    assert_eq!(said(&chat(&gw, &gw.key, &b, ON).await), Some("miss"));
    assert_eq!(fake.chat_count(), 2);
    // Not read: stored now, but no-store goes upstream.
    assert_eq!(
        said(&chat(&gw, &gw.key, &b, no_store).await),
        Some("bypass")
    );
    assert_eq!(fake.chat_count(), 3);
    assert!(chat(&gw, &gw.key, &b, no_store)
        .await
        .header("age")
        .is_none());
}

#[tokio::test]
async fn the_key_setting_opts_in_and_a_sampled_request_needs_its_own_ask() {
    let fake = FakeOpenAi::start("p").await;
    let gw = gateway(&fake, "").await;
    let r = gw
        .api_as(
            &gw.key,
            "POST",
            "/api/v1/keys",
            &json!({"name": "cached", "response_cache": true}),
        )
        .await;
    assert_eq!(r.status, 201, "{}", r.text());
    assert_eq!(r.json()["response_cache"], true);
    let key = r.json()["key"].as_str().unwrap().to_owned();
    let b = body("Cached by the key", false);
    assert_eq!(said(&chat(&gw, &key, &b, &[]).await), Some("miss"));
    assert_eq!(said(&chat(&gw, &key, &b, &[]).await), Some("hit"));
    assert_eq!(fake.chat_count(), 1);
    // The request says off: no cache.
    let off = chat(&gw, &key, &b, &[("X-Tollgate-Cache", "off")]).await;
    assert_eq!(said(&off), None);
    assert_eq!(fake.chat_count(), 2);
    // Sampled: the key alone does not cache it, the request's own ask does.
    let mut sampled = body("Cached by the key", false);
    sampled["temperature"] = json!(0.7);
    assert_eq!(said(&chat(&gw, &key, &sampled, &[]).await), Some("bypass"));
    assert_eq!(said(&chat(&gw, &key, &sampled, &[]).await), Some("bypass"));
    assert_eq!(fake.chat_count(), 4);
    assert_eq!(said(&chat(&gw, &key, &sampled, ON).await), Some("miss"));
    assert_eq!(said(&chat(&gw, &key, &sampled, ON).await), Some("hit"));
    assert_eq!(fake.chat_count(), 5);
    // Temperature 0 is not sampled.
    let mut greedy = body("Cached by the key", false);
    greedy["temperature"] = json!(0);
    assert_eq!(said(&chat(&gw, &key, &greedy, &[]).await), Some("miss"));
    // The setting is shown, and turned off.
    let id = r.json()["id"].as_str().unwrap().to_owned();
    let p = gw
        .api_as(
            &gw.key,
            "PATCH",
            &format!("/api/v1/keys/{id}"),
            &json!({"response_cache": false}),
        )
        .await;
    assert_eq!(p.status, 200, "{}", p.text());
    assert_eq!(p.json()["response_cache"], false);
}

#[tokio::test]
async fn the_body_extension_opts_in_and_member_order_does_not_matter() {
    let fake = FakeOpenAi::start("p").await;
    let gw = gateway(&fake, "").await;
    let a: serde_json::Value = serde_json::from_str(
        r#"{"model":"m","max_tokens":200,"messages":[{"role":"user","content":"order"}],"tollgate":{"cache":true}}"#,
    )
    .unwrap();
    let first = chat(&gw, &gw.key, &a, &[]).await;
    assert_eq!(first.status, 200, "{}", first.text());
    assert_eq!(said(&first), Some("miss"));
    // Members in another order, a `user` label: the same entry.
    let raw = br#"{"tollgate":{"cache":true},"user":"someone","messages":[{"content":"order","role":"user"}],"max_tokens":200,"model":"m"}"#;
    let auth = format!("Bearer {}", gw.key);
    let h = [
        ("Content-Type", "application/json"),
        ("Authorization", auth.as_str()),
    ];
    let second = request(gw.addr, "POST", "/v1/chat/completions", &h, raw).await;
    assert_eq!(said(&second), Some("hit"), "{}", second.text());
    assert_eq!(fake.chat_count(), 1);
    // The provider never sees the extension.
    assert!(fake.requests()[0].json().get("tollgate").is_none());
}
