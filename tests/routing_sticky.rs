//! Sticky routing (README, "Sticky routing"): the turns of a conversation go back to the
//! endpoint whose prompt cache holds it, across instances when they share Redis; a failing
//! endpoint still fails over and the conversation stays on the new one; two accounts never
//! share an affinity; small requests keep round robin unless they name a session.
//!
//! The provider is three fakes as three endpoints of one pool, each with a prompt cache of its
//! own (`Mode::PrefixCache`): a turn reads the conversation so far from the cache only on the
//! endpoint that answered the turn before it ("warm").

use std::process::Command;

use serde_json::{json, Value};
use tollgate_testkit::prefix_cache::tokens;
use tollgate_testkit::*;

/// A system prompt well over `min_prompt_tokens` (1,024 at four bytes a token).
fn system_prompt() -> String {
    "You are a careful assistant who answers in full sentences. ".repeat(100)
}

/// Three caching fakes behind one provider, the model's cached input at a tenth of its input
/// rate; `extra` appended (e.g. `[routing.sticky]`). With `two`, a second instance sharing the
/// first's ledger and Redis; without Redis there is none (each instance's affinities are its
/// own).
async fn start(extra: &str, two: bool) -> (Vec<FakeOpenAi>, Gateway, Option<Gateway>) {
    let mut fakes = Vec::new();
    for name in ["a", "b", "c"] {
        fakes.push(
            FakeOpenAi::builder(name)
                .mode(Mode::PrefixCache)
                .start()
                .await,
        );
    }
    let cfg = format!(
        "{FAST_TIMEOUTS}{}{}{extra}",
        provider("p", &[&fakes[0], &fakes[1], &fakes[2]], ""),
        model("m-1", "p", "economy", "cached_input_credits_per_1k = 0.1"),
    );
    let gw = Gateway::start(tollgate_bin!(), &cfg).await;
    let second = match gw.redis_prefix() {
        _ if !two => None,
        Some(_) => Some(gw.second(tollgate_bin!(), &cfg).await),
        None => {
            skip("the second instance needs Redis (TOLLGATE_TEST_REDIS_URL); one instance serves every turn");
            None
        }
    };
    (fakes, gw, second)
}

/// What one turn was served as.
struct Turn {
    /// The fake that answered it.
    fake: usize,
    /// It read the whole previous turn's prompt from the cache.
    warm: bool,
    request_id: String,
    /// The charge the fake's reported usage comes to at the model's rates.
    expected: i64,
}

/// A conversation of one account, its turns spread over `gateways` in turn.
struct Conversation<'a> {
    gateways: Vec<&'a Gateway>,
    key: String,
    messages: Vec<Value>,
    /// Prompt tokens of the last turn sent.
    last_prompt: u64,
    turns: Vec<Turn>,
}

