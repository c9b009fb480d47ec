//! Exact metering: what a request costs, what a failure costs (nothing), what a cut stream
//! costs (what was delivered), that concurrent requests never overdraw a balance, and that a
//! crashed instance's holds come back. Runs on SQLite, and on Postgres when
//! `TOLLGATE_TEST_DATABASE_URL` is set.

use std::time::{Duration, Instant};

use serde_json::{json, Value};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;
use tollgate_filters::tokens;
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

fn micros(credits: &Value) -> i64 {
    (credits.as_f64().unwrap() * 1_000_000.0).round() as i64
}

async fn balance(gw: &Gateway, key: &str) -> i64 {
    micros(&gw.me(key).await["credits"])
}

async fn usage(gw: &Gateway, key: &str) -> Value {
    let r = request(
        gw.addr,
        "GET",
        "/api/v1/usage",
        &[("Authorization", &format!("Bearer {key}"))],
        b"",
    )
    .await;
    assert_eq!(r.status, 200, "{}", r.text());
    r.json()
}

fn header_micros(r: &Response) -> i64 {
    let v: f64 = r
        .header("x-credits-remaining")
        .expect("X-Credits-Remaining")
        .parse()
        .unwrap();
    (v * 1_000_000.0).round() as i64
}

#[tokio::test]
async fn json_and_stream_are_charged_exactly_and_match_the_usage_row() {
    let (a, b) = (FakeOpenAi::start("a").await, FakeOpenAi::start("b").await);
    let gw = Gateway::start(tollgate_bin!(), &config(&a, &b)).await;
    let words = a.reply_words() as i64;
    let expected = FakeOpenAi::PROMPT_TOKENS as i64 * 1_000 + words * 2_000;

    let before = balance(&gw, &gw.key).await;
    let r = gw
        .chat(json!({"model":"cheap","messages":user("hi")}))
        .await;
    assert_eq!(r.status, 200);
    let after = balance(&gw, &gw.key).await;
    assert_eq!(before - after, expected);
    assert_eq!(
        header_micros(&r),
        after,
        "JSON: the header is the balance after settlement"
    );
    let u = usage(&gw, &gw.key).await;
    let row = &u["recent"][0];
    assert_eq!(row["request_id"], r.header("x-request-id").unwrap());
    assert_eq!(micros(&row["credits"]), expected);
    assert_eq!(row["prompt_tokens"], FakeOpenAi::PROMPT_TOKENS);
    assert_eq!(row["completion_tokens"], words);
    assert_eq!(row["model_used"], "cheap");
    assert_eq!(row["status"], 200);

    // Streamed: the same price, and the header shows the balance after the hold.
    let before = after;
    let r = gw
        .chat(json!({"model":"cheap","messages":user("hi"),"stream":true}))
        .await;
    assert_eq!(r.sse_data().last().unwrap(), "[DONE]");
    let after = balance(&gw, &gw.key).await;
    assert_eq!(before - after, expected, "streams are billed like JSON");
    assert!(
        header_micros(&r) < after,
        "stream header is the balance after the hold"
    );
    let u = usage(&gw, &gw.key).await;
    assert_eq!(micros(&u["recent"][0]["credits"]), expected);
    assert_eq!(u["by_model"][0]["model"], "cheap");
    assert_eq!(u["by_model"][0]["requests"], 2);
    assert_eq!(micros(&u["by_day"][0]["credits"]), 2 * expected);
}

#[tokio::test]
async fn after_failover_the_used_models_rate_is_charged() {
    let (a, b) = (FakeOpenAi::start("a").await, FakeOpenAi::start("b").await);
    let gw = Gateway::start(tollgate_bin!(), &config(&a, &b)).await;
    a.set_mode(Mode::Status(503));
    let words = b.reply_words() as i64;
    let before = balance(&gw, &gw.key).await;
    let r = gw
        .chat(json!({"model":"cheap","messages":user("hi")}))
        .await;
    assert_eq!(r.json()["model"], "dear");
    assert_eq!(
        before - balance(&gw, &gw.key).await,
        FakeOpenAi::PROMPT_TOKENS as i64 * 3_000 + words * 5_000
    );
}

