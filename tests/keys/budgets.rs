//! Key budgets (issue 29): a key's credit cap per period is held like the balance (a request's
//! hold counts against what is left of it), so concurrent requests on any number of instances
//! never overrun it; over budget is 402 `insufficient_credits` naming the budget and when it
//! resets; the budget starts over at its period's boundary; `GET /api/v1/keys` shows what the
//! key spent. Runs on SQLite, and on Postgres + Redis when set (two instances there).

use serde_json::{json, Value};
use tollgate_testkit::openai::Mode;
use tollgate_testkit::*;

/// `gw`'s API with `key`.
async fn api(gw: &Gateway, method: &str, path: &str, key: &str, body: &Value) -> Response {
    gw.api_as(key, method, path, body).await
}

/// A key of the gateway's account with `settings`; returns (secret, id).
async fn key_with(gw: &Gateway, settings: Value) -> (String, String) {
    let mut body = json!({"name": "agent"});
    body.as_object_mut()
        .unwrap()
        .extend(settings.as_object().unwrap().clone());
    let r = api(gw, "POST", "/api/v1/keys", &gw.key, &body).await;
    assert_eq!(r.status, 201, "{}", r.text());
    let v = r.json();
    (
        v["key"].as_str().unwrap().to_owned(),
        v["id"].as_str().unwrap().to_owned(),
    )
}

async fn listed(gw: &Gateway, id: &str) -> Value {
    listed_by(gw, &gw.key, id).await
}

/// The key `id` as `GET /api/v1/keys` with `key` (of its account) shows it on `gw`.
async fn listed_by(gw: &Gateway, key: &str, id: &str) -> Value {
    let r = api(gw, "GET", "/api/v1/keys", key, &json!({})).await;
    assert_eq!(r.status, 200, "{}", r.text());
    r.json()["data"]
        .as_array()
        .unwrap()
        .iter()
        .find(|k| k["id"] == id)
        .cloned()
        .unwrap()
}

/// Each request: 10 prompt + 100 completion tokens at 1 and 2 credits per 1K = 0.21 credits;
/// `max_tokens` 100 keeps its hold near that.
fn ask() -> Value {
    json!({"model": "m", "messages": user("hi"), "max_tokens": 100})
}

#[tokio::test]
async fn a_budget_caps_what_a_key_spends_and_says_when_it_resets() {
    let fake = FakeOpenAi::builder("p")
        .mode(Mode::Usage(10, 100))
        .start()
        .await;
    let gw = Gateway::start(tollgate_bin!(), &one_model_config(&fake, "m")).await;
    let (key, id) = key_with(&gw, json!({"budget_credits": 1, "budget_period": "day"})).await;
    assert_eq!(listed(&gw, &id).await["spent_credits"], json!(0.0));
    let before = gw.balance(&gw.key).await;
    let mut served = 0;
    let refusal = loop {
        let r = gw.chat_as(Some(&key), &ask()).await;
        if r.status != 200 {
            break r;
        }
        served += 1;
        assert!(served < 20, "the budget never ran out");
    };
    let e = refusal.error(402, "insufficient_credits");
    let msg = e["error"]["message"].as_str().unwrap();
    assert!(msg.contains("budget of 1 credits per day"), "{msg}");
    assert!(msg.contains("resets at"), "{msg}");
    // 0.21 credits each: four fit in 1 credit; the fifth gets what is left (its max_tokens
    // lowered to it, as for a balance running out), and then nothing is left.
    assert_eq!(served, 5);
    let k = listed(&gw, &id).await;
    let spent = micros(&k["spent_credits"]);
    assert_eq!(spent, 1_000_000);
    assert_eq!(before - gw.balance(&gw.key).await, spent);
    assert_eq!(k["budget_credits"], json!(1.0));
    assert_eq!(k["budget_period"], "day");
    let tomorrow = k["budget_resets_at"].as_i64().unwrap();
    assert_eq!(tomorrow % 86_400, 0, "{k}");
    // The account's other keys are not limited by it.
    assert_eq!(gw.chat_as(Some(&gw.key), &ask()).await.status, 200);

    // A bigger budget lets it go on; a lifetime one too.
    let r = api(
        &gw,
        "PATCH",
        &format!("/api/v1/keys/{id}"),
        &gw.key,
        &json!({"budget_credits": 2, "budget_period": "lifetime"}),
    )
    .await;
    assert_eq!(r.status, 200, "{}", r.text());
    assert_eq!(r.json()["budget_period"], "lifetime");
    assert_eq!(r.json()["budget_resets_at"], Value::Null);
    tokio::time::sleep(std::time::Duration::from_secs(5)).await; // the key cache
    assert_eq!(gw.chat_as(Some(&key), &ask()).await.status, 200);
    // A successor has the same settings.
    let r = api(
        &gw,
        "POST",
        &format!("/api/v1/keys/{id}/rotate"),
        &gw.key,
        &json!({"grace_seconds": 0}),
    )
    .await;
    assert_eq!(r.status, 201, "{}", r.text());
    assert_eq!(r.json()["budget_credits"], json!(2.0));
    assert_eq!(r.json()["budget_period"], "lifetime");
    let id = r.json()["id"].as_str().unwrap().to_owned();
    // Removing the budget removes the cap.
    let r = api(
        &gw,
        "PATCH",
        &format!("/api/v1/keys/{id}"),
        &gw.key,
        &json!({"budget_credits": null}),
    )
    .await;
    assert_eq!(r.status, 200, "{}", r.text());
    assert_eq!(r.json()["budget_credits"], Value::Null);
}