impl<'a> Conversation<'a> {
    fn new(gateways: Vec<&'a Gateway>, key: &str) -> Conversation<'a> {
        let messages = vec![json!({"role": "system", "content": system_prompt()})];
        Conversation {
            gateways,
            key: key.to_owned(),
            messages,
            last_prompt: 0,
            turns: Vec::new(),
        }
    }

    /// Sends the next user message with the conversation so far and keeps the reply.
    async fn turn(&mut self) -> &Turn {
        let n = self.turns.len();
        self.messages
            .push(json!({"role": "user", "content": format!("Question {n}?")}));
        let sent = Value::Array(self.messages.clone());
        let gw = self.gateways[n % self.gateways.len()];
        let r = gw
            .chat_as(Some(&self.key), &json!({"model": "m-1", "messages": sent}))
            .await;
        assert_eq!(r.status, 200, "turn {n}: {}", r.text());
        let reply = r.json();
        let usage = &reply["usage"];
        let (p, c) = (
            usage["prompt_tokens"].as_i64().unwrap(),
            usage["prompt_tokens_details"]["cached_tokens"]
                .as_i64()
                .unwrap(),
        );
        assert_eq!(p as u64, tokens(&sent), "the fake counts what was sent");
        let completion = usage["completion_tokens"].as_i64().unwrap();
        // Each fake's reply names it ("Hello from a , …").
        let text = reply["choices"][0]["message"]["content"].as_str().unwrap();
        let fake = ["a", "b", "c"]
            .iter()
            .position(|name| text.starts_with(&format!("Hello from {name} ")))
            .expect("a fake answered");
        self.messages.push(reply["choices"][0]["message"].clone());
        let warm = n > 0 && c as u64 == self.last_prompt;
        self.last_prompt = p as u64;
        self.turns.push(Turn {
            fake,
            warm,
            request_id: r.header("x-request-id").unwrap().to_owned(),
            // 1 credit per 1K input tokens (1,000 µcr a token), 0.1 cached, 2 output.
            expected: (p - c) * 1_000 + c * 100 + completion * 2_000,
        });
        &self.turns[n]
    }

    fn warm_turns(&self) -> usize {
        self.turns.iter().filter(|t| t.warm).count()
    }
}

/// Each turn's usage row carries the charge its reported usage comes to (rows written by a
/// lease round appear a moment later, hence the wait).
async fn assert_charged_as_reported(gw: &Gateway, c: &Conversation<'_>) {
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
    loop {
        let usage = gw.usage(&c.key).await;
        let rows = usage["recent"].as_array().unwrap().clone();
        let found: Vec<(&Turn, Option<&Value>)> = c
            .turns
            .iter()
            .map(|t| {
                (
                    t,
                    rows.iter()
                        .find(|r| r["request_id"] == t.request_id.as_str()),
                )
            })
            .collect();
        if found.iter().all(|(_, r)| r.is_some()) {
            for (t, row) in found {
                let row = row.unwrap();
                assert_eq!(micros(&row["credits"]), t.expected, "{row}");
            }
            return;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "usage rows missing: {usage}"
        );
        tokio::time::sleep(std::time::Duration::from_millis(200)).await;
    }
}

#[tokio::test]
async fn a_sticky_conversation_reads_the_cache_on_almost_every_turn_at_the_cached_rate() {
    let (_fakes, gw, second) = start("", true).await;
    let mut gateways = vec![&gw];
    gateways.extend(second.as_ref());
    let mut c = Conversation::new(gateways, &gw.key);
    for _ in 0..20 {
        c.turn().await;
    }
    let served: Vec<usize> = c.turns.iter().map(|t| t.fake).collect();
    eprintln!(
        "sticky: {} of 20 turns warm, served by {served:?}",
        c.warm_turns()
    );
    assert!(
        c.warm_turns() >= 18,
        "warm turns: {} of 20, served by {served:?}",
        c.warm_turns()
    );
    assert_charged_as_reported(&gw, &c).await;
    let hits = gw
        .metric("tollgate_sticky_routes_total{outcome=\"hit\"}")
        .await;
    let hits_second = match &second {
        Some(s) => {
            s.metric("tollgate_sticky_routes_total{outcome=\"hit\"}")
                .await
        }
        None => 0.0,
    };
    assert!(hits + hits_second >= 18.0, "hits: {hits} + {hits_second}");
}

#[tokio::test]
async fn without_sticky_routing_the_turns_rotate_and_seldom_find_the_cache_warm() {
    let (fakes, gw, second) = start("[routing.sticky]\nenabled = false\n", true).await;
    let mut gateways = vec![&gw];
    gateways.extend(second.as_ref());
    let mut c = Conversation::new(gateways, &gw.key);
    for _ in 0..20 {
        c.turn().await;
    }
    let served: Vec<usize> = c.turns.iter().map(|t| t.fake).collect();
    eprintln!(
        "not sticky: {} of 20 turns warm, served by {served:?}",
        c.warm_turns()
    );
    assert!(
        c.warm_turns() < 12,
        "warm turns: {} of 20, served by {served:?}",
        c.warm_turns()
    );
    for f in &fakes {
        assert!(
            f.chat_count() >= 5,
            "round robin spreads the turns: {served:?}"
        );
    }
    assert_charged_as_reported(&gw, &c).await;
    assert_eq!(gw.metric("tollgate_sticky_routes_total").await, 0.0);
}

#[tokio::test]
async fn a_failing_endpoint_fails_over_and_the_next_turns_stick_to_the_new_one() {
    let (fakes, gw, second) = start("", true).await;
    let mut gateways = vec![&gw];
    gateways.extend(second.as_ref());
    let mut c = Conversation::new(gateways, &gw.key);
    for _ in 0..5 {
        c.turn().await;
    }
    let home = c.turns[4].fake;
    assert!(c.turns[1..].iter().all(|t| t.fake == home && t.warm));
    fakes[home].set_mode(Mode::Status(503));
    let moved = c.turn().await;
    assert_ne!(moved.fake, home, "failed over");
    assert!(
        !moved.warm,
        "the new endpoint had not seen the conversation"
    );
    let new_home = moved.fake;
    for _ in 0..5 {
        let t = c.turn().await;
        assert_eq!(t.fake, new_home, "stuck to the endpoint it failed over to");
        assert!(t.warm, "and read the cache there again");
    }
    assert_eq!(
        fakes[home].requests().len(),
        6,
        "the failing one was tried once"
    );
    assert_charged_as_reported(&gw, &c).await;
    let mut moves = gw
        .metric("tollgate_sticky_routes_total{outcome=\"moved\"}")
        .await;
    if let Some(s) = &second {
        moves += s
            .metric("tollgate_sticky_routes_total{outcome=\"moved\"}")
            .await;
    }
    assert_eq!(moves, 1.0);
    assert!(gw.is_healthy().await);
}

#[tokio::test]
async fn two_accounts_sending_the_same_prompt_are_each_routed_on_their_own() {
    let (_fakes, gw, _) = start("", false).await;
    let (other, other_key) = gw.signup(&unique_email()).await;
    gw.admin_credits(&other, 1000.0).await;
    let miss = "tollgate_sticky_routes_total{outcome=\"miss\"}";
    let hit = "tollgate_sticky_routes_total{outcome=\"hit\"}";
    let mut mine = Conversation::new(vec![&gw], &gw.key);
    mine.turn().await;
    mine.turn().await;
    assert_eq!((gw.metric(miss).await, gw.metric(hit).await), (1.0, 1.0));
    // The other account's first turn is the same request: it finds no affinity of its own.
    let mut theirs = Conversation::new(vec![&gw], &other_key);
    theirs.turn().await;
    assert_eq!((gw.metric(miss).await, gw.metric(hit).await), (2.0, 1.0));
    theirs.turn().await;
    assert_eq!(gw.metric(hit).await, 2.0, "and then sticks to its own");
}

#[tokio::test]
async fn a_named_session_is_sticky_at_any_size_and_small_unnamed_requests_rotate() {
    let (fakes, gw, _) = start("", false).await;
    let auth = format!("Bearer {}", gw.key);
    let body = json!({"model": "m-1", "messages": user("hi")}).to_string();
    let send = |session: Option<&'static str>| {
        let (auth, body) = (auth.clone(), body.clone());
        async move {
            let mut headers = vec![
                ("Content-Type", "application/json"),
                ("Authorization", auth.as_str()),
            ];
            if let Some(s) = session {
                headers.push(("x-session-id", s));
            }
            let r = request(
                gw.addr,
                "POST",
                "/v1/chat/completions",
                &headers,
                body.as_bytes(),
            )
            .await;
            assert_eq!(r.status, 200, "{}", r.text());
        }
    };
    let counts = || fakes.iter().map(FakeOpenAi::chat_count).collect::<Vec<_>>();
    for _ in 0..3 {
        send(None).await;
    }
    assert_eq!(counts(), [1, 1, 1], "small unnamed requests: round robin");
    for _ in 0..6 {
        send(Some("session-1")).await;
    }
    let mut named = counts();
    named.sort();
    assert_eq!(named, [1, 1, 7], "one session, one endpoint");
    // A prompt_cache_key names a session too.
    let keyed = json!({"model": "m-1", "messages": user("hi"), "prompt_cache_key": "k-1"});
    let before = counts();
    for _ in 0..4 {
        assert_eq!(gw.chat(keyed.clone()).await.status, 200);
    }
    let grew: Vec<usize> = counts().iter().zip(&before).map(|(a, b)| a - b).collect();
    assert!(grew.contains(&4), "{grew:?}");
}

