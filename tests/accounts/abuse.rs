//! What a hostile client can do from one address, bounded: signups (each mints credits) and
//! logins are limited per address in the shared limiter, exactly, whatever the concurrency.
//! Loopback only. Runs on SQLite + in-process counters, and on Postgres + Redis when set.

use serde_json::json;
use tollgate_testkit::*;

async fn gateway(abuse: &str) -> (FakeOpenAi, Gateway) {
    let fake = FakeOpenAi::start("p").await;
    let cfg = one_model_config(&fake, "paid-2024-01-01");
    let opts = Opts {
        abuse: Some(abuse.into()),
        no_account: true,
        ..Opts::default()
    };
    (fake, Gateway::start_opts(tollgate_bin!(), &cfg, opts).await)
}

#[tokio::test]
async fn two_hundred_parallel_signups_from_one_address_mint_only_the_configured_number() {
    let (_f, gw) = gateway(
        "[abuse]\nsignups_per_hour = 5\nsignups_per_day = 20\nlogins_per_hour = 60\nlogins_per_day = 300\n",
    )
    .await;
    let tasks: Vec<_> = (0..200)
        .map(|_| {
            let addr = gw.addr;
            tokio::spawn(async move {
                let body = json!({"email": unique_email(), "password": "longenough"});
                post_json(addr, "/api/v1/auth/signup", &body).await
            })
        })
        .collect();
    let (mut created, mut limited) = (0, 0);
    for t in tasks {
        let r = t.await.unwrap();
        match r.status {
            201 => created += 1,
            429 => {
                let v = r.error(429, "rate_limit_exceeded");
                assert!(v["error"]["retry_after"].as_u64().unwrap() >= 1);
                assert!(r.header("retry-after").is_some());
                limited += 1;
            }
            s => panic!("unexpected {s}: {}", r.text()),
        }
    }
    assert_eq!((created, limited), (5, 195));
    assert!(gw.is_healthy().await);
}

#[tokio::test]
async fn two_hundred_parallel_wrong_logins_from_one_address_try_at_most_the_limit() {
    let (_f, gw) = gateway(
        "[abuse]\nsignups_per_hour = 5\nsignups_per_day = 20\nlogins_per_hour = 20\nlogins_per_day = 300\n",
    )
    .await;
    let email = unique_email();
    let r = post_json(
        gw.addr,
        "/api/v1/auth/signup",
        &json!({"email": email, "password": "correct horse battery"}),
    )
    .await;
    assert_eq!(r.status, 201);
    let tasks: Vec<_> = (0..200)
        .map(|_| {
            let (addr, email) = (gw.addr, email.clone());
            tokio::spawn(async move {
                let body = json!({"email": email, "password": "wrong password"});
                post_json(addr, "/api/v1/auth/login", &body).await.status
            })
        })
        .collect();
    let mut tried = 0;
    for t in tasks {
        match t.await.unwrap() {
            // A wrong password was checked (401), or the e-mail's own throttle answered (429).
            401 => tried += 1,
            429 => {}
            s => panic!("unexpected {s}"),
        }
    }
    assert!(tried <= 20, "{tried} passwords checked");
    // The address is spent for the hour, even with the right password.
    let r = post_json(
        gw.addr,
        "/api/v1/auth/login",
        &json!({"email": email, "password": "correct horse battery"}),
    )
    .await;
    r.error(429, "rate_limit_exceeded");
}

#[tokio::test]
async fn fifty_slow_body_senders_are_cut_off_and_the_service_keeps_answering() {
    let fake = FakeOpenAi::start("p").await;
    let cfg = format!(
        "{FAST_TIMEOUTS}request_body = 1\n{}{}",
        provider("p", &[&fake], ""),
        model("paid-2024-01-01", "p", "economy", ""),
    );
    let gw = Gateway::start(tollgate_bin!(), &cfg).await;
    // Each announces a 1,000-byte body, sends ten bytes of it, and stalls.
    let mut slow = Vec::new();
    for _ in 0..50 {
        let mut s = tokio::net::TcpStream::connect(gw.addr).await.unwrap();
        let head = format!(
            "POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer {}\r\nContent-Length: 1000\r\n\r\n{{\"model\":",
            gw.key
        );
        tokio::io::AsyncWriteExt::write_all(&mut s, head.as_bytes())
            .await
            .unwrap();
        slow.push(s);
    }
    // Meanwhile everyone else is served.
    assert!(gw.is_healthy().await);
    let r = gw
        .chat(json!({"model":"paid-2024-01-01","messages":user("hi")}))
        .await;
    assert_eq!(r.status, 200, "{}", r.text());
    // And every slow sender gets its 400 once the body deadline passes.
    for mut s in slow {
        let mut buf = Vec::new();
        let read = tokio::io::AsyncReadExt::read_to_end(&mut s, &mut buf);
        tokio::time::timeout(std::time::Duration::from_secs(5), read)
            .await
            .expect("answered within the deadline")
            .unwrap();
        let r = parse_response(&buf);
        let v = r.error(400, "invalid_request");
        assert!(v["error"]["message"]
            .as_str()
            .unwrap()
            .contains("not received within"));
    }
    assert!(gw.is_healthy().await);
    // Nothing was held for them: one usage row, the one chat.
    assert_eq!(
        gw.usage(&gw.key).await["recent"].as_array().unwrap().len(),
        1
    );
}

