//! The Gemini API in front: `generateContent`, `streamGenerateContent` (SSE and the JSON
//! array), `countTokens` and the model list, keys in `x-goog-api-key`, `?key=` or a bearer
//! token, on an OpenAI-compatible provider and on an Anthropic one, a function-call round
//! trip, each charged exactly; bad input in Google's error shape with nothing charged. Runs on
//! SQLite, and on Postgres + Redis when set.

use serde_json::{json, Value};
use tollgate_testkit::*;

async fn gemini(gw: &Gateway, path: &str, body: &Value) -> Response {
    let b = serde_json::to_vec(body).unwrap();
    let headers = [
        ("Content-Type", "application/json"),
        ("x-goog-api-key", gw.key.as_str()),
    ];
    request(gw.addr, "POST", path, &headers, &b).await
}

fn google_error(r: &Response, code: u16, status: &str) -> Value {
    assert_eq!(r.status, code, "{}", r.text());
    let v = r.json();
    assert_eq!(v["error"]["code"], code, "{v}");
    assert_eq!(v["error"]["status"], status, "{v}");
    v
}

fn usage_cost(u: &Value, input: i64, output: i64) -> i64 {
    u["promptTokenCount"].as_i64().unwrap() * input
        + u["candidatesTokenCount"].as_i64().unwrap() * output
}