#[tokio::test]
async fn a_failed_request_costs_nothing_but_is_recorded() {
    let (a, b) = (FakeOpenAi::start("a").await, FakeOpenAi::start("b").await);
    let gw = Gateway::start(tollgate_bin!(), &config(&a, &b)).await;
    a.set_mode(Mode::Status(500));
    b.set_mode(Mode::Status(502));
    let before = balance(&gw, &gw.key).await;
    let r = gw
        .chat(json!({"model":"cheap","messages":user("hi")}))
        .await;
    r.error(502, "upstream_error");
    assert_eq!(header_micros(&r), before);
    let r = gw
        .chat(json!({"model":"cheap","messages":user("hi"),"stream":true}))
        .await;
    r.error(502, "upstream_error");
    assert_eq!(balance(&gw, &gw.key).await, before);
    let u = usage(&gw, &gw.key).await;
    assert_eq!(u["recent"].as_array().unwrap().len(), 2);
    for row in u["recent"].as_array().unwrap() {
        assert_eq!(row["credits"], 0.0);
        assert_eq!(row["status"], 502);
    }
    // Invalid requests never get as far as a hold.
    gw.chat(json!({"model":"cheap","messages":[]}))
        .await
        .error(400, "invalid_request");
    assert_eq!(
        usage(&gw, &gw.key).await["recent"]
            .as_array()
            .unwrap()
            .len(),
        2
    );
}

