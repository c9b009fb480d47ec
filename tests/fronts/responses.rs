//! `POST /v1/responses` on the chat pipeline: text, function tools and structured output,
//! JSON and streamed as typed events, on an OpenAI-compatible provider and on an Anthropic one,
//! failover before the first output, a stream cut after it, each charged exactly its usage.
//! Runs on SQLite, and on Postgres + Redis when set.

use serde_json::{json, Value};
use tollgate_testkit::openai::Mode;
use tollgate_testkit::*;

/// µcr of a response at [`model`]'s rates (1 and 2 credits per 1K tokens).
fn cost(r: &Value) -> i64 {
    let u = &r["usage"];
    u["input_tokens"].as_i64().unwrap() * 1_000 + u["output_tokens"].as_i64().unwrap() * 2_000
}

async fn post(gw: &Gateway, key: &str, body: &Value) -> Response {
    let auth = format!("Bearer {key}");
    gw.with_auth("POST", "/v1/responses", &auth, body.to_string().as_bytes())
        .await
}

/// The events of a Responses stream as (name, data); each data's `type` is its event's name
/// and the sequence numbers count up from 0.
fn events(r: &Response) -> Vec<(String, Value)> {
    let text = r.text();
    let out: Vec<(String, Value)> = text
        .split("\n\n")
        .filter(|e| !e.trim().is_empty() && !e.starts_with(':'))
        .map(|e| {
            let name = e.lines().find_map(|l| l.strip_prefix("event: ")).unwrap();
            let data = e.lines().find_map(|l| l.strip_prefix("data: ")).unwrap();
            (name.to_owned(), serde_json::from_str(data).unwrap())
        })
        .collect();
    for (i, (name, data)) in out.iter().enumerate() {
        assert_eq!(data["type"], name.as_str());
        assert_eq!(data["sequence_number"], i, "{text}");
    }
    out
}

fn last_response(ev: &[(String, Value)]) -> Value {
    ev.last().unwrap().1["response"].clone()
}

