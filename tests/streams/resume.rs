//! Streams that survive a cut (docs/api.md, "Streams that survive a cut"), on chat completions: a
//! stream opted in whose provider dies, sends an error event or stalls after its first tokens
//! is continued on the next candidate; the client sees one stream, and pays each leg at its
//! model's rates, to the micro-credit. Not opted in, cut in a tool call, or past
//! `max_resumes`, it ends as before, with the error event. Runs on SQLite + in-process
//! counters, and on Postgres + Redis when `TOLLGATE_TEST_DATABASE_URL` and
//! `TOLLGATE_TEST_REDIS_URL` are set.

use serde_json::{json, Value};
use tollgate_filters::tokens;
use tollgate_testkit::*;

/// `m1` on `a` (1 / 2 credits per 1K), `m2` on `b` (3 / 5), `m3` on `c` (1 / 2), one tier;
/// `b` continues with vLLM's `continue_final_message`.
fn config(a: &FakeOpenAi, b: &FakeOpenAi, c: &FakeOpenAi, extra: &str) -> String {
    format!(
        "{FAST_TIMEOUTS}{}{}{}{}{}{}{extra}",
        provider("p1", &[a], ""),
        provider("p2", &[b], "continuation = \"continue_final_message\""),
        provider("p3", &[c], ""),
        "[[models]]\nid = \"m1\"\nprovider = \"p1\"\ntier = \"economy\"\ninput_credits_per_1k = 1\noutput_credits_per_1k = 2\nmax_output_tokens = 1000\n\n",
        "[[models]]\nid = \"m2\"\nprovider = \"p2\"\ntier = \"economy\"\ninput_credits_per_1k = 3\noutput_credits_per_1k = 5\nmax_output_tokens = 1000\n\n",
        "[[models]]\nid = \"m3\"\nprovider = \"p3\"\ntier = \"economy\"\ninput_credits_per_1k = 1\noutput_credits_per_1k = 2\nmax_output_tokens = 1000\n\n",
    )
}

async fn setup(mode: Mode, extra: &str) -> (FakeOpenAi, FakeOpenAi, FakeOpenAi, Gateway) {
    setup_opts(mode, extra, Opts::default()).await
}

async fn setup_opts(
    mode: Mode,
    extra: &str,
    opts: Opts,
) -> (FakeOpenAi, FakeOpenAi, FakeOpenAi, Gateway) {
    let a = FakeOpenAi::builder("a").mode(mode).start().await;
    let b = FakeOpenAi::start("b").await;
    let c = FakeOpenAi::start("c").await;
    let gw = Gateway::start_opts(tollgate_bin!(), &config(&a, &b, &c, extra), opts).await;
    (a, b, c, gw)
}

fn body() -> Value {
    json!({"model": "m1", "messages": user("Say hello"), "stream": true,
        "stream_options": {"include_usage": true}})
}

async fn stream(gw: &Gateway, body: &Value, resume: Option<&str>) -> Response {
    let auth = format!("Bearer {}", gw.key);
    let mut headers = vec![
        ("Content-Type", "application/json"),
        ("Authorization", &auth),
    ];
    if let Some(v) = resume {
        headers.push(("X-Tollgate-Resume", v));
    }
    let b = serde_json::to_vec(body).unwrap();
    request(gw.addr, "POST", "/v1/chat/completions", &headers, &b).await
}

/// The chunks (not `[DONE]`), the text they carry, and how many `[DONE]` there were.
fn read(r: &Response) -> (Vec<Value>, String, usize) {
    let data = r.sse_data();
    let done = data.iter().filter(|d| *d == "[DONE]").count();
    let chunks: Vec<Value> = data
        .iter()
        .filter(|d| *d != "[DONE]")
        .map(|d| serde_json::from_str(d).unwrap())
        .collect();
    let text = chunks
        .iter()
        .filter_map(|c| c["choices"][0]["delta"]["content"].as_str())
        .collect();
    (chunks, text, done)
}

/// µcr of `p` prompt and `c` output tokens at `input` / `output` credits per 1K (whole
/// credits: exact).
fn at(p: u64, c: u64, input: u64, output: u64) -> i64 {
    (p * input * 1000 + c * output * 1000) as i64
}

/// "Hello from a , have a nice day": `n` words of it, as the fake streams them.
fn words(name: &str, n: usize) -> String {
    let all = format!("Hello from {name} , have a nice day");
    all.split(' ').take(n).map(|w| format!("{w} ")).collect()
}