#[tokio::test]
async fn a_client_that_never_reads_its_stream_is_let_go_and_its_hold_settled() {
    let fake = FakeOpenAi::start("p").await;
    // Far more than the socket buffers between the gateway and the client hold.
    fake.set_mode(Mode::Huge(2_000));
    let cfg = format!(
        "{FAST_TIMEOUTS}client_write = 1\n{}{}",
        provider("p", &[&fake], ""),
        model("paid-2024-01-01", "p", "economy", ""),
    );
    let gw = Gateway::start(tollgate_bin!(), &cfg).await;
    let body =
        serde_json::to_vec(&json!({"model":"paid-2024-01-01","messages":user("hi"),"stream":true}))
            .unwrap();
    let mut s = tokio::net::TcpStream::connect(gw.addr).await.unwrap();
    let head = format!(
        "POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer {}\r\nContent-Type: application/json\r\nContent-Length: {}\r\n\r\n",
        gw.key,
        body.len()
    );
    tokio::io::AsyncWriteExt::write_all(&mut s, head.as_bytes())
        .await
        .unwrap();
    tokio::io::AsyncWriteExt::write_all(&mut s, &body)
        .await
        .unwrap();
    // The client keeps the connection open and reads nothing. Within a few seconds the
    // gateway gives up on it and settles: the usage row exists, the hold is gone.
    let mut settled = false;
    for _ in 0..100 {
        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
        let u = gw.usage(&gw.key).await;
        if let Some(row) = u["recent"].as_array().and_then(|r| r.first()) {
            assert_eq!(row["status"], 200);
            assert!(row["completion_tokens"].as_i64().unwrap() > 0, "{row}");
            settled = true;
            break;
        }
    }
    assert!(settled, "the stream's hold was never settled");
    assert!(gw.is_healthy().await);
    drop(s);
}

/// The gateway's resident memory, in KiB.
fn rss_kib(gw: &Gateway) -> u64 {
    let status = std::fs::read_to_string(format!("/proc/{}/status", gw.child.id())).unwrap();
    status
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
        .unwrap()
}

/// A well-formed key nobody issued.
fn unknown_key(i: usize) -> String {
    format!("tg_{:0>40}", format!("flood{i}x"))
}

async fn models_as(gw: &Gateway, key: &str, from: &str) -> Response {
    let auth = format!("Bearer {key}");
    let headers = [("Authorization", auth.as_str()), ("X-Forwarded-For", from)];
    request(gw.addr, "GET", "/v1/models", &headers, b"").await
}

/// Past this many KiB of resident memory, the flood's keys were not bounded (README, Failure
/// modes: the bound is 8 MB; the rest is the allocator's slack and the test's connections).
const FLOOD_RSS_KIB: u64 = 12 * 1024;

