//! Exact metering: what a request costs, what a failure costs (nothing), what a cut stream
//! costs (what was delivered), that concurrent requests never overdraw a balance, and that a
//! crashed instance's holds come back. Runs on SQLite, and on Postgres when
//! `TOLLGATE_TEST_DATABASE_URL` is set.

use std::time::{Duration, Instant};

use serde_json::json;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;
use tollgate_filters::tokens;
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

/// The gateway's prompt estimate for a request body: a token per 3 bytes, as the testkit sends
/// it (`serde_json::to_vec`).
fn estimate(body: &serde_json::Value) -> i64 {
    (serde_json::to_vec(body).unwrap().len() as i64 + 2) / 3
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

    let before = gw.balance(&gw.key).await;
    let r = gw
        .chat(json!({"model":"cheap","messages":user("hi")}))
        .await;
    assert_eq!(r.status, 200);
    let after = gw.balance(&gw.key).await;
    assert_eq!(before - after, expected);
    assert_eq!(
        header_micros(&r),
        after,
        "JSON: the header is the balance after settlement"
    );
    let u = gw.usage(&gw.key).await;
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
    let after = gw.balance(&gw.key).await;
    assert_eq!(before - after, expected, "streams are billed like JSON");
    assert!(
        header_micros(&r) < after,
        "stream header is the balance after the hold"
    );
    let u = gw.usage(&gw.key).await;
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
    let before = gw.balance(&gw.key).await;
    let r = gw
        .chat(json!({"model":"cheap","messages":user("hi")}))
        .await;
    assert_eq!(r.json()["model"], "dear");
    assert_eq!(
        before - gw.balance(&gw.key).await,
        FakeOpenAi::PROMPT_TOKENS as i64 * 3_000 + words * 5_000
    );
}

#[tokio::test]
async fn a_failed_request_costs_nothing_but_is_recorded() {
    let (a, b) = (FakeOpenAi::start("a").await, FakeOpenAi::start("b").await);
    let gw = Gateway::start(tollgate_bin!(), &config(&a, &b)).await;
    a.set_mode(Mode::Status(500));
    b.set_mode(Mode::Status(502));
    let before = gw.balance(&gw.key).await;
    let r = gw
        .chat(json!({"model":"cheap","messages":user("hi")}))
        .await;
    r.error(502, "upstream_error");
    assert_eq!(header_micros(&r), before);
    let r = gw
        .chat(json!({"model":"cheap","messages":user("hi"),"stream":true}))
        .await;
    r.error(502, "upstream_error");
    assert_eq!(gw.balance(&gw.key).await, before);
    let u = gw.usage(&gw.key).await;
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
        gw.usage(&gw.key).await["recent"].as_array().unwrap().len(),
        2
    );
}

#[tokio::test]
async fn a_stream_that_dies_after_its_role_chunk_costs_nothing() {
    // Providers send `{"role":"assistant","content":""}` first; that is not output, so a stream
    // that dies right after it has not started: it fails over, and with nowhere left to go it
    // is a 502 that costs nothing, not a 200 charged for the prompt.
    let (a, b) = (FakeOpenAi::start("a").await, FakeOpenAi::start("b").await);
    let gw = Gateway::start(tollgate_bin!(), &config(&a, &b)).await;
    a.set_mode(Mode::DieAfter(0));
    b.set_mode(Mode::DieAfter(0));
    let before = gw.balance(&gw.key).await;
    let r = gw
        .chat(json!({"model":"cheap","messages":user("hi"),"stream":true}))
        .await;
    r.error(502, "upstream_error");
    assert_eq!(gw.balance(&gw.key).await, before);
    let u = gw.usage(&gw.key).await;
    let rows = u["recent"].as_array().unwrap();
    assert_eq!(rows.len(), 1);
    assert_eq!(rows[0]["credits"], 0.0);
    assert_eq!(rows[0]["status"], 502);
    // The second candidate serves when it can: the client sees one clean stream from it.
    b.set_mode(Mode::Ok);
    let r = gw
        .chat(json!({"model":"cheap","messages":user("hi"),"stream":true}))
        .await;
    assert_eq!(r.status, 200);
    let data = r.sse_data();
    assert_eq!(data.last().map(String::as_str), Some("[DONE]"));
    assert!(!r.text().contains("\"error\""), "{}", r.text());
}