#[tokio::test]
async fn the_gemini_api_is_served_on_both_provider_kinds_and_charged_exactly() {
    let (o, a) = (
        FakeOpenAi::start("o").await,
        FakeAnthropic::start("a").await,
    );
    let cfg = format!(
        "{FAST_TIMEOUTS}{}{}{}[[models]]\nid = \"claude-x\"\nprovider = \"anth\"\ntier = \"powerful\"\ninput_credits_per_1k = 3\noutput_credits_per_1k = 15\nmax_output_tokens = 2000\n\n[aliases]\n\"gemini-2.5-flash\" = \"gpt-x\"\n",
        provider("oai", &[&o], ""),
        anthropic_provider("anth", &[&a], ""),
        model("gpt-x", "oai", "economy", ""),
    );
    let gw = Gateway::start(tollgate_bin!(), &cfg).await;
    let db = gw.config_db();
    let initial = books::read(&db, &gw.user_id).await.money;
    let (mut ok, mut spent) = (Vec::new(), 0i64);

    // generateContent through an alias, with a system instruction and a generation config.
    let body = json!({"systemInstruction": {"parts": [{"text": "Be brief."}]},
        "contents": [{"role": "user", "parts": [{"text": "Say hi"}]}],
        "generationConfig": {"temperature": 0.2, "maxOutputTokens": 100}});
    let r = gemini(
        &gw,
        "/v1beta/models/gemini-2.5-flash:generateContent",
        &body,
    )
    .await;
    assert_eq!(r.status, 200, "{}", r.text());
    let v = r.json();
    let c = &v["candidates"][0];
    assert_eq!(
        (c["content"]["role"].as_str(), c["finishReason"].as_str()),
        (Some("model"), Some("STOP"))
    );
    assert_eq!(c["content"]["parts"][0]["text"], o.reply_text());
    assert_eq!(v["modelVersion"], "gpt-x");
    assert_eq!(
        v["usageMetadata"]["promptTokenCount"],
        FakeOpenAi::PROMPT_TOKENS
    );
    let sent = o.requests().pop().unwrap().json();
    assert_eq!(
        sent["messages"][0],
        json!({"role": "system", "content": "Be brief."})
    );
    assert_eq!(
        (sent["max_tokens"].as_u64(), sent["temperature"].as_f64()),
        (Some(100), Some(0.2))
    );
    spent += usage_cost(&v["usageMetadata"], 1_000, 2_000);
    ok.push(r.header("x-request-id").unwrap().to_owned());

    // A function call, then its response sent back (the key as ?key= this time).
    let tools = json!([{"functionDeclarations": [{"name": "get_weather",
        "parameters": {"type": "OBJECT", "properties": {"city": {"type": "STRING"}}}}]}]);
    let ask = json!({"role": "user", "parts": [{"text": "Weather in Paris?"}]});
    let path = format!("/v1beta/models/gpt-x:generateContent?key={}", gw.key);
    let r = request(
        gw.addr,
        "POST",
        &path,
        &[("Content-Type", "application/json")],
        json!({"contents": [ask], "tools": tools})
            .to_string()
            .as_bytes(),
    )
    .await;
    assert_eq!(r.status, 200, "{}", r.text());
    let v = r.json();
    let call = v["candidates"][0]["content"]["parts"][0]["functionCall"].clone();
    assert_eq!(
        call,
        json!({"name": "get_weather", "args": {"city": "Paris"}})
    );
    spent += usage_cost(&v["usageMetadata"], 1_000, 2_000);
    ok.push(r.header("x-request-id").unwrap().to_owned());
    let back = json!({"contents": [ask, {"role": "model", "parts": [{"functionCall": call}]},
        {"role": "user", "parts": [{"functionResponse": {"name": "get_weather", "response": {"sky": "sun"}}}]}],
        "tools": tools});
    let r = gemini(&gw, "/v1beta/models/gpt-x:generateContent", &back).await;
    assert_eq!(r.status, 200, "{}", r.text());
    let sent = o.requests().pop().unwrap().json();
    assert_eq!(sent["messages"][2]["role"], "tool");
    assert_eq!(
        sent["messages"][2]["tool_call_id"],
        sent["messages"][1]["tool_calls"][0]["id"]
    );
    spent += usage_cost(&r.json()["usageMetadata"], 1_000, 2_000);
    ok.push(r.header("x-request-id").unwrap().to_owned());

    // streamGenerateContent as SSE, then as one JSON array (a bearer key).
    let r = gemini(
        &gw,
        "/v1beta/models/gpt-x:streamGenerateContent?alt=sse",
        &body,
    )
    .await;
    assert_eq!(r.status, 200, "{}", r.text());
    assert_eq!(r.header("content-type"), Some("text/event-stream"));
    let chunks: Vec<Value> = r
        .sse_data()
        .iter()
        .map(|d| serde_json::from_str(d).unwrap())
        .collect();
    let text: String = chunks
        .iter()
        .filter_map(|c| c["candidates"][0]["content"]["parts"][0]["text"].as_str())
        .collect();
    assert_eq!(text, o.reply_text());
    let last = chunks.last().unwrap();
    assert_eq!(last["candidates"][0]["finishReason"], "STOP");
    spent += usage_cost(&last["usageMetadata"], 1_000, 2_000);
    ok.push(r.header("x-request-id").unwrap().to_owned());
    let auth = format!("Bearer {}", gw.key);
    let r = gw
        .with_auth(
            "POST",
            "/v1beta/models/gpt-x:streamGenerateContent",
            &auth,
            body.to_string().as_bytes(),
        )
        .await;
    assert_eq!(r.status, 200, "{}", r.text());
    assert_eq!(r.header("content-type"), Some("application/json"));
    let array: Vec<Value> = serde_json::from_slice(&r.body).unwrap();
    spent += usage_cost(&array.last().unwrap()["usageMetadata"], 1_000, 2_000);
    ok.push(r.header("x-request-id").unwrap().to_owned());

    // A Claude model behind the Anthropic provider, whole and streamed.
    let r = gemini(&gw, "/v1beta/models/claude-x:generateContent", &body).await;
    assert_eq!(r.status, 200, "{}", r.text());
    assert_eq!(
        r.json()["candidates"][0]["content"]["parts"][0]["text"],
        a.reply_text()
    );
    assert_eq!(a.requests().pop().unwrap().json()["system"], "Be brief.");
    spent += usage_cost(&r.json()["usageMetadata"], 3_000, 15_000);
    ok.push(r.header("x-request-id").unwrap().to_owned());
    let r = gemini(
        &gw,
        "/v1beta/models/claude-x:streamGenerateContent?alt=sse",
        &body,
    )
    .await;
    assert_eq!(r.status, 200, "{}", r.text());
    let last: Value = serde_json::from_str(r.sse_data().last().unwrap()).unwrap();
    spent += usage_cost(&last["usageMetadata"], 3_000, 15_000);
    ok.push(r.header("x-request-id").unwrap().to_owned());

    // countTokens: free; the model list.
    let r = gemini(&gw, "/v1beta/models/gpt-x:countTokens", &body).await;
    assert_eq!(r.status, 200, "{}", r.text());
    assert!(r.json()["totalTokens"].as_u64().unwrap() > 0);
    let list = gw
        .with_auth("GET", "/v1beta/models", &auth, b"")
        .await
        .json();
    let names: Vec<&str> = list["models"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|m| m["name"].as_str())
        .collect();
    assert!(
        names.contains(&"models/gpt-x") && names.contains(&"models/gemini-2.5-flash"),
        "{names:?}"
    );

    books::check(&db, &gw.user_id, initial, &ok).await;
    assert_eq!(
        initial - books::settled(&db, &gw.user_id).await.money,
        spent
    );
}