#[tokio::test]
async fn bad_settings_are_refused_by_name_and_change_nothing() {
    let fake = FakeOpenAi::start("p").await;
    let gw = Gateway::start(tollgate_bin!(), &one_model_config(&fake, "m")).await;
    let (_, id) = key_with(&gw, json!({"budget_credits": 5, "requests_per_minute": 10})).await;
    let before = listed(&gw, &id).await;
    for (body, field) in [
        (json!({"budget_credits": -5}), "budget_credits"),
        (json!({"budget_credits": 0}), "budget_credits"),
        (json!({"budget_credits": 1e13}), "budget_credits"),
        (json!({"budget_credits": "ten"}), "budget_credits"),
        (json!({"budget_period": "year"}), "budget_period"),
        (json!({"requests_per_minute": 0}), "requests_per_minute"),
        (json!({"tokens_per_minute": -1}), "tokens_per_minute"),
        (json!({"concurrent_requests": 0}), "concurrent_requests"),
        (json!({"concurrent_requests": 2.5}), "concurrent_requests"),
        (
            json!({"allowed_models": ["no-such-model"]}),
            "allowed_models[0]",
        ),
        (json!({"expires_at": 1_000_000}), "expires_at"),
        (
            json!({"budget_credits": 3, "tokens_per_minute": 0}),
            "tokens_per_minute",
        ),
        (json!({"colour": "red"}), "colour"),
    ] {
        let r = api(&gw, "PATCH", &format!("/api/v1/keys/{id}"), &gw.key, &body).await;
        let e = r.error(400, "invalid_request");
        let msg = e["error"]["message"].as_str().unwrap();
        assert!(msg.starts_with(&format!("{field}:")), "{body}: {msg}");
        // The same on creation: no key is made.
        let mut create = body.clone();
        create["name"] = json!("bad");
        let r = api(&gw, "POST", "/api/v1/keys", &gw.key, &create).await;
        r.error(400, "invalid_request");
    }
    assert_eq!(listed(&gw, &id).await, before);
    let keys = api(&gw, "GET", "/api/v1/keys", &gw.key, &json!({}))
        .await
        .json();
    assert!(keys["data"]
        .as_array()
        .unwrap()
        .iter()
        .all(|k| k["name"] != "bad"));
    assert!(gw.is_healthy().await);
}

#[tokio::test]
async fn fifty_concurrent_requests_over_two_instances_never_overrun_the_budget() {
    if redis_url().is_none() {
        return skip(
            "two instances share a key's budget through Redis: TOLLGATE_TEST_REDIS_URL is not set",
        );
    }
    let fake = FakeOpenAi::builder("p")
        .mode(Mode::Slow(std::time::Duration::from_millis(20)))
        .start()
        .await;
    let cfg = one_model_config(&fake, "m");
    let gw = Gateway::start(tollgate_bin!(), &cfg).await;
    let other = gw.second(tollgate_bin!(), &cfg).await;
    // 2.5 credits: about a dozen requests' holds, far fewer than 50.
    let (key, id) = key_with(
        &gw,
        json!({"budget_credits": 2.5, "budget_period": "month"}),
    )
    .await;
    let before = gw.balance(&gw.key).await;
    let mut tasks = Vec::new();
    for i in 0..50 {
        let addr = if i % 2 == 0 { gw.addr } else { other.addr };
        let key = key.clone();
        let stream = i % 3 == 0;
        tasks.push(tokio::spawn(async move {
            let body =
                json!({"model": "m", "messages": user("hi"), "max_tokens": 100, "stream": stream});
            let b = serde_json::to_vec(&body).unwrap();
            let auth = format!("Bearer {key}");
            request(
                addr,
                "POST",
                "/v1/chat/completions",
                &[
                    ("Content-Type", "application/json"),
                    ("Authorization", &auth),
                ],
                &b,
            )
            .await
            .status
        }));
    }
    let mut statuses = Vec::new();
    for t in tasks {
        statuses.push(t.await.unwrap());
    }
    let served = statuses.iter().filter(|s| **s == 200).count();
    let refused = statuses.iter().filter(|s| **s == 402).count();
    assert_eq!(served + refused, 50, "{statuses:?}");
    assert!(served > 0 && refused > 0, "{statuses:?}");
    // The books: what the account paid is what the key spent, within its budget.
    books::settled(&gw.config_db(), &gw.user_id).await;
    let drop = before - gw.balance(&gw.key).await;
    let k = listed(&gw, &id).await;
    let spent = micros(&k["spent_credits"]);
    assert_eq!(spent, drop, "{k}");
    assert!(drop <= 2_500_000, "the budget was overrun: {drop} µcr");
    assert_eq!(
        micros(&listed_by(&other, &gw.key, &id).await["spent_credits"]),
        drop
    );
}