#[tokio::test]
async fn max_tokens_is_always_sent_upstream_under_the_name_the_client_used() {
    // Without a cap the provider could bill past what the hold covers.
    let (a, b) = (FakeOpenAi::start("a").await, FakeOpenAi::start("b").await);
    let gw = Gateway::start(tollgate_bin!(), &config(&a, &b)).await;
    let sent = |r: &Recorded| r.json();
    for stream in [false, true] {
        let r = gw
            .chat(json!({"model":"cheap","messages":user("hi"),"stream":stream}))
            .await;
        assert_eq!(r.status, 200, "{}", r.text());
        let up = sent(a.requests().last().unwrap());
        assert_eq!(
            up["max_tokens"], 1000,
            "the model's max_output_tokens: {up}"
        );
        assert!(up.get("max_completion_tokens").is_none());
    }
    let r = gw
        .chat(json!({"model":"cheap","messages":user("hi"),"max_completion_tokens":50}))
        .await;
    assert_eq!(r.status, 200);
    let up = sent(a.requests().last().unwrap());
    assert_eq!(up["max_completion_tokens"], 50);
    assert!(up.get("max_tokens").is_none(), "{up}");
}

#[tokio::test]
async fn every_one_of_n_choices_is_held_for_max_tokens() {
    // 5 credits at 2 credits per 1K output tokens pay for ~2,500 tokens in all: with n = 4, each
    // choice may have ~620, not the model's 1,000 (which would let the provider bill 8 credits).
    let (a, b) = (FakeOpenAi::start("a").await, FakeOpenAi::start("b").await);
    let gw = Gateway::start(tollgate_bin!(), &config(&a, &b)).await;
    let (uid, key) = gw.signup(&unique_email()).await;
    gw.admin_credits(&uid, -95.0).await;
    let r = gw
        .chat_as(
            Some(&key),
            &json!({"model":"cheap","messages":user("hi"),"n":4}),
        )
        .await;
    assert_eq!(r.status, 200, "{}", r.text());
    let per_choice = a.requests().last().unwrap().json()["max_tokens"]
        .as_u64()
        .unwrap();
    assert!(
        per_choice > 600 && per_choice < 625,
        "max_tokens {per_choice}"
    );
    assert!(
        4 * per_choice * 2 <= 5 * 1000,
        "4 choices fit in the balance"
    );
    // n beyond what one request may ask for is refused before any hold.
    gw.chat_as(
        Some(&key),
        &json!({"model":"cheap","messages":user("hi"),"n":129}),
    )
    .await
    .error(400, "invalid_request");
}

#[tokio::test]
async fn a_cheap_model_is_never_refused_because_of_a_pricier_sibling() {
    // One tier: a 0.15/0.6 model and a 1,000,000-credit one. The hold is sized for the model
    // asked for, at its own rates; the sibling is skipped when the hold cannot pay for it.
    let (a, b) = (FakeOpenAi::start("a").await, FakeOpenAi::start("b").await);
    let cfg = format!(
        "{FAST_TIMEOUTS}{}{}{}{}",
        provider("p1", &[&a], ""),
        provider("p2", &[&b], ""),
        "[[models]]\nid = \"mini\"\nprovider = \"p1\"\ntier = \"economy\"\ninput_credits_per_1k = 0.15\noutput_credits_per_1k = 0.6\nmax_output_tokens = 16384\n\n",
        "[[models]]\nid = \"huge\"\nprovider = \"p2\"\ntier = \"economy\"\ninput_credits_per_1k = 1000000\noutput_credits_per_1k = 1000000\n\n",
    );
    let gw = Gateway::start(tollgate_bin!(), &cfg).await;
    let (_uid, key) = gw.signup(&unique_email()).await;
    let before = gw.balance(&key).await;
    for (stream, max_tokens) in [
        (false, None),
        (false, Some(100)),
        (true, None),
        (true, Some(100)),
    ] {
        let mut body = json!({"model":"mini","messages":user("hi"),"stream":stream});
        if let Some(m) = max_tokens {
            body["max_tokens"] = m.into();
        }
        let r = gw.chat_as(Some(&key), &body).await;
        assert_eq!(
            r.status,
            200,
            "stream {stream}, max_tokens {max_tokens:?}: {}",
            r.text()
        );
        let up = a.requests().last().unwrap().json();
        assert_eq!(up["max_tokens"], max_tokens.unwrap_or(16384), "{up}");
    }
    // Charged exactly: the four usage rows at mini's rates, nothing more.
    let u = gw.usage(&key).await;
    let rows = u["recent"].as_array().unwrap();
    assert_eq!(rows.len(), 4);
    let expected: i64 = rows
        .iter()
        .map(|r| {
            let (p, c) = (
                r["prompt_tokens"].as_i64().unwrap(),
                r["completion_tokens"].as_i64().unwrap(),
            );
            (p * 150_000 + c * 600_000 + 999) / 1000
        })
        .sum();
    assert_eq!(before - gw.balance(&key).await, expected);
    // The cheap model fails: the sibling the hold cannot pay for is skipped, not tried.
    a.set_mode(Mode::Status(500));
    let held_before = gw.balance(&key).await;
    gw.chat_as(Some(&key), &json!({"model":"mini","messages":user("hi")}))
        .await
        .error(502, "upstream_error");
    assert_eq!(b.chat_count(), 0);
    assert_eq!(gw.balance(&key).await, held_before);
}