#[tokio::test]
async fn client_gone_mid_stream_is_charged_for_what_was_delivered() {
    let (a, b) = (FakeOpenAi::start("a").await, FakeOpenAi::start("b").await);
    a.set_mode(Mode::Slow(Duration::from_millis(300)));
    let gw = Gateway::start(tollgate_bin!(), &config(&a, &b)).await;
    let before = balance(&gw, &gw.key).await;
    let body =
        serde_json::to_vec(&json!({"model":"cheap","messages":user("hi"),"stream":true})).unwrap();
    let mut s = TcpStream::connect(gw.addr).await.unwrap();
    let head = format!(
        "POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer {}\r\nContent-Length: {}\r\n\r\n",
        gw.key,
        body.len()
    );
    s.write_all(head.as_bytes()).await.unwrap();
    s.write_all(&body).await.unwrap();
    // Read until two content chunks have arrived, then hang up.
    let mut got = Vec::new();
    let mut buf = [0u8; 4096];
    while String::from_utf8_lossy(&got).matches("\"content\"").count() < 3 {
        let n = s.read(&mut buf).await.unwrap();
        assert!(n > 0);
        got.extend_from_slice(&buf[..n]);
    }
    drop(s);
    // Settlement happens when the gateway notices on its next write.
    let deadline = Instant::now() + Duration::from_secs(5);
    let row = loop {
        let u = usage(&gw, &gw.key).await;
        if let Some(r) = u["recent"].as_array().unwrap().first() {
            break r.clone();
        }
        assert!(
            Instant::now() < deadline,
            "no usage row after the client left"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    };
    let charged = before - balance(&gw, &gw.key).await;
    assert_eq!(
        charged,
        micros(&row["credits"]),
        "the usage row matches the balance"
    );
    let full = a.reply_words() as i64;
    let completion = row["completion_tokens"].as_i64().unwrap();
    assert!(
        completion >= 1 && completion < full,
        "charged {completion} of {full} tokens"
    );
    // Without an upstream usage chunk the gateway counted with the tokenizer.
    let prompt = tokens::count_prompt(&user("hi")) as i64;
    assert_eq!(row["prompt_tokens"], prompt);
    assert_eq!(charged, prompt * 1_000 + completion * 2_000);
}

#[tokio::test]
async fn max_tokens_is_lowered_to_what_the_balance_pays_and_402_below_one_token() {
    let (a, b) = (FakeOpenAi::start("a").await, FakeOpenAi::start("b").await);
    // b is the dearer candidate of the tier, so the hold uses its rates (3 in, 5 out).
    let gw = Gateway::start_opts(
        tollgate_bin!(),
        &config(&a, &b),
        Opts {
            credits: Some(0.1),
            ..Opts::default()
        },
    )
    .await;
    let r = gw
        .chat(json!({"model":"cheap","messages":user("hi"),"max_tokens":1000}))
        .await;
    assert_eq!(r.status, 200, "{}", r.text());
    let sent = a.requests()[0].json();
    let lowered = sent["max_tokens"].as_u64().unwrap();
    // 100,000 µcr; prompt estimate for "hi": ceil(2/3) + 8 + 3 = 12 tokens × 3,000 = 36,000;
    // the rest buys (100,000 − 36,000) / 5,000 = 12 output tokens.
    assert_eq!(lowered, 12);
    assert!(balance(&gw, &gw.key).await >= 0);

    // Almost nothing left: not even one output token → 402, nothing charged, no usage row.
    let (uid, key) = gw.signup(&unique_email()).await;
    gw.admin_credits(&uid, -99.96).await;
    let before = balance(&gw, &key).await;
    let r = gw
        .chat_as(Some(&key), &json!({"model":"cheap","messages":user("hi")}))
        .await;
    r.error(402, "insufficient_credits");
    assert_eq!(header_micros(&r), before);
    assert_eq!(balance(&gw, &key).await, before);
    assert!(usage(&gw, &key).await["recent"]
        .as_array()
        .unwrap()
        .is_empty());
}

#[tokio::test]
async fn two_hundred_concurrent_requests_on_two_instances_never_overdraw() {
    let a = FakeOpenAi::start("a").await;
    // One model, so the hold (12 estimated prompt tokens + 8 output = 28,000 µcr) is close to
    // the price (11 + 8 tokens = 27,000 µcr) and the balance covers about 50 requests.
    let per_request = 27_000i64;
    let initial = 50 * per_request + 5_000;
    let cfg = format!(
        "{FAST_TIMEOUTS}{}[[models]]\nid = \"cheap\"\nprovider = \"p1\"\ntier = \"economy\"\ninput_credits_per_1k = 1\noutput_credits_per_1k = 2\n",
        provider("p1", &[&a], "")
    );
    let one = Gateway::start_opts(
        tollgate_bin!(),
        &cfg,
        Opts {
            credits: Some(initial as f64 / 1e6),
            ..Opts::default()
        },
    )
    .await;
    let two = Gateway::start_opts(
        tollgate_bin!(),
        &cfg,
        Opts {
            database_url: Some(one.config_db()),
            no_account: true,
            ..Opts::default()
        },
    )
    .await;
    assert_eq!(balance(&one, &one.key).await, initial);
    let mut tasks = Vec::new();
    for i in 0..200 {
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
    let mut ok = 0;
    let mut refused = 0;
    for t in tasks {
        match t.await.unwrap() {
            200 => ok += 1,
            402 => refused += 1,
            s => panic!("unexpected status {s}"),
        }
    }
    let final_balance = balance(&one, &one.key).await;
    assert!(final_balance >= 0);
    assert!(refused > 0, "requests beyond the balance get 402");
    // About 50: the last few may be served with max_tokens lowered to what was left, so a
    // handful more than 50 can fit.
    assert!((45..=60).contains(&ok), "about 50 served, got {ok}");
    let admin = request(
        one.addr,
        "GET",
        &format!("/api/v1/admin/accounts/{}", one.user_id),
        &[("Authorization", &format!("Bearer {ADMIN_TOKEN}"))],
        b"",
    )
    .await
    .json();
    let spent = micros(&admin["credits_spent"]);
    assert_eq!(
        initial - final_balance,
        spent,
        "initial − final = sum of usage rows, exactly"
    );
    assert_eq!(admin["usage_rows"], ok, "one usage row per served request");
}

#[tokio::test]
async fn a_crashed_instances_hold_is_released_and_never_doubled() {
    let (a, b) = (FakeOpenAi::start("a").await, FakeOpenAi::start("b").await);
    a.set_mode(Mode::Slow(Duration::from_millis(400)));
    let cfg = config(&a, &b);
    let storage = "hold_ttl_secs = 1.5\nhold_reap_interval_secs = 0.3".to_string();
    let mut doomed = Gateway::start_opts(
        tollgate_bin!(),
        &cfg,
        Opts {
            storage: storage.clone(),
            ..Opts::default()
        },
    )
    .await;
    let survivor = Gateway::start_opts(
        tollgate_bin!(),
        &cfg,
        Opts {
            database_url: Some(doomed.config_db()),
            storage,
            no_account: true,
            ..Opts::default()
        },
    )
    .await;
    let key = doomed.key.clone();
    let initial = balance(&survivor, &key).await;

    let body =
        serde_json::to_vec(&json!({"model":"cheap","messages":user("hi"),"stream":true})).unwrap();
    let mut s = TcpStream::connect(doomed.addr).await.unwrap();
    let head = format!("POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer {key}\r\nContent-Length: {}\r\n\r\n", body.len());
    s.write_all(head.as_bytes()).await.unwrap();
    s.write_all(&body).await.unwrap();
    let mut buf = [0u8; 1024];
    let n = s.read(&mut buf).await.unwrap();
    assert!(String::from_utf8_lossy(&buf[..n]).starts_with("HTTP/1.1 200"));
    // The hold is visible from the other instance, then the instance dies mid-request.
    assert!(balance(&survivor, &key).await < initial);
    doomed.child.kill().unwrap();
    doomed.child.wait().unwrap();

    let t = Instant::now();
    while balance(&survivor, &key).await != initial {
        assert!(
            t.elapsed() < Duration::from_secs(8),
            "hold not released: {}",
            survivor.log()
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    tokio::time::sleep(Duration::from_millis(800)).await;
    assert_eq!(
        balance(&survivor, &key).await,
        initial,
        "refunded once, not twice"
    );
    assert!(
        usage(&survivor, &key).await["recent"]
            .as_array()
            .unwrap()
            .is_empty(),
        "no usage row for the dead request"
    );
}

/// `tollgate_credit_holds_total{where="…"}` from the instance's metrics.
async fn holds_by(gw: &Gateway, place: &str) -> i64 {
    let text = get(gw.metrics_addr, "/metrics").await.text();
    let prefix = format!("tollgate_credit_holds_total{{where=\"{place}\"}} ");
    text.lines()
        .find_map(|l| l.strip_prefix(&prefix))
        .map_or(0, |v| v.trim().parse().unwrap())
}

async fn admin_view(gw: &Gateway, user_id: &str) -> Value {
    request(
        gw.addr,
        "GET",
        &format!("/api/v1/admin/accounts/{user_id}"),
        &[("Authorization", &format!("Bearer {ADMIN_TOKEN}"))],
        b"",
    )
    .await
    .json()
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
            storage: storage.clone(),
            ..Opts::default()
        },
    )
    .await;
    let two = Gateway::start_opts(
        tollgate_bin!(),
        &cfg,
        Opts {
            database_url: Some(one.config_db()),
            storage,
            no_account: true,
            ..Opts::default()
        },
    )
    .await;
    let initial = balance(&one, &one.key).await;
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
    let view = admin_view(&one, &one.user_id).await;
    assert!(micros(&view["credits"]) <= initial - micros(&view["credits_spent"]));

    // Idle leases go back: then the balance is exactly the initial one less every usage row,
    // one row per request, on both instances.
    let t = Instant::now();
    loop {
        let (v1, v2) = (
            admin_view(&one, &one.user_id).await,
            admin_view(&two, &one.user_id).await,
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
    let left = balance(&gw, &gw.key).await;
    assert_eq!(left, 1_000_000_000 - 27_000);
    // Debit everything: the lease is returned first, so all of it is there to debit.
    let v = gw.admin_credits(&gw.user_id, -(left as f64) / 1e6).await;
    assert_eq!(micros(&v["credits"]), 0);
    let r = gw
        .chat(json!({"model":"cheap","messages":user("hi"),"max_tokens":8}))
        .await;
    r.error(402, "insufficient_credits");
    assert_eq!(balance(&gw, &gw.key).await, 0);
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
            storage: storage.clone(),
            ..Opts::default()
        },
    )
    .await;
    let two = Gateway::start_opts(
        tollgate_bin!(),
        &cfg,
        Opts {
            database_url: Some(one.config_db()),
            storage,
            no_account: true,
            ..Opts::default()
        },
    )
    .await;
    let initial = balance(&two, &one.key).await;
    for _ in 0..5 {
        let r = one
            .chat(json!({"model":"cheap","messages":user("hi"),"max_tokens":8}))
            .await;
        assert_eq!(r.status, 200);
    }
    assert!(holds_by(&one, "lease").await >= 4);
    assert!(
        balance(&two, &one.key).await < initial - 5 * 27_000,
        "the other instance sees the lease as held"
    );
    one.signal("TERM");
    one.child.wait().unwrap();
    assert_eq!(
        balance(&two, &one.key).await,
        initial - 5 * 27_000,
        "the lease came back at shutdown, less exactly what was used"
    );
    assert_eq!(admin_view(&two, &one.user_id).await["usage_rows"], 5);
}

fn lease_round<'a>(
    lease: &'a str,
    account: &'a str,
    rows: &'a [(tollgate::store::Settlement, i64)],
    topup: i64,
    give_back: i64,
    release: bool,
) -> tollgate::store::LeaseRound<'a> {
    tollgate::store::LeaseRound {
        lease_id: lease,
        account_id: account,
        rows,
        topup,
        topup_min_balance: topup * 4,
        release,
        give_back,
        expires_at: LEASE_EXPIRY,
    }
}