#[test]
fn absurd_sticky_settings_are_refused_by_name() {
    let dir = temp_dir();
    let bad = dir.join("bad.toml");
    std::fs::write(
        &bad,
        "[routing.sticky]\nmin_prompt_tokens = 5000000\nmax_entries = 0\n[[providers]]\nname = \"p\"\nendpoints = [\"http://127.0.0.1:9\"]\ncache_ttl_secs = 0\n",
    )
    .unwrap();
    let out = Command::new(env!("CARGO_BIN_EXE_tollgate"))
        .args(["check-config", "--config"])
        .arg(&bad)
        .output()
        .unwrap();
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    for path in [
        "routing.sticky.min_prompt_tokens",
        "routing.sticky.max_entries",
        "providers[0].cache_ttl_secs",
    ] {
        assert!(err.contains(path), "{path} not in {err}");
    }
    let _ = std::fs::remove_dir_all(dir);
}

/// Which fake's count grew since `before`, when exactly one did.
fn grown(fakes: &[FakeOpenAi], before: &[usize]) -> usize {
    let grew: Vec<usize> = (0..fakes.len())
        .filter(|&i| fakes[i].chat_count() > before[i])
        .collect();
    assert_eq!(grew.len(), 1, "one fake answered: {grew:?}");
    grew[0]
}

