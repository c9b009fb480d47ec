//! What the response-cache tests share: a gateway whose `[response_cache]` section they
//! choose, chat requests with the cache headers they name, and what a reply was charged.

use serde_json::{json, Value};
use tollgate_testkit::*;

/// Model `m` on provider `p` (`fake`), with `section` as the `[response_cache]` section.
pub async fn gateway(fake: &FakeOpenAi, section: &str) -> Gateway {
    Gateway::start(tollgate_bin!(), &config(fake, section)).await
}

pub fn config(fake: &FakeOpenAi, section: &str) -> String {
    format!(
        "{}\n[response_cache]\n{section}\n",
        one_model_config(fake, "m")
    )
}

/// A chat request of `m` asking `content`.
pub fn body(content: &str, stream: bool) -> Value {
    let mut b = json!({"model": "m", "messages": openai::user(content), "max_tokens": 200, "stream": stream});
    if stream {
        b["stream_options"] = json!({"include_usage": true});
    }
    b
}

/// A chat completion of `key` with these extra headers.
pub async fn chat(gw: &Gateway, key: &str, body: &Value, headers: &[(&str, &str)]) -> Response {
    post(gw, key, "/v1/chat/completions", body, headers).await
}

pub async fn post(
    gw: &Gateway,
    key: &str,
    path: &str,
    body: &Value,
    headers: &[(&str, &str)],
) -> Response {
    let auth = format!("Bearer {key}");
    let mut h = vec![
        ("Content-Type", "application/json"),
        ("Authorization", auth.as_str()),
    ];
    h.extend_from_slice(headers);
    let b = serde_json::to_vec(body).unwrap();
    request(gw.addr, "POST", path, &h, &b).await
}

/// Opted in with the header.
pub const ON: &[(&str, &str)] = &[("X-Tollgate-Cache", "on")];

/// What the cache said of the reply (`hit`, `miss`, `bypass`), if anything.
pub fn said(r: &Response) -> Option<&str> {
    r.header("x-tollgate-cache")
}

/// µcr charged, as `X-Credits-Charged` says (a JSON reply).
pub fn charged(r: &Response) -> i64 {
    let h = r.header("x-credits-charged").expect("X-Credits-Charged");
    (h.parse::<f64>().unwrap() * 1e6).round() as i64
}

/// µcr charged, as a stream's final usage says.
pub fn stream_charged(r: &Response) -> i64 {
    let usage = r
        .sse_data()
        .iter()
        .filter_map(|d| serde_json::from_str::<Value>(d).ok())
        .find(|v| v["usage"]["cost"].is_number())
        .unwrap_or_else(|| panic!("no usage with a cost: {}", r.text()));
    micros(&usage["usage"]["cost"])
}

/// A JSON reply without what its charge wrote into it.
pub fn without_cost(r: &Response) -> Value {
    let mut v = r.json();
    if let Some(u) = v["usage"].as_object_mut() {
        u.remove("cost");
        u.remove("cost_details");
    }
    v
}

/// A stream's events without those that carry its cost.
pub fn events_without_cost(r: &Response) -> Vec<String> {
    r.sse_data()
        .into_iter()
        .filter(|d| !d.contains("\"cost\""))
        .collect()
}

/// A new funded account: (user id, key).
pub async fn account(gw: &Gateway) -> (String, String) {
    let (user, key) = gw.signup(&unique_email()).await;
    gw.admin_credits(&user, 1000.0).await;
    (user, key)
}

/// The ids of answered requests.
pub fn ids(rs: &[&Response]) -> Vec<String> {
    rs.iter()
        .map(|r| r.header("x-request-id").unwrap().to_owned())
        .collect()
}
