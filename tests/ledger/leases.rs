//! Credit leases: an instance holds a slice of an account's balance and meters requests from it
//! without a database round trip each. Exact on two instances, returned when idle, when an admin
//! debit needs it, and at shutdown. Runs on SQLite, and on Postgres when
//! `TOLLGATE_TEST_DATABASE_URL` is set.

use std::time::{Duration, Instant};

use serde_json::json;
use tollgate_testkit::books;
use tollgate_testkit::*;

/// Rates that make the arithmetic exact: 1 credit / 1K input tokens (1,000 µcr a token) and
/// 2 credits / 1K output tokens (2,000 µcr a token) for `cheap`; 3 and 5 for `dear`.
fn config(primary: &FakeOpenAi, secondary: &FakeOpenAi) -> String {
    format!(
        "{FAST_TIMEOUTS}{}{}{}{}",
        provider("p1", &[primary], ""),
        provider("p2", &[secondary], ""),
        "[[models]]\nid = \"cheap\"\nprovider = \"p1\"\ntier = \"economy\"\ninput_credits_per_1k = 1\noutput_credits_per_1k = 2\nmax_output_tokens = 1000\n\n",
        "[[models]]\nid = \"dear\"\nprovider = \"p2\"\ntier = \"economy\"\ninput_credits_per_1k = 3\noutput_credits_per_1k = 5\nmax_output_tokens = 1000\n\n",
    )
}

/// `tollgate_credit_holds_total{where="…"}` from the instance's metrics.
async fn holds_by(gw: &Gateway, place: &str) -> i64 {
    let text = get(gw.metrics_addr, "/metrics").await.text();
    let prefix = format!("tollgate_credit_holds_total{{where=\"{place}\"}} ");
    text.lines()
        .find_map(|l| l.strip_prefix(&prefix))
        .map_or(0, |v| v.trim().parse().unwrap())
}