#[tokio::test]
async fn the_doors_name_conversations_by_user_id_and_by_the_previous_response_chain() {
    let (fakes, gw, _) = start("", false).await;
    let counts = || fakes.iter().map(FakeOpenAi::chat_count).collect::<Vec<_>>();
    let auth = format!("Bearer {}", gw.key);
    let headers = [
        ("Content-Type", "application/json"),
        ("Authorization", auth.as_str()),
        ("anthropic-version", "2023-06-01"),
    ];
    // An Anthropic client's `metadata.user_id`, small prompts: one endpoint.
    let msg = json!({"model": "m-1", "max_tokens": 50, "metadata": {"user_id": "u-1"},
        "messages": [{"role": "user", "content": "hi"}]});
    let mut served = Vec::new();
    for _ in 0..4 {
        let before = counts();
        let r = request(
            gw.addr,
            "POST",
            "/v1/messages",
            &headers,
            msg.to_string().as_bytes(),
        )
        .await;
        assert_eq!(r.status, 200, "{}", r.text());
        served.push(grown(&fakes, &before));
    }
    assert!(served.iter().all(|&f| f == served[0]), "{served:?}");
    // A Responses chain: every turn after the first continues it, and stays where the second
    // was served (the first, small and unnamed, is round robin).
    let mut previous: Option<String> = None;
    let mut served = Vec::new();
    for n in 0..5 {
        let mut body = json!({"model": "m-1", "input": format!("question {n}")});
        if let Some(p) = &previous {
            body["previous_response_id"] = json!(p);
        }
        let before = counts();
        let r = request(
            gw.addr,
            "POST",
            "/v1/responses",
            &headers,
            body.to_string().as_bytes(),
        )
        .await;
        assert_eq!(r.status, 200, "{}", r.text());
        previous = Some(r.json()["id"].as_str().unwrap().to_owned());
        served.push(grown(&fakes, &before));
    }
    assert!(served[1..].iter().all(|&f| f == served[1]), "{served:?}");
}

#[tokio::test]
async fn odd_session_ids_are_hashed_never_refused() {
    let (fakes, gw, _) = start("", false).await;
    for key in [
        json!({"nested": [1, 2]}),
        json!(12345),
        json!(""),
        json!(null),
        json!("é\u{1F600}"),
    ] {
        let body = json!({"model": "m-1", "messages": user("hi"), "prompt_cache_key": key});
        let served = served_by(&gw, &fakes, &body, 3).await;
        assert!(served.iter().all(|&f| f == served[0]), "{key}: {served:?}");
    }
    let auth = format!("Bearer {}", gw.key);
    let long = "s".repeat(4000);
    let body = json!({"model": "m-1", "messages": user("hi")}).to_string();
    for id in [long.as_str(), " ", "a b\tc"] {
        let headers = [
            ("Content-Type", "application/json"),
            ("Authorization", auth.as_str()),
            ("x-session-id", id),
        ];
        let r = request(
            gw.addr,
            "POST",
            "/v1/chat/completions",
            &headers,
            body.as_bytes(),
        )
        .await;
        assert_eq!(r.status, 200, "{}", r.text());
    }
    assert!(gw.is_healthy().await);
}