const LEASE_EXPIRY: i64 = 1 << 50;

/// The lease round itself, on whichever store the tests run against: a retried batch is not
/// charged twice, giving back and topping up move exact amounts, and a lease the reaper already
/// refunded has its batch charged to the balance (clamped), once.
#[tokio::test]
async fn lease_rounds_are_idempotent_and_survive_a_reaped_lease() {
    use tollgate::store::{Ledger, Settlement};
    use tollgate_filters::credits::HoldPlan;
    let dir = temp_dir();
    let ledger = Ledger::connect(&database_url(&dir)).await.unwrap();
    let account = format!("usr_{}", unique_email().replace(['@', '.', '+'], "_"));
    ledger
        .create_account(&account, None, None, 1_000_000, None, 0)
        .await
        .unwrap()
        .unwrap();
    let lease = format!("lease_test_{account}");
    let plan = HoldPlan {
        prompt_cost: 0,
        wanted: 100_000,
        minimum: 400_000,
        output_per_1k: 0,
    };
    assert_eq!(
        ledger
            .hold(&lease, &account, &plan, LEASE_EXPIRY)
            .await
            .unwrap(),
        Some((100_000, 900_000))
    );
    let row = |id: String, cost: i64| {
        (
            Settlement {
                hold_id: id.clone(),
                request_id: id,
                account_id: account.clone(),
                key_id: None,
                model_requested: "m".into(),
                model_used: Some("m".into()),
                provider: Some("p".into()),
                prompt_tokens: 1,
                completion_tokens: 1,
                cost,
                status: 200,
                latency_ms: 1,
                now_ms: 1,
            },
            0,
        )
    };
    let rows = vec![
        row(format!("{account}_r1"), 7_000),
        row(format!("{account}_r2"), 3_000),
    ];
    let r = |rows, topup, give_back, release| {
        lease_round(&lease, &account, rows, topup, give_back, release)
    };
    let first = ledger.lease_sync(&r(&rows, 0, 0, false)).await.unwrap();
    assert_eq!(
        (first.charged, first.balance, first.lost),
        (10_000, 900_000, false)
    );
    // The same batch again (a commit whose acknowledgement was lost): nothing charged twice.
    let again = ledger.lease_sync(&r(&rows, 0, 0, false)).await.unwrap();
    assert_eq!(again.charged, 0);
    assert_eq!(ledger.usage_totals(&account).await.unwrap(), (2, 10_000));
    // Top up 50,000 (the balance keeps at least 4× that), then give 20,000 back: the lease
    // now holds 100,000 − 10,000 + 50,000 − 20,000 = 120,000.
    let up = ledger.lease_sync(&r(&[], 50_000, 0, false)).await.unwrap();
    assert_eq!((up.topped_up, up.balance), (50_000, 850_000));
    let back = ledger.lease_sync(&r(&[], 0, 20_000, false)).await.unwrap();
    assert_eq!(back.balance, 870_000);
    // A top-up the balance cannot cover four times over is refused and moves nothing.
    let refused = ledger.lease_sync(&r(&[], 300_000, 0, false)).await.unwrap();
    assert_eq!((refused.topped_up, refused.balance), (0, 870_000));

    // The reaper refunds the lease (as if this instance had stalled past its expiry): all
    // 120,000 come back; a later batch is then charged to the balance directly, once.
    // Only this lease is made to expire (the database may be shared with other tests' holds).
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_millis() as i64;
    let expire = tollgate::store::LeaseRound {
        expires_at: now - 1,
        ..r(&[], 0, 0, false)
    };
    ledger.lease_sync(&expire).await.unwrap();
    assert!(ledger.release_expired_holds(now).await.unwrap() >= 1);
    assert_eq!(
        ledger.account(&account).await.unwrap().unwrap().balance,
        990_000
    );
    let late = vec![row(format!("{account}_r3"), 5_000)];
    let lost = ledger.lease_sync(&r(&late, 0, 0, true)).await.unwrap();
    assert!(lost.lost);
    assert_eq!(lost.balance, 985_000);
    assert_eq!(ledger.usage_totals(&account).await.unwrap(), (3, 15_000));
    assert_eq!(
        1_000_000 - lost.balance,
        15_000,
        "initial − final = sum of usage rows"
    );
}