#[tokio::test]
async fn leased_credits_on_two_instances_are_exact_and_come_back_when_idle() {
    let (a, b) = (FakeOpenAi::start("a").await, FakeOpenAi::start("b").await);
    let cfg = config(&a, &b);
    let storage = "lease_holds = 16\nlease_idle_secs = 0.5\nlease_sync_ms = 10".to_string();
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
    let initial = one.balance(&one.key).await;
    let mut tasks = Vec::new();
    for i in 0..300 {
        let addr = if i % 2 == 0 { one.addr } else { two.addr };
        let key = one.key.clone();
        tasks.push(tokio::spawn(async move {
            let body = serde_json::to_vec(
                &json!({"model":"cheap","messages":user("hi"),"max_tokens":8,"stream": i % 3 == 0}),
            )
            .unwrap();
            request(
                addr,
                "POST",
                "/v1/chat/completions",
                &[("Authorization", &format!("Bearer {key}"))],
                &body,
            )
            .await
            .status
        }));
    }
    for t in tasks {
        assert_eq!(t.await.unwrap(), 200);
    }
    // Both instances metered from leases (the first request of each may hold in the database
    // while its lease is taken).
    let (l1, l2) = (holds_by(&one, "lease").await, holds_by(&two, "lease").await);
    let (d1, d2) = (
        holds_by(&one, "database").await,
        holds_by(&two, "database").await,
    );
    assert_eq!(l1 + l2 + d1 + d2, 300);
    assert!(l1 >= 140 && l2 >= 140, "leases used: {l1} + {l2}");

    // Each instance's view is exact for what it metered: its pending rows are written first,
    // and the other's unspent lease shows as held.
    let view = one.admin_account(&one.user_id).await;
    assert!(micros(&view["credits"]) <= initial - micros(&view["credits_spent"]));

    // Idle leases go back: then the balance is exactly the initial one less every usage row,
    // one row per request, on both instances.
    let t = Instant::now();
    loop {
        let (v1, v2) = (
            one.admin_account(&one.user_id).await,
            two.admin_account(&one.user_id).await,
        );
        let spent = micros(&v1["credits_spent"]);
        if v1["usage_rows"] == 300
            && micros(&v1["credits"]) == initial - spent
            && micros(&v2["credits"]) == initial - spent
        {
            assert_eq!(spent, 300 * 27_000, "11 prompt + 8 completion tokens each");
            break;
        }
        assert!(
            t.elapsed() < Duration::from_secs(8),
            "leases not returned: {v1} {v2}"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

#[tokio::test]
async fn an_admin_debit_can_take_credits_this_instance_leases() {
    let (a, b) = (FakeOpenAi::start("a").await, FakeOpenAi::start("b").await);
    let gw = Gateway::start_opts(
        tollgate_bin!(),
        &config(&a, &b),
        Opts {
            storage: "lease_holds = 64".into(),
            credits: Some(1_000.0),
            ..Opts::default()
        },
    )
    .await;
    let r = gw
        .chat(json!({"model":"cheap","messages":user("hi"),"max_tokens":8}))
        .await;
    assert_eq!(r.status, 200);
    assert!(holds_by(&gw, "lease").await >= 1 || holds_by(&gw, "database").await == 1);
    let left = gw.balance(&gw.key).await;
    assert_eq!(left, 1_000_000_000 - 27_000);
    // Debit everything: the lease is returned first, so all of it is there to debit.
    let v = gw.admin_credits(&gw.user_id, -(left as f64) / 1e6).await;
    assert_eq!(micros(&v["credits"]), 0);
    let r = gw
        .chat(json!({"model":"cheap","messages":user("hi"),"max_tokens":8}))
        .await;
    r.error(402, "insufficient_credits");
    assert_eq!(gw.balance(&gw.key).await, 0);
}

#[tokio::test]
async fn a_stopped_instance_returns_its_lease_at_once() {
    let (a, b) = (FakeOpenAi::start("a").await, FakeOpenAi::start("b").await);
    let cfg = config(&a, &b);
    // Leases would otherwise stay out for 30 s after a crash and 600 s when idle.
    let storage = "lease_idle_secs = 600".to_string();
    let mut one = Gateway::start_opts(
        tollgate_bin!(),
        &cfg,
        Opts {
            storage,
            ..Opts::default()
        },
    )
    .await;
    let two = one.second(tollgate_bin!(), &cfg).await;
    let initial = two.balance(&one.key).await;
    for _ in 0..5 {
        let r = one
            .chat(json!({"model":"cheap","messages":user("hi"),"max_tokens":8}))
            .await;
        assert_eq!(r.status, 200);
    }
    assert!(holds_by(&one, "lease").await >= 4);
    // One balance: the other instance counts the lease's unspent part as the account's
    // (stale by at most one lease round).
    tokio::time::sleep(Duration::from_millis(200)).await;
    assert_eq!(two.balance(&one.key).await, initial - 5 * 27_000);
    assert_eq!(books::lease_rows(&one.config_db(), &one.user_id).await, 1);
    one.signal("TERM");
    one.child.wait().unwrap();
    assert_eq!(
        books::lease_rows(&one.config_db(), &one.user_id).await,
        0,
        "the lease went back at shutdown"
    );
    assert_eq!(
        two.balance(&one.key).await,
        initial - 5 * 27_000,
        "the lease came back at shutdown, less exactly what was used"
    );
    assert_eq!(two.admin_account(&one.user_id).await["usage_rows"], 5);
}

#[tokio::test]
async fn a_stream_in_flight_at_sigterm_is_charged_before_the_lease_goes_back() {
    let (a, b) = (FakeOpenAi::start("a").await, FakeOpenAi::start("b").await);
    // The fake's reply, a word every 700 ms: a stream of about 5 seconds.
    assert!(a.reply_words() >= 7, "{} words", a.reply_words());
    a.set_mode(Mode::Slow(Duration::from_millis(700)));
    let cfg = config(&a, &b);
    let mut one = Gateway::start_opts(
        tollgate_bin!(),
        &cfg,
        Opts {
            // Pingora serves requests in flight for the grace period: long enough here.
            grace_secs: Some(8),
            ..Opts::default()
        },
    )
    .await;
    let two = one.second(tollgate_bin!(), &cfg).await;
    let initial = two.balance(&one.key).await;
    let (addr, key) = (one.addr, one.key.clone());
    let stream = tokio::spawn(async move {
        let body =
            serde_json::to_vec(&json!({"model":"cheap","messages":user("hi"),"stream":true}))
                .unwrap();
        let auth = format!("Bearer {key}");
        request(
            addr,
            "POST",
            "/v1/chat/completions",
            &[("Authorization", &auth)],
            &body,
        )
        .await
    });
    tokio::time::sleep(Duration::from_secs(1)).await;
    one.signal("TERM");
    let r = stream.await.unwrap();
    assert_eq!(r.status, 200);
    assert_eq!(r.sse_data().last().map(String::as_str), Some("[DONE]"));
    one.child.wait().unwrap();
    // The instance is gone; its usage row was written and its lease returned less exactly that.
    let account = two.admin_account(&one.user_id).await;
    assert_eq!(account["usage_rows"], 1, "{account}");
    let spent = micros(&account["credits_spent"]);
    assert!(spent > 0);
    assert_eq!(two.balance(&one.key).await, initial - spent);
}
