use std::time::Duration;

use serde_json::json;
use tollgate_testkit::*;

/// The value of the sample line that starts with `series` exactly (0 when absent).
async fn sample(gw: &Gateway, series: &str) -> f64 {
    let text = get(gw.metrics_addr, "/metrics").await.text();
    text.lines()
        .find(|l| l.starts_with(series) && l[series.len()..].starts_with(' '))
        .and_then(|l| l.rsplit(' ').next()?.parse().ok())
        .unwrap_or(0.0)
}

#[tokio::test]
async fn a_first_token_after_300_ms_lands_in_its_bucket_and_time_per_token_is_observed() {
    let fake = FakeOpenAi::builder("p").words(5).start().await;
    fake.set_mode(Mode::FirstAfter(Duration::from_millis(300)));
    let gw = Gateway::start(tollgate_bin!(), &one_model_config(&fake, "m-1")).await;
    let r = gw
        .chat(json!({"model": "m-1", "stream": true, "messages": user("hi")}))
        .await;
    assert_eq!(r.status, 200, "{}", r.text());
    let ttft = "tollgate_time_to_first_token_seconds_bucket";
    let labels = "model=\"m-1\",provider=\"p\"";
    let at = |le: &'static str| format!("{ttft}{{{labels},le=\"{le}\"}}");
    assert_eq!(sample(&gw, &at("0.25")).await, 0.0, "not within 0.25 s");
    assert_eq!(sample(&gw, &at("0.5")).await, 1.0, "within 0.5 s");
    let count = format!("tollgate_time_per_output_token_seconds_count{{{labels}}}");
    assert_eq!(
        sample(&gw, &count).await,
        1.0,
        "time per output token observed"
    );
    let up = format!("tollgate_upstream_duration_seconds_count{{{labels}}}");
    assert_eq!(sample(&gw, &up).await, 1.0);
    let out = format!("tollgate_tokens_total{{{labels},type=\"output\"}}");
    assert!(sample(&gw, &out).await >= 5.0);
    assert!(sample(&gw, "tollgate_credits_charged_micros_total{model=\"m-1\"}").await > 0.0);
    let dur =
        "tollgate_request_duration_seconds_count{model=\"m-1\",provider=\"p\",route=\"chat\"}";
    assert_eq!(
        sample(&gw, dur).await,
        1.0,
        "request duration by provider too"
    );
    // A JSON reply has no first token of its own: no TTFT.
    fake.set_mode(Mode::Ok);
    gw.chat(json!({"model": "m-1", "messages": user("hi")}))
        .await;
    assert_eq!(
        sample(
            &gw,
            &format!("tollgate_time_to_first_token_seconds_count{{{labels}}}")
        )
        .await,
        1.0
    );
}