#[tokio::test]
async fn absurd_usage_from_an_upstream_is_charged_as_far_as_the_balance_goes_and_counted() {
    let (a, b) = (FakeOpenAi::start("a").await, FakeOpenAi::start("b").await);
    let gw = Gateway::start(tollgate_bin!(), &config(&a, &b)).await;
    a.set_mode(Mode::Usage(u64::MAX, u64::MAX));
    // A usage above the hold is charged from the balance (docs/api.md, "Cost in every response"):
    // counts saturate at 2^32 - 1 tokens, far above what any balance here pays, so each
    // request takes what its account has (outside this instance's credit lease), never more,
    // and the rest is counted.
    let (_, other) = gw.signup(&unique_email()).await;
    let mut uncharged = 0i64;
    for (key, stream) in [(gw.key.clone(), false), (other, true)] {
        let before = gw.balance(&key).await;
        let r = gw
            .chat_as(
                Some(&key),
                &json!({"model":"cheap","messages":user("hi"),"stream":stream}),
            )
            .await;
        assert_eq!(r.status, 200, "{}", r.text());
        let after = gw.balance(&key).await;
        assert!(after >= 0 && after * 4 <= before, "{before} -> {after}");
        let cost = i64::from(u32::MAX) * 1_000 + i64::from(u32::MAX) * 2_000;
        uncharged += cost - (before - after);
        let u = gw.usage(&key).await;
        let row = &u["recent"][0];
        assert_eq!(
            row["prompt_tokens"],
            u32::MAX,
            "stored as the largest count"
        );
        assert_eq!(
            micros(&row["credits"]),
            before - after,
            "what the balance fell by"
        );
    }
    assert_eq!(
        gw.metric("tollgate_usage_over_hold_total{model=\"cheap\"}")
            .await,
        2.0
    );
    let counted = gw
        .metric("tollgate_credits_uncharged_micros_total{model=\"cheap\"}")
        .await;
    assert_eq!(counted, uncharged as f64);
    assert!(gw.is_healthy().await);
}

#[tokio::test]
async fn tools_in_the_body_are_held_for_like_any_prompt_text() {
    // 0.1 credits pay for ~100 prompt tokens at 1 credit per 1K; a 30 KB tool schema is ~10,000.
    // Counting only message text, the hold would let it through and the provider bill it.
    let (a, b) = (FakeOpenAi::start("a").await, FakeOpenAi::start("b").await);
    let gw = Gateway::start_opts(
        tollgate_bin!(),
        &config(&a, &b),
        Opts {
            credits: Some(0.1),
            ..Opts::default()
        },
    )
    .await;
    let schema = json!({"type":"object","properties":{"q":{"type":"string","description":"x".repeat(30_000)}}});
    let r = gw
        .chat(json!({"model":"cheap","messages":user("hi"),
            "tools":[{"type":"function","function":{"name":"search","parameters":schema}}]}))
        .await;
    r.error(402, "insufficient_credits");
    assert_eq!(a.chat_count(), 0);
    assert_eq!(
        gw.chat(json!({"model":"cheap","messages":user("hi")}))
            .await
            .status,
        200
    );
}