/// `leases`: holds against a credit lease (the default), else hold rows in the database.
async fn resumes_after(mode: Mode, leases: bool) {
    let opts = Opts {
        storage: if leases { "" } else { "lease_holds = 0" }.into(),
        ..Opts::default()
    };
    let (a, b, c, gw) = setup_opts(mode.clone(), "", opts).await;
    let before = gw.balance(&gw.key).await;
    let r = stream(&gw, &body(), Some("on")).await;
    assert_eq!(r.status, 200, "{}", r.text());
    let (chunks, text, done) = read(&r);
    let first = words("a", 3);
    assert_eq!(
        text,
        format!("{first}{}", b.reply_text()),
        "{mode:?}: {}",
        r.text()
    );
    assert_eq!(done, 1, "one [DONE]: {}", r.text());
    assert!(r.text().contains(": resumed on m2\n\n"), "{}", r.text());
    assert!(!r.text().contains("\"error\""), "{}", r.text());
    let id = &chunks[0]["id"];
    assert!(
        chunks.iter().all(|c| &c["id"] == id),
        "one id: {}",
        r.text()
    );
    let models: Vec<&str> = chunks.iter().filter_map(|c| c["model"].as_str()).collect();
    let seam = models.iter().position(|m| *m == "m2").unwrap();
    assert!(models[..seam].iter().all(|m| *m == "m1"));
    assert!(models[seam..].iter().all(|m| *m == "m2"));
    let roles = chunks
        .iter()
        .filter(|c| c["choices"][0]["delta"]["role"].is_string());
    assert_eq!(roles.count(), 1, "one opening: {}", r.text());

    // The continuation asked b to continue the partial answer, and nobody else.
    let asked = b.requests().last().unwrap().json();
    let turns = asked["messages"].as_array().unwrap();
    assert_eq!(
        turns.last().unwrap(),
        &json!({"role":"assistant","content": first})
    );
    assert_eq!(asked["continue_final_message"], true);
    assert_eq!(asked["add_generation_prompt"], false);
    assert_eq!(c.chat_count(), 0);

    // Leg 1: what it delivered, counted (a cut stream reports no usage) at m1's rates; leg 2:
    // its own usage at m2's.
    let messages = serde_json::to_string(&body()["messages"]).unwrap();
    let (p1, c1) = (
        tokens::count_prompt_json(&messages),
        tokens::count_text(&first),
    );
    let (p2, c2) = (FakeOpenAi::PROMPT_TOKENS, b.reply_words() as u64);
    let charge = at(p1, c1, 1, 2) + at(p2, c2, 3, 5);
    assert_eq!(before - gw.balance(&gw.key).await, charge, "{mode:?}");
    let usage = &chunks.last().unwrap()["usage"];
    assert_eq!(usage["prompt_tokens"], p1 + p2, "{usage}");
    assert_eq!(usage["completion_tokens"], c1 + c2, "{usage}");
    assert_eq!(usage["cost"], charge as f64 / 1e6, "{usage}");
    let u = gw.usage(&gw.key).await;
    let rows = u["recent"].as_array().unwrap();
    assert_eq!(rows.len(), 1, "{u}");
    assert_eq!(rows[0]["model_used"], "m2");
    assert_eq!(rows[0]["prompt_tokens"], p1 + p2);
    let note = rows[0]["hold_note"].as_str().unwrap();
    // m2's bound is above m1's hold: topped up for the continuation first.
    assert!(
        note.starts_with("m2: hold topped up for the continuation; resumed: "),
        "{note}"
    );
    assert!(
        note.contains(&format!("leg 1 m1 (p1): {p1} prompt + {c1} output tokens"))
            && note.contains(&format!("leg 2 m2 (p2): {p2} prompt + {c2} output tokens")),
        "{note}"
    );
    let metrics = get(gw.metrics_addr, "/metrics").await.text();
    let reason = match mode {
        Mode::DieAfter(_) => "read",
        Mode::ErrorAfter(_) => "error_event",
        _ => "stall",
    };
    let line =
        format!("tollgate_stream_resumes_total{{outcome=\"resumed\",reason=\"{reason}\"}} 1");
    assert!(metrics.contains(&line), "{line} in {metrics}");
    assert!(metrics.contains("tollgate_stream_resume_seam_seconds_count{model=\"m2\"} 1"));
    drop(a);
}

#[tokio::test]
async fn a_stream_whose_provider_dies_continues_on_the_next() {
    resumes_after(Mode::DieAfter(3), true).await;
}

/// With the hold a row of its own in the database, topped up there.
#[tokio::test]
async fn a_stream_whose_provider_sends_an_error_event_continues_on_the_next() {
    resumes_after(Mode::ErrorAfter(3), false).await;
}

#[tokio::test]
async fn a_stream_whose_provider_stalls_continues_on_the_next() {
    resumes_after(Mode::StallAfter(3), true).await;
}

