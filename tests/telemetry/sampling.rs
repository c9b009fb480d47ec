use std::time::Duration;

use serde_json::json;
use tollgate_testkit::*;

use super::*;

#[tokio::test]
async fn at_ratio_zero_only_a_failed_request_is_exported() {
    let Some(py) = python() else { return };
    let collector = Collector::start(&py, CollectorMode::Up).await;
    let (a, b, gw) = two_providers(&telemetry(&collector.endpoint(), 0.0, "")).await;
    for stream in [false, true, false] {
        let r = gw
            .chat(json!({"model": "econ-a", "stream": stream, "messages": user("hi")}))
            .await;
        assert_eq!(r.status, 200);
    }
    // A client that says "not sampled" is not traced either.
    let r = chat_with(
        &gw,
        &json!({"model": "econ-a", "messages": user("hi")}),
        &[("traceparent", &client_traceparent("00"))],
    )
    .await;
    assert_eq!(r.status, 200);
    a.set_mode(Mode::Status(500));
    b.set_mode(Mode::Status(500));
    let r = chat_with(
        &gw,
        &json!({"model": "econ-a", "messages": user("hi")}),
        &[("traceparent", &client_traceparent("00"))],
    )
    .await;
    assert_eq!(r.status, 502, "{}", r.text());
    let spans = spans_at_least(&collector, 3).await;
    tokio::time::sleep(Duration::from_millis(300)).await;
    let spans = collector
        .spans()
        .into_iter()
        .chain(spans)
        .collect::<Vec<_>>();
    let servers: Vec<_> = spans.iter().filter(|s| s["kind"] == 2).collect();
    assert!(!servers.is_empty(), "the failure was exported");
    for s in &servers {
        assert_eq!(s["attributes"]["http.response.status_code"], 502, "{s:#}");
        assert_eq!(s["status_code"], 2, "an error span");
        assert_eq!(s["attributes"]["error.type"], "502");
        assert_eq!(
            s["trace_id"], CLIENT_TRACE,
            "the client's trace, though unsampled"
        );
    }
    assert_eq!(of_trace(&spans, CLIENT_TRACE).len(), spans.len());
}

#[tokio::test]
async fn at_ratio_one_every_request_is_exported_and_garbage_headers_start_a_new_trace() {
    let Some(py) = python() else { return };
    let collector = Collector::start(&py, CollectorMode::Up).await;
    let (_a, b, gw) = two_providers(&telemetry(&collector.endpoint(), 1.0, "")).await;
    let garbage = [
        "garbage",
        "00-00000000000000000000000000000000-00f067aa0ba902b7-01",
        "00-4BF92F3577B34DA6A3CE929D0E0E4736-00F067AA0BA902B7-01",
        "ff-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01",
        "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01-extra",
    ];
    // Longer than any tracestate is passed on.
    let state = "k=".to_owned() + &"v".repeat(600);
    for g in garbage {
        let r = chat_with(
            &gw,
            &json!({"model": "econ-b", "messages": user("hi")}),
            &[("traceparent", g), ("tracestate", &state)],
        )
        .await;
        assert_eq!(r.status, 200, "{g}: {}", r.text());
        let sent = b.requests().into_iter().last().unwrap();
        let tp = sent
            .header("traceparent")
            .expect("a new trace is passed on");
        assert!(
            !tp.contains("4bf92f3577b34da6"),
            "{g} was not ignored: {tp}"
        );
        assert_eq!(sent.header("tracestate"), None);
    }
    let spans = spans_at_least(&collector, 10).await;
    let servers: Vec<_> = spans.iter().filter(|s| s["kind"] == 2).collect();
    assert_eq!(servers.len(), garbage.len(), "every request exported");
    let mut traces: Vec<_> = servers.iter().map(|s| s["trace_id"].clone()).collect();
    traces.dedup();
    assert_eq!(traces.len(), garbage.len(), "each its own new trace");
    for s in servers {
        assert_eq!(
            s["parent_span_id"], "",
            "a trace started here has no parent"
        );
    }
}
