use std::time::{Duration, Instant};

use serde_json::json;
use tollgate_testkit::*;

use super::*;

/// With the collector in `mode`, requests are answered exactly as with none, and the spans
/// that cannot be exported are dropped and counted (a small queue: the full queue too).
async fn requests_are_served_unchanged_with_the_collector(mode: CollectorMode) {
    let Some(py) = python() else { return };
    let collector = Collector::start(&py, mode).await;
    let extra = "queue_spans = 8\nbatch_spans = 4\n";
    let (_a, _b, gw) = two_providers(&telemetry(&collector.endpoint(), 1.0, extra)).await;
    let fake = FakeOpenAi::start("a").await;
    let plain = Gateway::start(tollgate_bin!(), &one_model_config(&fake, "econ-a")).await;
    let started = Instant::now();
    for stream in [false, true, false, true, false, true, false, true] {
        let body = json!({"model": "econ-a", "stream": stream, "messages": user("hi")});
        let (traced, untraced) = (gw.chat(body.clone()).await, plain.chat(body).await);
        assert_eq!(traced.status, 200, "{}", traced.text());
        assert_eq!(traced.status, untraced.status);
        if stream {
            assert_eq!(traced.sse_data(), untraced.sse_data());
        } else {
            let (mut t, mut u) = (traced.json(), untraced.json());
            for v in [&mut t, &mut u] {
                v["id"] = json!(null);
                v["created"] = json!(null);
                v["usage"]["cost"] = json!(null);
                v["usage"]["cost_details"] = json!(null);
            }
            assert_eq!(t, u);
        }
    }
    // Eight requests, none waiting on the collector (its export timeout is 500 ms).
    assert!(
        started.elapsed() < Duration::from_secs(8),
        "{:?}",
        started.elapsed()
    );
    let dropped = "tollgate_trace_spans_dropped_total";
    let start = Instant::now();
    while gw.metric(dropped).await < 1.0 && start.elapsed() < Duration::from_secs(10) {
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert!(gw.metric(dropped).await >= 1.0, "no drop counted");
    assert_eq!(gw.metric("tollgate_trace_spans_exported_total").await, 0.0);
    assert!(gw.is_healthy().await);
}

#[tokio::test]
async fn a_collector_that_is_down_changes_no_answer_and_the_drops_are_counted() {
    requests_are_served_unchanged_with_the_collector(CollectorMode::Down).await;
}

#[tokio::test]
async fn a_collector_that_hangs_changes_no_answer_and_the_drops_are_counted() {
    requests_are_served_unchanged_with_the_collector(CollectorMode::Hanging).await;
}
