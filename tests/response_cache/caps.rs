//! An entry's life and size: gone after `ttl_secs` (seen by an instance whose clock moved
//! on, sharing the first's ledger and Redis), never stored over `max_entry_bytes`, the oldest
//! evicted past `max_total_bytes`.

use tollgate_testkit::*;

use crate::common::*;

#[tokio::test]
async fn an_entry_expires_after_its_ttl() {
    let fake = FakeOpenAi::start("p").await;
    let section = "ttl_secs = 60";
    let gw = gateway(&fake, section).await;
    let b = body("Ask me again in two minutes", false);
    assert_eq!(said(&chat(&gw, &gw.key, &b, ON).await), Some("miss"));
    assert_eq!(said(&chat(&gw, &gw.key, &b, ON).await), Some("hit"));
    assert_eq!(fake.chat_count(), 1);
    // Another instance of the deployment, its clock 30 s on: still fresh.
    let later = |ms: &str| Opts {
        database_url: Some(gw.config_db()),
        redis_prefix: gw.redis_prefix(),
        no_account: true,
        env: vec![("TOLLGATE_CLOCK_OFFSET_MS".into(), ms.into())],
        ..Opts::default()
    };
    let soon = Gateway::start_opts(tollgate_bin!(), &config(&fake, section), later("30000")).await;
    let r = chat(&soon, &gw.key, &b, ON).await;
    assert_eq!(said(&r), Some("hit"), "{}", r.text());
    let age: i64 = r.header("age").unwrap().parse().unwrap();
    assert!((30..40).contains(&age), "Age {age}");
    assert_eq!(fake.chat_count(), 1);
    // Two minutes on: expired, fetched again.
    let past = Gateway::start_opts(tollgate_bin!(), &config(&fake, section), later("120000")).await;
    let r = chat(&past, &gw.key, &b, ON).await;
    assert_eq!(r.status, 200, "{}", r.text());
    assert_eq!(said(&r), Some("miss"));
    assert_eq!(fake.chat_count(), 2);
}

#[tokio::test]
async fn a_reply_over_max_entry_bytes_is_not_stored() {
    // About 2 KB of reply: over the entry cap.
    let fake = FakeOpenAi::builder("p").words(300).start().await;
    let gw = gateway(&fake, "max_entry_bytes = 1024").await;
    let mut b = body("A long answer", false);
    b["max_tokens"] = serde_json::json!(1000);
    for _ in 0..2 {
        let r = chat(&gw, &gw.key, &b, ON).await;
        assert_eq!(r.status, 200, "{}", r.text());
        assert_eq!(said(&r), Some("miss"));
    }
    assert_eq!(fake.chat_count(), 2);
    // The stream of the same reply is over it too.
    let mut s = body("A long answer", true);
    s["max_tokens"] = serde_json::json!(1000);
    for _ in 0..2 {
        assert_eq!(said(&chat(&gw, &gw.key, &s, ON).await), Some("miss"));
    }
    assert_eq!(fake.chat_count(), 4);
}

#[tokio::test]
async fn past_max_total_bytes_the_oldest_entry_is_evicted() {
    // Each entry is over half of the total cap (about 800 bytes of 1024): one fits.
    let fake = FakeOpenAi::builder("p").words(60).start().await;
    let gw = gateway(&fake, "max_entry_bytes = 1024\nmax_total_bytes = 1024").await;
    let a = body("first question", false);
    let b = body("second question", false);
    assert_eq!(said(&chat(&gw, &gw.key, &a, ON).await), Some("miss"));
    assert_eq!(
        said(&chat(&gw, &gw.key, &a, ON).await),
        Some("hit"),
        "one entry fits"
    );
    assert_eq!(said(&chat(&gw, &gw.key, &b, ON).await), Some("miss"));
    assert_eq!(
        said(&chat(&gw, &gw.key, &b, ON).await),
        Some("hit"),
        "the newest is kept"
    );
    assert_eq!(
        said(&chat(&gw, &gw.key, &a, ON).await),
        Some("miss"),
        "the oldest was evicted"
    );
    assert_eq!(fake.chat_count(), 3);
}