#[tokio::test]
async fn a_cut_inside_a_tool_call_ends_with_the_error_event_and_pays_what_came() {
    let (a, b, _c, gw) = setup(Mode::DieAfter(1), "").await;
    a.set_stream_tool_calls(true);
    let before = gw.balance(&gw.key).await;
    let mut req = body();
    req["tools"] = json!([{"type":"function","function":{"name":"get_weather","parameters":{"type":"object"}}}]);
    let r = stream(&gw, &req, Some("on")).await;
    assert_eq!(r.status, 200);
    let (_, _, done) = read(&r);
    assert_eq!(done, 0, "{}", r.text());
    let last: Value = serde_json::from_str(r.sse_data().last().unwrap()).unwrap();
    assert!(
        last["error"]["message"]
            .as_str()
            .unwrap()
            .contains("broke off"),
        "{last}"
    );
    assert_eq!(b.chat_count(), 0, "a half-written call is not resumed");
    let metrics = get(gw.metrics_addr, "/metrics").await.text();
    assert!(
        metrics.contains("tollgate_stream_resumes_total{outcome=\"not_text\""),
        "{metrics}"
    );
    let row = gw.usage(&gw.key).await["recent"][0].clone();
    assert_eq!(row["model_used"], "m1");
    assert!(row["hold_note"].is_null(), "{row}");
    let (p, c) = (
        row["prompt_tokens"].as_u64().unwrap(),
        row["completion_tokens"].as_u64().unwrap(),
    );
    assert!(c > 0, "what was delivered is charged: {row}");
    assert_eq!(before - gw.balance(&gw.key).await, at(p, c, 1, 2));
}

#[tokio::test]
async fn at_most_max_resumes_then_the_error_event() {
    let (_a, b, c, gw) = setup(Mode::DieAfter(3), "").await;
    b.set_mode(Mode::DieAfter(2));
    let r = stream(&gw, &body(), Some("on")).await;
    let (_, text, done) = read(&r);
    assert_eq!(done, 0, "{}", r.text());
    assert_eq!(text, format!("{}{}", words("a", 3), words("b", 2)));
    assert!(r.text().contains("broke off"), "{}", r.text());
    assert_eq!(c.chat_count(), 0, "max_resumes = 1 by default");
    let note = gw.usage(&gw.key).await["recent"][0]["hold_note"].clone();
    assert!(note.as_str().unwrap().contains("leg 2 m2"), "{note}");

    let (_a, b, c, gw) = setup(Mode::DieAfter(3), "[routing]\nmax_resumes = 2\n").await;
    b.set_mode(Mode::DieAfter(2));
    let r = stream(&gw, &body(), Some("on")).await;
    let (_, text, done) = read(&r);
    assert_eq!(done, 1, "{}", r.text());
    let expected = format!("{}{}{}", words("a", 3), words("b", 2), c.reply_text());
    assert_eq!(text, expected);
    // The third leg continues both legs' text.
    let asked = c.requests().last().unwrap().json();
    let turns = asked["messages"].as_array().unwrap();
    let partial = &turns[turns.len() - 2];
    assert_eq!(
        partial["content"],
        format!("{}{}", words("a", 3), words("b", 2))
    );
    assert_eq!(
        turns.last().unwrap()["content"],
        tollgate_filters::resume::request::CONTINUE_PROMPT
    );
}

#[tokio::test]
async fn not_opted_in_a_cut_stream_ends_as_before() {
    let (_a, b, _c, gw) = setup(Mode::DieAfter(3), "").await;
    for resume in [None, Some("off")] {
        let r = stream(&gw, &body(), resume).await;
        let (_, text, done) = read(&r);
        assert_eq!((done, text), (0, words("a", 3)), "{}", r.text());
        assert!(r.text().contains("broke off"));
    }
    assert_eq!(b.chat_count(), 0);

    // On by default for a model; the request may still say no.
    let (a, b, _c, gw) = setup(Mode::DieAfter(3), "[routing]\nresume_models = [\"m1\"]\n").await;
    let (_, _, done) = read(&stream(&gw, &body(), None).await);
    assert_eq!(done, 1);
    let (_, _, done) = read(&stream(&gw, &body(), Some("off")).await);
    assert_eq!(done, 0);
    assert_eq!(b.chat_count(), 1);
    drop(a);
}