#[tokio::test]
async fn responses_are_served_as_openai_documents_them_and_charged_exactly() {
    let fake = FakeOpenAi::start("p").await;
    let gw = Gateway::start(tollgate_bin!(), &one_model_config(&fake, "m")).await;
    let key = gw.key.clone();
    let db = gw.config_db();
    let initial = books::read(&db, &gw.user_id).await.money;
    let (mut ok, mut spent) = (Vec::new(), 0i64);

    // Text, with instructions and metadata echoed.
    let r = post(
        &gw,
        &key,
        &json!({"model": "m", "input": "Say hi", "instructions": "Be brief.",
        "metadata": {"run": "1"}, "max_output_tokens": 500}),
    )
    .await;
    assert_eq!(r.status, 200, "{}", r.text());
    let v = r.json();
    assert_eq!(
        (v["object"].as_str(), v["status"].as_str()),
        (Some("response"), Some("completed"))
    );
    assert!(v["id"].as_str().unwrap().starts_with("resp_"));
    assert_eq!(v["model"], "m");
    assert_eq!(v["instructions"], "Be brief.");
    assert_eq!(v["metadata"], json!({"run": "1"}));
    assert_eq!(v["output"][0]["type"], "message");
    assert_eq!(v["output"][0]["content"][0]["type"], "output_text");
    assert_eq!(v["output"][0]["content"][0]["text"], fake.reply_text());
    assert_eq!(v["usage"]["input_tokens"], FakeOpenAi::PROMPT_TOKENS);
    assert_eq!(v["usage"]["output_tokens"], fake.reply_words());
    assert!(r.header("x-credits-remaining").is_some());
    let sent = fake.requests().last().unwrap().json();
    assert_eq!(sent["model"], "up-m");
    assert_eq!(
        sent["messages"],
        json!([{"role": "system", "content": "Be brief."}, {"role": "user", "content": "Say hi"}])
    );
    assert_eq!(sent["max_tokens"], 500);
    spent += cost(&v);
    ok.push(r.header("x-request-id").unwrap().to_owned());

    // A function tool: the call, then its output sent back.
    let tools = json!([{"type": "function", "name": "get_weather",
        "parameters": {"type": "object", "properties": {"city": {"type": "string"}}}}]);
    let r = post(
        &gw,
        &key,
        &json!({"model": "m", "input": "Weather?", "tools": tools}),
    )
    .await;
    assert_eq!(r.status, 200, "{}", r.text());
    let v = r.json();
    let call = &v["output"][0];
    assert_eq!(
        (call["type"].as_str(), call["name"].as_str()),
        (Some("function_call"), Some("get_weather"))
    );
    assert_eq!(call["arguments"], "{\"city\":\"Paris\"}");
    let sent = fake.requests().last().unwrap().json();
    assert_eq!(sent["tools"][0]["function"]["name"], "get_weather");
    spent += cost(&v);
    ok.push(r.header("x-request-id").unwrap().to_owned());
    let input = json!([{"role": "user", "content": "Weather?"}, call.clone(),
        {"type": "function_call_output", "call_id": call["call_id"], "output": "sunny"}]);
    let r = post(
        &gw,
        &key,
        &json!({"model": "m", "input": input, "tools": tools}),
    )
    .await;
    assert_eq!(r.status, 200, "{}", r.text());
    let v = r.json();
    assert_eq!(v["output"][0]["type"], "message");
    let sent = fake.requests().last().unwrap().json();
    assert_eq!(sent["messages"][1]["tool_calls"][0]["id"], call["call_id"]);
    assert_eq!(
        sent["messages"][2],
        json!({"role": "tool", "tool_call_id": call["call_id"], "content": "sunny"})
    );
    spent += cost(&v);
    ok.push(r.header("x-request-id").unwrap().to_owned());

    // Structured output: text.format reaches the provider as response_format.
    let format = json!({"type": "json_schema", "name": "place", "strict": true,
        "schema": {"type": "object", "properties": {"city": {"type": "string"}}}});
    let r = post(
        &gw,
        &key,
        &json!({"model": "m", "input": "Where?", "text": {"format": format}}),
    )
    .await;
    assert_eq!(r.status, 200, "{}", r.text());
    let v = r.json();
    assert_eq!(v["text"]["format"]["name"], "place");
    assert_eq!(v["output"][0]["content"][0]["text"], "{\"city\":\"Paris\"}");
    let sent = fake.requests().last().unwrap().json();
    assert_eq!(sent["response_format"]["json_schema"]["name"], "place");
    spent += cost(&v);
    ok.push(r.header("x-request-id").unwrap().to_owned());

    // A stream of text: the typed events in order, usage in response.completed.
    let r = post(
        &gw,
        &key,
        &json!({"model": "m", "input": "Stream it", "stream": true}),
    )
    .await;
    assert_eq!(r.status, 200, "{}", r.text());
    assert_eq!(r.header("content-type"), Some("text/event-stream"));
    let ev = events(&r);
    let names: Vec<&str> = ev.iter().map(|(n, _)| n.as_str()).collect();
    assert_eq!(
        &names[..4],
        [
            "response.created",
            "response.in_progress",
            "response.output_item.added",
            "response.content_part.added"
        ]
    );
    assert_eq!(
        names
            .iter()
            .filter(|n| **n == "response.output_text.delta")
            .count(),
        fake.reply_words()
    );
    assert_eq!(names.last(), Some(&"response.completed"));
    let done = last_response(&ev);
    assert_eq!(done["output"][0]["content"][0]["text"], fake.reply_text());
    assert_eq!(done["usage"]["output_tokens"], fake.reply_words());
    let sent = fake.requests().last().unwrap().json();
    assert_eq!(sent["stream_options"]["include_usage"], true);
    spent += cost(&done);
    ok.push(r.header("x-request-id").unwrap().to_owned());

    // A streamed tool call, its arguments in pieces.
    fake.set_stream_tool_calls(true);
    let r = post(
        &gw,
        &key,
        &json!({"model": "m", "input": "Weather?", "tools": tools, "stream": true}),
    )
    .await;
    fake.set_stream_tool_calls(false);
    assert_eq!(r.status, 200, "{}", r.text());
    let ev = events(&r);
    let deltas: String = ev
        .iter()
        .filter(|(n, _)| n == "response.function_call_arguments.delta")
        .map(|(_, d)| d["delta"].as_str().unwrap().to_owned())
        .collect();
    assert_eq!(deltas, "{\"city\":\"Paris\"}");
    let done = last_response(&ev);
    assert_eq!(done["output"][0]["type"], "function_call");
    assert_eq!(done["output"][0]["arguments"], "{\"city\":\"Paris\"}");
    spent += cost(&done);
    ok.push(r.header("x-request-id").unwrap().to_owned());

    books::check(&db, &gw.user_id, initial, &ok).await;
    let after = books::settled(&db, &gw.user_id).await.money;
    assert_eq!(
        initial - after,
        spent,
        "exactly each response's usage at the model's rates"
    );
}