#[tokio::test]
async fn the_budget_starts_over_at_the_period_boundary() {
    // The gateway's clock 15 s before the next UTC midnight.
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_millis() as i64;
    let midnight = (now / 86_400_000 + 1) * 86_400_000;
    let offset = midnight - now - 15_000;
    let started = std::time::Instant::now();
    let fake = FakeOpenAi::builder("p")
        .mode(Mode::Usage(10, 100))
        .start()
        .await;
    let opts = Opts {
        env: vec![("TOLLGATE_CLOCK_OFFSET_MS".into(), offset.to_string())],
        ..Opts::default()
    };
    let gw = Gateway::start_opts(tollgate_bin!(), &one_model_config(&fake, "m"), opts).await;
    let (key, id) = key_with(&gw, json!({"budget_credits": 0.3, "budget_period": "day"})).await;
    // 0.21, then the 0.09 left (max_tokens lowered to it), then nothing.
    assert_eq!(gw.chat_as(Some(&key), &ask()).await.status, 200);
    let last = gw.chat_as(Some(&key), &ask()).await;
    assert_eq!(last.status, 200, "{}", last.text());
    gw.chat_as(Some(&key), &ask())
        .await
        .error(402, "insufficient_credits");
    let k = listed(&gw, &id).await;
    assert_eq!(micros(&k["spent_credits"]), 300_000);
    assert_eq!(k["budget_resets_at"].as_i64().unwrap() * 1000, midnight);
    assert!(
        started.elapsed() < std::time::Duration::from_secs(14),
        "too slow to see the day turn"
    );
    tokio::time::sleep(std::time::Duration::from_secs(16).saturating_sub(started.elapsed())).await;
    // A new day: the budget is whole again.
    assert_eq!(gw.chat_as(Some(&key), &ask()).await.status, 200);
    let k = listed(&gw, &id).await;
    assert_eq!(micros(&k["spent_credits"]), 210_000);
    assert_eq!(
        k["budget_resets_at"].as_i64().unwrap() * 1000,
        midnight + 86_400_000
    );
}

#[tokio::test]
async fn a_burst_of_a_budgeted_keys_first_requests_is_served() {
    // The budget's spend is read from the ledger once, not once per request of the burst.
    let fake = FakeOpenAi::builder("p")
        .mode(Mode::Usage(10, 100))
        .start()
        .await;
    let gw = Gateway::start(tollgate_bin!(), &one_model_config(&fake, "m")).await;
    let (key, id) = key_with(
        &gw,
        json!({"budget_credits": 1000, "budget_period": "week"}),
    )
    .await;
    let mut tasks = Vec::new();
    for i in 0..120 {
        let (addr, key) = (gw.addr, key.clone());
        tasks.push(tokio::spawn(async move {
            let body = json!({"model": "m", "messages": user("hi"), "max_tokens": 100, "stream": i % 2 == 0});
            let auth = format!("Bearer {key}");
            let headers = [("Content-Type", "application/json"), ("Authorization", auth.as_str())];
            request(addr, "POST", "/v1/chat/completions", &headers, body.to_string().as_bytes()).await.status
        }));
    }
    for t in tasks {
        assert_eq!(t.await.unwrap(), 200);
    }
    assert_eq!(
        micros(&listed(&gw, &id).await["spent_credits"]),
        120 * 210_000
    );
}
