//! Traces and the GenAI histograms end to end, one file per behaviour: `traces` (a streamed
//! request that fails over once, as one trace continuing the client's, with its legs, its
//! settlement and the GenAI attributes; a tool call's span; `traceparent` passed to the
//! provider and the tool server; no key and no prompt in any export), `outage` (a collector
//! down or hanging changes no answer; the spans are dropped and counted), `sampling` (ratio 0
//! exports only failures, ratio 1 everything, a client's flag honoured, garbage headers
//! ignored), `histograms` (a first token after 300 ms in its bucket, time per output token),
//! `config` (`check-config` refuses bad `[telemetry]` values by key path). The collector
//! decodes every export with the official `opentelemetry-proto` package (`testkit`'s
//! [`Collector`]). SQLite, and Postgres + Redis when set (traces touch no store).

mod config;
mod histograms;
mod outage;
mod sampling;
mod traces;

use std::time::Duration;

use serde_json::Value;
use tollgate_testkit::*;

/// A client's `traceparent`, sampled, and its trace id.
pub const CLIENT_TRACE: &str = "4bf92f3577b34da6a3ce929d0e0e4736";
pub const CLIENT_SPAN: &str = "00f067aa0ba902b7";

pub fn client_traceparent(flags: &str) -> String {
    format!("00-{CLIENT_TRACE}-{CLIENT_SPAN}-{flags}")
}

/// A Python that can run the collector, or `None` (the test is skipped, loudly).
pub fn python() -> Option<String> {
    let py = python_with(OTLP_IMPORT);
    if py.is_none() {
        skip("no Python with opentelemetry-proto (./dev test installs it)");
    }
    py
}

/// `[telemetry]` exporting to `endpoint` at `ratio`, exporting often (tests wait for it).
pub fn telemetry(endpoint: &str, ratio: f64, extra: &str) -> String {
    format!(
        "[telemetry]\notlp_endpoint = \"{endpoint}\"\nsample_ratio = {ratio}\nexport_interval_ms = 50\nexport_timeout_ms = 500\n{extra}\n"
    )
}

/// Two economy models on two providers (`econ-a` first), and `[telemetry]`.
pub async fn two_providers(telemetry: &str) -> (FakeOpenAi, FakeOpenAi, Gateway) {
    let a = FakeOpenAi::start("a").await;
    let b = FakeOpenAi::start("b").await;
    let cfg = format!(
        "{FAST_TIMEOUTS}{}{}{}{}{telemetry}",
        provider("pa", &[&a], ""),
        provider("pb", &[&b], ""),
        model("econ-a", "pa", "economy", ""),
        model("econ-b", "pb", "economy", ""),
    );
    let gw = Gateway::start(tollgate_bin!(), &cfg).await;
    (a, b, gw)
}

/// A request with these extra headers and the gateway's key.
pub async fn chat_with(gw: &Gateway, body: &Value, headers: &[(&str, &str)]) -> Response {
    let auth = format!("Bearer {}", gw.key);
    let mut h = vec![
        ("Authorization", auth.as_str()),
        ("Content-Type", "application/json"),
    ];
    h.extend_from_slice(headers);
    request(
        gw.addr,
        "POST",
        "/v1/chat/completions",
        &h,
        body.to_string().as_bytes(),
    )
    .await
}

/// The spans of trace `trace_id` among `spans`.
pub fn of_trace<'a>(spans: &'a [Value], trace_id: &str) -> Vec<&'a Value> {
    spans.iter().filter(|s| s["trace_id"] == trace_id).collect()
}

/// Waits for at least `n` spans, and a moment for stragglers.
pub async fn spans_at_least(c: &Collector, n: usize) -> Vec<Value> {
    let spans = c.wait_for(Duration::from_secs(10), |s| s.len() >= n).await;
    for s in &spans {
        assert!(
            s.get("error").is_none(),
            "the collector could not decode: {s}"
        );
    }
    spans
}