#[tokio::test]
async fn the_body_extension_opts_in_and_never_reaches_a_provider() {
    let (a, b, _c, gw) = setup(Mode::DieAfter(3), "").await;
    let mut req = body();
    req["tollgate"] = json!({"resume": true});
    let (_, text, done) = read(&stream(&gw, &req, None).await);
    assert_eq!(done, 1);
    assert_eq!(text, format!("{}{}", words("a", 3), b.reply_text()));
    for f in [&a, &b] {
        assert!(f
            .requests()
            .last()
            .unwrap()
            .json()
            .get("tollgate")
            .is_none());
    }
}

#[tokio::test]
async fn a_bad_opt_in_is_a_clear_400_and_costs_nothing() {
    let (a, _b, _c, gw) = setup(Mode::Ok, "").await;
    let before = gw.balance(&gw.key).await;
    let r = stream(&gw, &body(), Some("maybe")).await;
    let e = r.error(400, "invalid_request");
    assert!(
        e["error"]["message"]
            .as_str()
            .unwrap()
            .contains("X-Tollgate-Resume"),
        "{e}"
    );
    for (ext, says) in [
        (json!(true), "tollgate: must be an object"),
        (
            json!({"resume": "yes"}),
            "tollgate.resume: must be a boolean",
        ),
        (json!({"resumes": true}), "tollgate.resumes: unknown option"),
    ] {
        let mut req = body();
        req["tollgate"] = ext;
        let e = stream(&gw, &req, None).await.error(400, "invalid_request");
        assert!(
            e["error"]["message"].as_str().unwrap().starts_with(says),
            "{e}"
        );
    }
    assert_eq!(a.chat_count(), 0);
    assert_eq!(gw.balance(&gw.key).await, before);
    let (_, _, done) = read(&stream(&gw, &body(), Some("on")).await);
    assert_eq!(done, 1, "still serving");
}

#[tokio::test]
async fn a_candidate_the_hold_cannot_pay_is_skipped_for_the_next() {
    let a = FakeOpenAi::builder("a")
        .mode(Mode::DieAfter(3))
        .start()
        .await;
    let (b, c) = (FakeOpenAi::start("b").await, FakeOpenAi::start("c").await);
    let huge = "input_credits_per_1k = 1000000\noutput_credits_per_1k = 1000000";
    let cfg =
        config(&a, &b, &c, "").replace("input_credits_per_1k = 3\noutput_credits_per_1k = 5", huge);
    let opts = Opts {
        credits: Some(100.0),
        ..Opts::default()
    };
    let gw = Gateway::start_opts(tollgate_bin!(), &cfg, opts).await;
    let before = gw.balance(&gw.key).await;
    let r = stream(&gw, &body(), Some("on")).await;
    let (_, text, done) = read(&r);
    assert_eq!(done, 1, "{}", r.text());
    assert!(r.text().contains(": resumed on m3\n\n"), "{}", r.text());
    assert_eq!(text, format!("{}{}", words("a", 3), c.reply_text()));
    assert_eq!(b.chat_count(), 0, "m2 is beyond the hold");
    let row = gw.usage(&gw.key).await["recent"][0].clone();
    let note = row["hold_note"].as_str().unwrap();
    assert!(
        note.starts_with("m2: no continuation, the hold cannot pay one token; m3: hold topped up for the continuation; resumed: "),
        "{note}"
    );
    let messages = serde_json::to_string(&body()["messages"]).unwrap();
    let (p1, c1) = (
        tokens::count_prompt_json(&messages),
        tokens::count_text(&words("a", 3)),
    );
    let charge = at(p1, c1, 1, 2) + at(FakeOpenAi::PROMPT_TOKENS, c.reply_words() as u64, 1, 2);
    assert_eq!(before - gw.balance(&gw.key).await, charge);
}

#[tokio::test]
async fn the_gateway_may_pay_for_the_resumed_prompt() {
    let extra = "[routing]\nresume_prompt_paid_by = \"gateway\"\n";
    let (_a, b, _c, gw) = setup(Mode::DieAfter(3), extra).await;
    let before = gw.balance(&gw.key).await;
    let (chunks, _, done) = read(&stream(&gw, &body(), Some("on")).await);
    assert_eq!(done, 1);
    let messages = serde_json::to_string(&body()["messages"]).unwrap();
    let (p1, c1) = (
        tokens::count_prompt_json(&messages),
        tokens::count_text(&words("a", 3)),
    );
    let c2 = b.reply_words() as u64;
    // The continuation's prompt is recorded, and only its output charged.
    let charge = at(p1, c1, 1, 2) + at(0, c2, 3, 5);
    assert_eq!(before - gw.balance(&gw.key).await, charge);
    let usage = &chunks.last().unwrap()["usage"];
    assert_eq!(usage["prompt_tokens"], p1 + FakeOpenAi::PROMPT_TOKENS);
    assert_eq!(usage["cost"], charge as f64 / 1e6, "{usage}");
}