#[tokio::test]
async fn bad_gemini_requests_get_googles_error_shape_and_cost_nothing() {
    let o = FakeOpenAi::start("o").await;
    let gw = Gateway::start(tollgate_bin!(), &one_model_config(&o, "gpt-x")).await;
    let before = books::read(&gw.config_db(), &gw.user_id).await;
    let ok = json!({"contents": [{"parts": [{"text": "x"}]}]});
    let path = "/v1beta/models/gpt-x:generateContent";
    google_error(
        &gemini(&gw, "/v1beta/models/nope:generateContent", &ok).await,
        404,
        "NOT_FOUND",
    );
    google_error(
        &gemini(&gw, "/v1beta/models/gpt-x:embedContent", &ok).await,
        404,
        "NOT_FOUND",
    );
    for (body, field) in [
        (json!({}), "contents"),
        (json!({"contents": "hi"}), "contents"),
        (
            json!({"contents": [{"role": "system", "parts": [{"text": "x"}]}]}),
            "contents[0].role",
        ),
        (
            json!({"contents": [{"parts": [{"executableCode": {}}]}]}),
            "contents[0].parts[0]",
        ),
        (
            json!({"contents": [{"parts": [{"text": "x"}]}], "tools": [{"codeExecution": {}}]}),
            "tools[0].codeExecution",
        ),
    ] {
        let e = google_error(&gemini(&gw, path, &body).await, 400, "INVALID_ARGUMENT");
        assert!(
            e["error"]["message"].as_str().unwrap().starts_with(field),
            "{e}"
        );
    }
    let r = request(
        gw.addr,
        "POST",
        path,
        &[("x-goog-api-key", gw.key.as_str())],
        b"{not json",
    )
    .await;
    google_error(&r, 400, "INVALID_ARGUMENT");
    let head = format!(
        "POST {path} HTTP/1.1\r\nHost: x\r\nx-goog-api-key: {}\r\nContent-Length: {}\r\n\r\n",
        gw.key,
        9 * 1024 * 1024
    );
    google_error(
        &raw_request(gw.addr, head.as_bytes()).await,
        400,
        "INVALID_ARGUMENT",
    );
    let r = request(
        gw.addr,
        "POST",
        path,
        &[("x-goog-api-key", "tg_not_a_key")],
        ok.to_string().as_bytes(),
    )
    .await;
    google_error(&r, 401, "UNAUTHENTICATED");
    assert!(gw.is_healthy().await);
    assert!(o.requests().is_empty(), "nothing reached the provider");
    let after = books::settled(&gw.config_db(), &gw.user_id).await;
    assert_eq!(
        (after.money, after.rows.len()),
        (before.money, before.rows.len())
    );
}