/// Sends `body` `n` times; which fake served each.
async fn served_by(gw: &Gateway, fakes: &[FakeOpenAi], body: &Value, n: usize) -> Vec<usize> {
    let mut served = Vec::new();
    for _ in 0..n {
        let before: Vec<usize> = fakes.iter().map(FakeOpenAi::chat_count).collect();
        let r = gw.chat(body.clone()).await;
        assert_eq!(r.status, 200, "{}", r.text());
        served.push(grown(fakes, &before));
    }
    served
}

#[tokio::test]
async fn without_redis_a_conversation_is_round_robin_and_never_an_error() {
    let port = free_port();
    let Some(redis) = PrivateRedis::start(port) else {
        return skip("no redis-server on this machine to kill and restart");
    };
    let mut fakes = Vec::new();
    for name in ["a", "b", "c"] {
        fakes.push(FakeOpenAi::start(name).await);
    }
    let cfg = format!(
        "{FAST_TIMEOUTS}{}{}",
        provider("p", &[&fakes[0], &fakes[1], &fakes[2]], ""),
        model("m-1", "p", "economy", ""),
    );
    let opts = Opts {
        redis_url: Some(format!("redis://127.0.0.1:{port}/")),
        ..Opts::default()
    };
    let gw = Gateway::start_opts(tollgate_bin!(), &cfg, opts).await;
    let body = json!({"model": "m-1", "messages": user("hi"), "prompt_cache_key": "k"});
    let served = served_by(&gw, &fakes, &body, 4).await;
    assert!(
        served.iter().all(|&f| f == served[0]),
        "through Redis: {served:?}"
    );
    redis.kill();
    let served = served_by(&gw, &fakes, &body, 6).await;
    let mut spread = served.clone();
    spread.sort();
    spread.dedup();
    assert_eq!(
        spread.len(),
        3,
        "no affinity without Redis: round robin {served:?}"
    );
    assert!(gw.is_healthy().await);
    let _redis = PrivateRedis::start(port).expect("restart redis");
    let t = std::time::Instant::now();
    loop {
        let served = served_by(&gw, &fakes, &body, 4).await;
        if served[1..].iter().all(|&f| f == served[1]) {
            break;
        }
        assert!(
            t.elapsed().as_secs() < 15,
            "sticky again once Redis is back: {served:?}"
        );
        tokio::time::sleep(std::time::Duration::from_millis(200)).await;
    }
}

#[tokio::test]
async fn a_tier_conversation_keeps_the_model_it_failed_over_to_while_a_new_one_takes_the_first() {
    let (a, b) = (FakeOpenAi::start("a").await, FakeOpenAi::start("b").await);
    let cfg = format!(
        "{FAST_TIMEOUTS}{}{}{}{}",
        provider("pa", &[&a], ""),
        provider("pb", &[&b], ""),
        model("econ-a", "pa", "economy", ""),
        model("econ-b", "pb", "economy", ""),
    );
    let gw = Gateway::start(tollgate_bin!(), &cfg).await;
    let ask = |session: &str| json!({"model": "economy", "messages": user("hi"), "prompt_cache_key": session});
    let model_of = |r: Response| {
        assert_eq!(r.status, 200, "{}", r.text());
        r.json()["model"].as_str().unwrap().to_owned()
    };
    assert_eq!(
        model_of(gw.chat(ask("s1")).await),
        "econ-a",
        "the tier's first pick"
    );
    a.set_mode(Mode::Status(500));
    assert_eq!(model_of(gw.chat(ask("s1")).await), "econ-b", "failed over");
    a.set_mode(Mode::Ok);
    for _ in 0..3 {
        assert_eq!(
            model_of(gw.chat(ask("s1")).await),
            "econ-b",
            "kept while cached"
        );
    }
    assert_eq!(
        model_of(gw.chat(ask("s2")).await),
        "econ-a",
        "a new conversation"
    );
    assert_eq!(model_of(gw.chat(ask("s2")).await), "econ-a");
}