#[tokio::test]
async fn client_gone_mid_stream_is_charged_for_what_was_delivered() {
    let (a, b) = (FakeOpenAi::start("a").await, FakeOpenAi::start("b").await);
    a.set_mode(Mode::Slow(Duration::from_millis(300)));
    let gw = Gateway::start(tollgate_bin!(), &config(&a, &b)).await;
    let before = gw.balance(&gw.key).await;
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
        let u = gw.usage(&gw.key).await;
        if let Some(r) = u["recent"].as_array().unwrap().first() {
            break r.clone();
        }
        assert!(
            Instant::now() < deadline,
            "no usage row after the client left"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    };
    let charged = before - gw.balance(&gw.key).await;
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
    // The hold is sized at the first candidate's own rates (1 in, 2 out), not at those of b,
    // the dearer candidate of the tier (3 in, 5 out).
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
    // 100,000 µcr; the prompt estimate (a token per 3 bytes of the body) at 1,000 µcr, and the
    // rest buys output tokens at 2,000 µcr each.
    let body = json!({"model":"cheap","messages":user("hi"),"max_tokens":1000});
    assert_eq!(lowered as i64, (100_000 - estimate(&body) * 1_000) / 2_000);
    assert!(gw.balance(&gw.key).await >= 0);

    // Almost nothing left (10,000 µcr, less than the prompt estimate alone): not even one output
    // token → 402, nothing charged, no usage row.
    let (uid, key) = gw.signup(&unique_email()).await;
    gw.admin_credits(&uid, -99.99).await;
    let before = gw.balance(&key).await;
    let r = gw
        .chat_as(Some(&key), &json!({"model":"cheap","messages":user("hi")}))
        .await;
    r.error(402, "insufficient_credits");
    assert_eq!(header_micros(&r), before);
    assert_eq!(gw.balance(&key).await, before);
    assert!(gw.usage(&key).await["recent"]
        .as_array()
        .unwrap()
        .is_empty());
}

#[tokio::test]
async fn two_hundred_concurrent_requests_on_two_instances_never_overdraw() {
    let a = FakeOpenAi::start("a").await;
    // One model; the price is 11 + 8 tokens = 27,000 µcr, so the balance covers about 50
    // requests. The hold (a token per 3 bytes of the body + 8 output, ~46,000 µcr) is larger, so
    // while many are in flight at once fewer fit: between 25 and 60 are served.
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
    let two = one.second(tollgate_bin!(), &cfg).await;
    assert_eq!(one.balance(&one.key).await, initial);
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
    let final_balance = one.balance(&one.key).await;
    assert!(final_balance >= 0);
    assert!(refused > 0, "requests beyond the balance get 402");
    // At most about 50 (the last few may be served with max_tokens lowered to what was left, so a
    // handful more than 50 can fit); fewer when holds in flight crowd each other out.
    assert!((25..=60).contains(&ok), "25 to 60 served, got {ok}");
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
            storage,
            ..Opts::default()
        },
    )
    .await;
    let survivor = doomed.second(tollgate_bin!(), &cfg).await;
    let key = doomed.key.clone();
    let initial = survivor.balance(&key).await;

    let body =
        serde_json::to_vec(&json!({"model":"cheap","messages":user("hi"),"stream":true})).unwrap();
    let mut s = TcpStream::connect(doomed.addr).await.unwrap();
    let head = format!("POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer {key}\r\nContent-Length: {}\r\n\r\n", body.len());
    s.write_all(head.as_bytes()).await.unwrap();
    s.write_all(&body).await.unwrap();
    let mut buf = [0u8; 1024];
    let n = s.read(&mut buf).await.unwrap();
    assert!(String::from_utf8_lossy(&buf[..n]).starts_with("HTTP/1.1 200"));
    // The lease the stream holds against is in the ledger (the other instance counts its
    // unspent part as balance: one balance), then the instance dies mid-request.
    let db = doomed.config_db();
    assert_eq!(books::lease_rows(&db, &doomed.user_id).await, 1);
    assert_eq!(survivor.balance(&key).await, initial);
    doomed.child.kill().unwrap();
    doomed.child.wait().unwrap();

    let t = Instant::now();
    while books::read(&db, &doomed.user_id).await.holds != 0
        || survivor.balance(&key).await != initial
    {
        assert!(
            t.elapsed() < Duration::from_secs(8),
            "hold not released: {}",
            survivor.log()
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    tokio::time::sleep(Duration::from_millis(800)).await;
    assert_eq!(
        survivor.balance(&key).await,
        initial,
        "refunded once, not twice"
    );
    assert!(
        survivor.usage(&key).await["recent"]
            .as_array()
            .unwrap()
            .is_empty(),
        "no usage row for the dead request"
    );
}
