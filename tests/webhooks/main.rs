//! Events sent to customers (issue 52), one file per behaviour: `signed` (a real receiver gets
//! signed events that verify with the README's Python snippet; the delivery log; a rotated
//! secret), `retries` (a receiver down for a minute then up gets every event once by its id,
//! in order), `budgets` (a key's budget crossing 80 % under 20 concurrent requests, on two
//! instances with Redis, sends one event), `events` (payment received, a tool server's move,
//! keys expiring and expired, a balance below its threshold once per crossing), `bad_input`
//! (private addresses refused, every endpoint's bad input and someone else's endpoint refused,
//! nothing written). Runs on SQLite, and on Postgres + Redis when set.

mod bad_input;
mod budgets;
mod events;
mod retries;
mod signed;

use std::time::Duration;

use serde_json::{json, Value};
use tollgate_testkit::openai::Mode;
use tollgate_testkit::*;

/// `[webhooks]` for tests: loopback receivers allowed, quick polls and retries.
pub const WEBHOOKS: &str = "[webhooks]\nallow_private_targets = true\nretry_base_ms = 200\nmax_backoff_secs = 2\npoll_interval_ms = 100\nsweep_interval_secs = 1\ntimeout_secs = 2\n";

/// How long a test waits for a delivery.
pub const WAIT: Duration = Duration::from_secs(20);

/// One model costing 0.21 credits a request (10 prompt and 100 completion tokens), and
/// `extra` config sections.
pub async fn config(extra: &str) -> (FakeOpenAi, String) {
    let fake = FakeOpenAi::builder("p")
        .mode(Mode::Usage(10, 100))
        .start()
        .await;
    let cfg = format!("{}{WEBHOOKS}{extra}", one_model_config(&fake, "m"));
    (fake, cfg)
}

pub async fn gateway() -> (FakeOpenAi, Gateway) {
    let (fake, cfg) = config("").await;
    (fake, Gateway::start(tollgate_bin!(), &cfg).await)
}

/// Registers an endpoint; the response (201 with the secret, or the error).
pub async fn register(gw: &Gateway, key: &str, body: Value) -> Response {
    gw.api_as(key, "POST", "/api/v1/webhooks", &body).await
}

/// An endpoint at `url` for `events`: its id and secret.
pub async fn endpoint(gw: &Gateway, key: &str, url: &str, events: &[&str]) -> (String, String) {
    let r = register(gw, key, json!({"url": url, "events": events})).await;
    assert_eq!(r.status, 201, "{}", r.text());
    let v = r.json();
    (
        v["id"].as_str().unwrap().to_owned(),
        v["secret"].as_str().unwrap().to_owned(),
    )
}

/// One chat request with `key`: its status.
pub async fn ask(gw: &Gateway, key: &str) -> u16 {
    let body = json!({"model": "m", "messages": user("hi"), "max_tokens": 100});
    gw.chat_as(Some(key), &body).await.status
}

/// The delivery log of endpoint `id`.
pub async fn log(gw: &Gateway, key: &str, id: &str) -> Vec<Value> {
    let r = gw
        .api_as(
            key,
            "GET",
            &format!("/api/v1/webhooks/{id}/deliveries"),
            &json!({}),
        )
        .await;
    assert_eq!(r.status, 200, "{}", r.text());
    r.json()["data"].as_array().unwrap().clone()
}