#[tokio::test]
async fn a_stream_fails_over_before_its_first_output_and_ends_failed_after_it() {
    let (a, b) = (FakeOpenAi::start("a").await, FakeOpenAi::start("b").await);
    let cfg = format!(
        "{FAST_TIMEOUTS}{}{}{}{}",
        provider("p", &[&a], ""),
        provider("q", &[&b], ""),
        model("m1", "p", "economy", ""),
        model("m2", "q", "economy", "")
    );
    let gw = Gateway::start(tollgate_bin!(), &cfg).await;
    let key = gw.key.clone();
    let db = gw.config_db();
    let initial = books::read(&db, &gw.user_id).await.money;
    let mut ok = Vec::new();

    // The first candidate errors before any output: the sibling serves, named in the events.
    a.set_mode(Mode::ErrorFirst);
    let r = post(
        &gw,
        &key,
        &json!({"model": "m1", "input": "hi", "stream": true}),
    )
    .await;
    assert_eq!(r.status, 200, "{}", r.text());
    let ev = events(&r);
    assert_eq!(ev[0].1["response"]["model"], "m2");
    let done = last_response(&ev);
    assert_eq!(done["status"], "completed");
    assert_eq!(done["model"], "m2");
    ok.push(r.header("x-request-id").unwrap().to_owned());

    // Cut after three words: an `error` event, then response.failed holding what came.
    a.set_mode(Mode::DieAfter(3));
    let r = post(
        &gw,
        &key,
        &json!({"model": "m1", "input": "hi", "stream": true}),
    )
    .await;
    assert_eq!(r.status, 200);
    let ev = events(&r);
    let names: Vec<&str> = ev.iter().map(|(n, _)| n.as_str()).collect();
    assert_eq!(&names[names.len() - 2..], ["error", "response.failed"]);
    let failed = last_response(&ev);
    assert_eq!(failed["status"], "failed");
    let partial = failed["output"][0]["content"][0]["text"]
        .as_str()
        .unwrap()
        .to_owned();
    assert!(
        !partial.is_empty() && a.reply_text().starts_with(&partial) && partial != a.reply_text(),
        "{partial}"
    );
    ok.push(r.header("x-request-id").unwrap().to_owned());

    // Both answered requests have their usage row; a cut stream pays what was delivered.
    books::check(&db, &gw.user_id, initial, &ok).await;
}

#[tokio::test]
async fn an_anthropic_provider_serves_the_responses_api_both_ways() {
    let a = FakeAnthropic::start("a").await;
    let cfg = format!("{FAST_TIMEOUTS}{}[[models]]\nid = \"claude-x\"\nprovider = \"anth\"\nupstream_model = \"claude-up\"\ntier = \"powerful\"\ninput_credits_per_1k = 3\noutput_credits_per_1k = 15\nmax_output_tokens = 2000\n",
        anthropic_provider("anth", &[&a], ""));
    let gw = Gateway::start(tollgate_bin!(), &cfg).await;
    let key = gw.key.clone();
    let db = gw.config_db();
    let initial = books::read(&db, &gw.user_id).await.money;
    let claude_cost = |v: &Value| {
        v["usage"]["input_tokens"].as_i64().unwrap() * 3_000
            + v["usage"]["output_tokens"].as_i64().unwrap() * 15_000
    };

    let r = post(
        &gw,
        &key,
        &json!({"model": "claude-x", "input": "hi", "instructions": "Be brief."}),
    )
    .await;
    assert_eq!(r.status, 200, "{}", r.text());
    let v = r.json();
    assert_eq!(v["output"][0]["content"][0]["text"], a.reply_text());
    let sent = a.requests().last().unwrap().json();
    assert_eq!(sent["model"], "claude-up");
    assert_eq!(sent["system"], "Be brief.");
    assert!(sent["max_tokens"].as_u64().is_some());
    let mut spent = claude_cost(&v);
    let mut ok = vec![r.header("x-request-id").unwrap().to_owned()];

    let r = post(
        &gw,
        &key,
        &json!({"model": "claude-x", "input": "hi", "stream": true}),
    )
    .await;
    assert_eq!(r.status, 200, "{}", r.text());
    let done = last_response(&events(&r));
    assert_eq!(done["status"], "completed");
    assert_eq!(done["output"][0]["content"][0]["text"], a.reply_text());
    spent += claude_cost(&done);
    ok.push(r.header("x-request-id").unwrap().to_owned());

    // What Claude cannot take is refused by its Responses name, before any hold.
    let r = post(
        &gw,
        &key,
        &json!({"model": "claude-x", "input": "x",
        "text": {"format": {"type": "json_object"}}}),
    )
    .await;
    let e = r.error(400, "invalid_request");
    assert_eq!(e["error"]["param"], "text.format", "{e}");

    books::check(&db, &gw.user_id, initial, &ok).await;
    assert_eq!(
        initial - books::settled(&db, &gw.user_id).await.money,
        spent
    );
}