#[tokio::test]
async fn an_anthropic_conversation_sticks_reads_its_cache_and_is_kept_the_hour_it_asked_for() {
    let mut fakes = Vec::new();
    for name in ["a", "b", "c"] {
        let f = FakeAnthropic::start(name).await;
        f.set_mode(AnthropicMode::PrefixCache);
        fakes.push(f);
    }
    let cfg = format!(
        "{FAST_TIMEOUTS}{}{}",
        anthropic_provider("claude", &[&fakes[0], &fakes[1], &fakes[2]], ""),
        model(
            "claude-1",
            "claude",
            "economy",
            "cache_read_credits_per_1k = 0.1"
        ),
    );
    let gw = Gateway::start(tollgate_bin!(), &cfg).await;
    let auth = format!("Bearer {}", gw.key);
    let headers = [
        ("Content-Type", "application/json"),
        ("Authorization", auth.as_str()),
        ("anthropic-version", "2023-06-01"),
    ];
    let system = json!([{"type": "text", "text": system_prompt(),
        "cache_control": {"type": "ephemeral", "ttl": "1h"}}]);
    let (mut messages, mut last_prompt, mut warm) = (Vec::new(), 0, 0);
    let mut charged = Vec::new();
    for n in 0..8 {
        messages.push(json!({"role": "user", "content": format!("Question {n}?")}));
        let body =
            json!({"model": "claude-1", "max_tokens": 100, "system": system, "messages": messages});
        let r = request(
            gw.addr,
            "POST",
            "/v1/messages",
            &headers,
            body.to_string().as_bytes(),
        )
        .await;
        assert_eq!(r.status, 200, "turn {n}: {}", r.text());
        let reply = r.json();
        let u = &reply["usage"];
        let (input, read) = (
            u["input_tokens"].as_i64().unwrap(),
            u["cache_read_input_tokens"].as_i64().unwrap(),
        );
        let prompt = tollgate_testkit::anthropic::prompt_of(&body);
        assert_eq!(
            (input + read) as u64,
            tokens(&prompt),
            "the fake counts what was sent"
        );
        if n > 0 && read as u64 == last_prompt {
            warm += 1;
        }
        last_prompt = tokens(&prompt);
        let output = u["output_tokens"].as_i64().unwrap();
        let id = r.header("x-request-id").unwrap().to_owned();
        charged.push((id, input * 1_000 + read * 100 + output * 2_000));
        messages.push(json!({"role": "assistant", "content": reply["content"]}));
    }
    assert!(warm >= 7, "warm turns: {warm} of 8");
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
    loop {
        let usage = gw.usage(&gw.key).await;
        let rows = usage["recent"].as_array().unwrap().clone();
        let found: Vec<Option<&Value>> = charged
            .iter()
            .map(|(id, _)| rows.iter().find(|r| r["request_id"] == id.as_str()))
            .collect();
        if found.iter().all(Option::is_some) {
            for ((_, expected), row) in charged.iter().zip(found) {
                assert_eq!(micros(&row.unwrap()["credits"]), *expected);
            }
            break;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "usage rows missing: {usage}"
        );
        tokio::time::sleep(std::time::Duration::from_millis(200)).await;
    }
    // The affinity lives as long as the hour the breakpoint asked for, not the default five
    // minutes.
    let (Some(prefix), Some(url)) = (gw.redis_prefix(), redis_url()) else {
        return skip("the affinity's lifetime is read in Redis (TOLLGATE_TEST_REDIS_URL)");
    };
    let client = ::redis::Client::open(url).unwrap();
    let mut conn = client.get_multiplexed_async_connection().await.unwrap();
    let keys: Vec<String> = ::redis::cmd("KEYS")
        .arg(format!("{prefix}:sticky:*"))
        .query_async(&mut conn)
        .await
        .unwrap();
    assert_eq!(keys.len(), 1, "{keys:?}");
    let ttl: i64 = ::redis::cmd("PTTL")
        .arg(&keys[0])
        .query_async(&mut conn)
        .await
        .unwrap();
    assert!((3_000_000..=3_600_000).contains(&ttl), "PTTL {ttl}");
}
