//! What the request-log tests share: a gateway with a provider key to redact, requests that
//! return their request id, and the record as the API shows it once the writer has written it.

use std::time::{Duration, Instant};

use serde_json::{json, Value};
use sqlx::Row;
use tollgate_testkit::*;

/// The provider's key, as its `api_key_env` gives it to the gateway.
pub const PROVIDER_KEY: &str = "sk-provider-secret-0123456789";

/// One fake provider `p` (its key from the environment) with model `m`; the request log's
/// payload cap at 1024 bytes; `extra` appended.
pub async fn gateway(fake: &FakeOpenAi, extra: &str) -> Gateway {
    let cfg = format!(
        "{FAST_TIMEOUTS}{}{}[telemetry.request_log]\nmax_payload_bytes = 1024\n{extra}",
        provider("p", &[fake], "api_key_env = \"RL_TEST_PROVIDER_KEY\""),
        model("m", "p", "economy", ""),
    );
    Gateway::start_opts(tollgate_bin!(), &cfg, opts()).await
}

pub fn opts() -> Opts {
    Opts {
        env: vec![("RL_TEST_PROVIDER_KEY".into(), PROVIDER_KEY.into())],
        ..Opts::default()
    }
}

/// A chat request of `key` with `content` as its prompt: (status, request id, response).
pub async fn chat(
    gw: &Gateway,
    key: &str,
    model: &str,
    content: &str,
    stream: bool,
) -> (u16, String, Response) {
    let body = json!({"model": model, "messages": openai::user(content), "max_tokens": 50, "stream": stream});
    let r = gw.chat_as(Some(key), &body).await;
    let id = r.header("x-request-id").unwrap_or_default().to_owned();
    (r.status, id, r)
}

/// A new key of the caller's account: (id, key).
pub async fn new_key(gw: &Gateway, key: &str, body: Value) -> (String, String) {
    let r = gw.api_as(key, "POST", "/api/v1/keys", &body).await;
    assert_eq!(r.status, 201, "{}", r.text());
    let v = r.json();
    (
        v["id"].as_str().unwrap().to_owned(),
        v["key"].as_str().unwrap().to_owned(),
    )
}

/// The record of request `id` as `key` reads it, once written (the writer is a moment behind).
pub async fn record(gw: &Gateway, key: &str, id: &str) -> Value {
    let start = Instant::now();
    loop {
        let r = gw
            .api_as(key, "GET", &format!("/api/v1/requests/{id}"), &json!({}))
            .await;
        if r.status == 200 {
            return r.json();
        }
        assert_eq!(r.status, 404, "{}", r.text());
        assert!(
            start.elapsed() < Duration::from_secs(10),
            "no record of {id}"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// `GET /api/v1/requests?{query}` as `key`.
pub async fn list(gw: &Gateway, key: &str, query: &str) -> Response {
    gw.api_as(key, "GET", &format!("/api/v1/requests?{query}"), &json!({}))
        .await
}

/// The ids of a listing's page.
pub fn ids(page: &Value) -> Vec<String> {
    page["data"]
        .as_array()
        .unwrap_or_else(|| panic!("{page}"))
        .iter()
        .map(|r| r["id"].as_str().unwrap().to_owned())
        .collect()
}

/// Every stored column of the wallet's records as one text, read straight from the ledger.
pub async fn stored_text(url: &str, account: &str) -> String {
    let sql = "SELECT request_id, legs, COALESCE(error, ''), COALESCE(request_body, ''), COALESCE(response_body, '') FROM request_log WHERE account_id = $1";
    let rows: Vec<String> = if url.starts_with("sqlite:") {
        let p = sqlx::SqlitePool::connect(url).await.unwrap();
        let rows = sqlx::query(sql).bind(account).fetch_all(&p).await.unwrap();
        let out = rows
            .iter()
            .map(|r| {
                (0..5)
                    .map(|i| r.get::<String, _>(i))
                    .collect::<Vec<_>>()
                    .join("|")
            })
            .collect();
        p.close().await;
        out
    } else {
        let p = sqlx::PgPool::connect(url).await.unwrap();
        let rows = sqlx::query(sql).bind(account).fetch_all(&p).await.unwrap();
        let out = rows
            .iter()
            .map(|r| {
                (0..5)
                    .map(|i| r.get::<String, _>(i))
                    .collect::<Vec<_>>()
                    .join("|")
            })
            .collect();
        p.close().await;
        out
    };
    rows.join("\n")
}