#[tokio::test]
async fn a_flood_of_distinct_invalid_keys_costs_one_lookup_each_in_bounded_memory() {
    let fake = FakeOpenAi::start("p").await;
    let cfg = one_model_config(&fake, "m");
    // Spread over many addresses (trusted loopback, X-Forwarded-For), as a botnet's would be,
    // so the per-address limit does not stop it first.
    let opts = Opts {
        trusted: Some("127.0.0.1/32".into()),
        abuse: Some("[abuse]\ninvalid_keys_per_minute = 1000000\n".into()),
        ..Opts::default()
    };
    let gw = std::sync::Arc::new(Gateway::start_opts(tollgate_bin!(), &cfg, opts).await);
    let rss_before = rss_kib(&gw);
    let lookups = "tollgate_key_lookups_total{result=\"unknown\"}";
    let before = gw.metric(lookups).await;
    // Valid traffic throughout.
    let valid = {
        let gw = gw.clone();
        tokio::spawn(async move {
            let mut statuses = Vec::new();
            for _ in 0..60 {
                let r = gw.chat(serde_json::json!({"model": "m", "messages": [{"role": "user", "content": "hi"}]})).await;
                statuses.push(r.status);
                tokio::time::sleep(std::time::Duration::from_millis(50)).await;
            }
            statuses
        })
    };
    const KEYS: usize = 10_000;
    const WORKERS: usize = 32;
    let workers: Vec<_> = (0..WORKERS)
        .map(|w| {
            let gw = gw.clone();
            tokio::spawn(async move {
                let mut wrong = Vec::new();
                // Each key twice: the second is refused from memory.
                for round in 0..2 {
                    for i in (w..KEYS).step_by(WORKERS) {
                        let from = format!("10.{}.{}.{}", i >> 16 & 255, i >> 8 & 255, i & 255);
                        let r = models_as(&gw, &unknown_key(i), &from).await;
                        if r.status != 401 {
                            wrong.push((round, i, r.status));
                        }
                    }
                }
                wrong
            })
        })
        .collect();
    for w in workers {
        let wrong = w.await.unwrap();
        assert!(
            wrong.is_empty(),
            "not 401: {:?}",
            &wrong[..wrong.len().min(5)]
        );
    }
    // Malformed keys never reach the ledger.
    for i in 0..200 {
        let r = models_as(&gw, &format!("tg_short{i}"), "10.9.9.9").await;
        assert_eq!(r.status, 401);
    }
    let looked_up = gw.metric(lookups).await - before;
    assert_eq!(looked_up, KEYS as f64, "one ledger lookup per distinct key");
    let grew = rss_kib(&gw).saturating_sub(rss_before);
    eprintln!("invalid-key flood: {KEYS} distinct keys twice, RSS grew {grew} KiB");
    assert!(grew < FLOOD_RSS_KIB, "RSS grew {grew} KiB");
    let statuses = valid.await.unwrap();
    assert!(
        statuses.iter().all(|s| *s == 200),
        "valid client: {statuses:?}"
    );
    assert!(gw.is_healthy().await);
}

#[tokio::test]
async fn a_new_keys_first_burst_is_looked_up_once() {
    let (_f, gw) = gateway("").await;
    let gw = std::sync::Arc::new(gw);
    let (_user, key) = gw.signup(&unique_email()).await;
    let found = "tollgate_key_lookups_total{result=\"found\"}";
    let before = gw.metric(found).await;
    let burst: Vec<_> = (0..50)
        .map(|_| {
            let (gw, key) = (gw.clone(), key.clone());
            tokio::spawn(async move { models_as(&gw, &key, "127.0.0.1").await.status })
        })
        .collect();
    for b in burst {
        assert_eq!(b.await.unwrap(), 200);
    }
    assert_eq!(
        gw.metric(found).await - before,
        1.0,
        "one lookup for the burst"
    );
}

#[tokio::test]
async fn an_address_sending_unknown_keys_gets_no_more_lookups_until_its_minute_ends() {
    let (_f, gw) = gateway("[abuse]\ninvalid_keys_per_minute = 5\n").await;
    let (_user, valid) = gw.signup(&unique_email()).await;
    // Not across a minute's end: the count starts over there.
    let into_minute = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_millis()
        % 60_000;
    if into_minute > 45_000 {
        tokio::time::sleep(std::time::Duration::from_millis(
            60_500 - into_minute as u64,
        ))
        .await;
    }
    assert_eq!(models_as(&gw, &valid, "127.0.0.1").await.status, 200);
    let unknown = "tollgate_key_lookups_total{result=\"unknown\"}";
    let before = gw.metric(unknown).await;
    for i in 0..5 {
        models_as(&gw, &unknown_key(i), "127.0.0.1")
            .await
            .error(401, "authentication_error");
    }
    let r = models_as(&gw, &unknown_key(99), "127.0.0.1").await;
    let e = r.error(429, "rate_limit_exceeded");
    let retry: u64 = r.header("retry-after").unwrap().parse().unwrap();
    assert!((1..=60).contains(&retry), "{retry}");
    assert_eq!(e["error"]["retry_after"], retry);
    // Keys it sent before are refused from memory; the key it was served with still works.
    models_as(&gw, &unknown_key(0), "127.0.0.1")
        .await
        .error(401, "authentication_error");
    assert_eq!(models_as(&gw, &valid, "127.0.0.1").await.status, 200);
    assert_eq!(gw.metric(unknown).await - before, 5.0);
    assert!(gw.is_healthy().await);
}
