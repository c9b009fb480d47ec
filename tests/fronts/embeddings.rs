//! `POST /v1/embeddings`: served by embedding models only, charged exactly the provider's
//! prompt tokens at the input rate, failing over across the model's own endpoints and never to
//! another model, and bad input refused with nothing charged. Runs on SQLite, and on Postgres
//! when `TOLLGATE_TEST_DATABASE_URL` is set.

use serde_json::{json, Value};
use tollgate_testkit::embeddings::{tokens_of, DEFAULT_DIMENSIONS};
use tollgate_testkit::openai::Mode;
use tollgate_testkit::*;

/// µcr per prompt token of the embedding models here (10 credits, 10^7 µcr, per 1K tokens).
const RATE: i64 = 10_000_000 / 1000;

fn embedding_model(id: &str, provider: &str, extra: &str) -> String {
    format!("[[models]]\nid = \"{id}\"\nprovider = \"{provider}\"\nupstream_model = \"up-{id}\"\nkind = \"embedding\"\ninput_credits_per_1k = 10\noutput_credits_per_1k = 0\n{extra}\n")
}

struct Setup {
    a: FakeOpenAi,
    b: FakeOpenAi,
    other: FakeOpenAi,
    gw: Gateway,
}

/// `emb` on provider `p` (endpoints `a`, `b`); `emb-2` on `q` (`other`), a different model a
/// chat request's failover would take; a chat model `chat` on `p`.
async fn setup() -> Setup {
    let (a, b, other) = (
        FakeOpenAi::start("a").await,
        FakeOpenAi::start("b").await,
        FakeOpenAi::start("other").await,
    );
    let cfg = format!(
        "{FAST_TIMEOUTS}{}{}{}{}{}",
        provider("p", &[&a, &b], ""),
        provider("q", &[&other], ""),
        embedding_model("emb", "p", ""),
        embedding_model("emb-2", "q", ""),
        model("chat", "p", "economy", ""),
    );
    let gw = Gateway::start(tollgate_bin!(), &cfg).await;
    Setup { a, b, other, gw }
}

async fn embed(gw: &Gateway, key: Option<&str>, body: &Value) -> Response {
    let auth = key.map(|k| format!("Bearer {k}"));
    let headers: Vec<(&str, &str)> = auth
        .as_deref()
        .map(|a| vec![("Authorization", a)])
        .unwrap_or_default();
    let bytes = serde_json::to_vec(body).unwrap();
    request(gw.addr, "POST", "/v1/embeddings", &headers, &bytes).await
}

fn embedding_requests(f: &FakeOpenAi) -> Vec<Value> {
    f.requests()
        .into_iter()
        .filter(|r| r.path.ends_with("/v1/embeddings"))
        .map(|r| r.json())
        .collect()
}

#[tokio::test]
async fn embeddings_are_charged_exactly_and_fail_over_only_within_the_models_pool() {
    let s = setup().await;
    let gw = &s.gw;
    let key = gw.key.clone();
    let initial = books::read(&gw.config_db(), &gw.user_id).await.money;
    let mut ok = Vec::new();
    let mut tokens = 0i64;

    // One string, floats.
    let r = embed(
        gw,
        Some(&key),
        &json!({"model": "emb", "input": "hello, embeddings"}),
    )
    .await;
    assert_eq!(r.status, 200, "{}", r.text());
    let v = r.json();
    assert_eq!(
        (v["object"].as_str(), v["model"].as_str()),
        (Some("list"), Some("emb"))
    );
    assert_eq!(v["data"][0]["object"], "embedding");
    assert_eq!(
        v["data"][0]["embedding"].as_array().unwrap().len(),
        DEFAULT_DIMENSIONS
    );
    let n = tokens_of(&json!("hello, embeddings"));
    let mut usage = v["usage"].clone();
    // What it cost, at 10 credits per 1K tokens: docs/api.md, "Cost in every response".
    let cost = usage.as_object_mut().unwrap().remove("cost").unwrap();
    assert_eq!(micros(&cost), n as i64 * 10_000);
    usage.as_object_mut().unwrap().remove("cost_details");
    assert_eq!(usage, json!({"prompt_tokens": n, "total_tokens": n}));
    assert!(r.header("x-credits-remaining").is_some());
    tokens += n as i64;
    ok.push(r.header("x-request-id").unwrap().to_owned());

    // A batch, base64, fewer dimensions, a provider's own member: all passed on.
    let batch = json!(["one", "two two", "three three three"]);
    let body = json!({"model": "emb", "input": batch, "encoding_format": "base64",
                      "dimensions": 4, "input_type": "query"});
    let r = embed(gw, Some(&key), &body).await;
    assert_eq!(r.status, 200, "{}", r.text());
    let v = r.json();
    let data = v["data"].as_array().unwrap();
    assert_eq!(data.len(), 3);
    assert!(data.iter().all(|d| d["embedding"].is_string()));
    assert_eq!(data[2]["index"], 2);
    let n: u64 = batch.as_array().unwrap().iter().map(tokens_of).sum();
    assert_eq!(v["usage"]["prompt_tokens"], n);
    tokens += n as i64;
    ok.push(r.header("x-request-id").unwrap().to_owned());
    let sent: Vec<Value> = [&s.a, &s.b]
        .iter()
        .flat_map(|f| embedding_requests(f))
        .collect();
    let last = sent
        .iter()
        .find(|b| b["dimensions"] == 4)
        .expect("the batch reached p");
    assert_eq!(last["model"], "up-emb");
    assert_eq!(last["encoding_format"], "base64");
    assert_eq!(last["input_type"], "query");

    // Token arrays count as themselves.
    let r = embed(
        gw,
        Some(&key),
        &json!({"model": "emb", "input": [[1, 2, 3], [4, 5]]}),
    )
    .await;
    assert_eq!(r.status, 200, "{}", r.text());
    assert_eq!(r.json()["usage"]["prompt_tokens"], 5);
    tokens += 5;
    ok.push(r.header("x-request-id").unwrap().to_owned());

    // One endpoint of the pool fails: the other serves, the same model.
    s.a.set_mode(Mode::Status(500));
    s.b.set_mode(Mode::Ok);
    for _ in 0..2 {
        let r = embed(
            gw,
            Some(&key),
            &json!({"model": "emb", "input": "abcdefgh"}),
        )
        .await;
        assert_eq!(r.status, 200, "{}", r.text());
        assert_eq!(r.json()["model"], "emb");
        tokens += 2;
        ok.push(r.header("x-request-id").unwrap().to_owned());
    }
    // Every endpoint of the model fails: 502, and the other embedding model is never asked.
    s.b.set_mode(Mode::Status(503));
    let r = embed(
        gw,
        Some(&key),
        &json!({"model": "emb", "input": "abcdefgh"}),
    )
    .await;
    let e = r.error(502, "upstream_error");
    assert!(
        e["error"]["message"]
            .as_str()
            .unwrap()
            .contains("never fall over"),
        "{e}"
    );
    assert!(
        embedding_requests(&s.other).is_empty(),
        "another model was asked"
    );
    let failed_id = r.header("x-request-id").unwrap().to_owned();

    // No usage from the provider: the tokenizer counts, and that count is charged.
    s.a.set_mode(Mode::NoUsage);
    s.b.set_mode(Mode::NoUsage);
    let r = embed(
        gw,
        Some(&key),
        &json!({"model": "emb", "input": "counted by the gateway"}),
    )
    .await;
    assert_eq!(r.status, 200, "{}", r.text());
    let counted = r.json()["usage"]["prompt_tokens"].as_i64().unwrap();
    assert!(counted > 0);
    tokens += counted;
    ok.push(r.header("x-request-id").unwrap().to_owned());

    // The failed request has a usage row at nothing; the others exactly their tokens (read
    // once the credit lease went back, its usage rows written).
    let books_now = books::settled(&gw.config_db(), &gw.user_id).await;
    let failed = books_now.rows.iter().find(|(id, _)| id == &failed_id);
    assert_eq!(
        failed.map(|r| r.1),
        Some(0),
        "a failed request is charged nothing"
    );
    assert_eq!(
        initial - books_now.money,
        tokens * RATE,
        "exactly the tokens at the input rate"
    );
    let served: Vec<(String, i64)> = books_now.rows.into_iter().filter(|(_, c)| *c > 0).collect();
    assert_eq!(served.len(), ok.len());
    assert!(ok.iter().all(|id| served.iter().any(|(r, _)| r == id)));
}

#[tokio::test]
async fn inputs_that_count_above_one_token_per_3_bytes_are_charged_exactly_what_the_provider_reports(
) {
    let s = setup().await;
    let gw = &s.gw;
    let initial = books::read(&gw.config_db(), &gw.user_id).await.money;
    let base64_like = "QUJDREVGR0hJSktMTU5PUFFSU1RVVldYWVowMTIzNDU2Nzg5";
    // (input, the provider's count): each above one token per 3 bytes, the last far above any
    // tokenizer's count (charged from the balance past the hold).
    let cases = [
        ("日本語のテキストは一バイトあたりのトークンが多い", 40u64),
        ("314159265358979323846264338", 12),
        (base64_like, 30),
        ("x", 500),
    ];
    let mut ok = Vec::new();
    let mut tokens = 0i64;
    for (input, reported) in cases {
        assert!(reported > (input.len() as u64).div_ceil(3), "{input}");
        s.a.set_mode(Mode::Usage(reported, 0));
        s.b.set_mode(Mode::Usage(reported, 0));
        let before = gw.balance(&gw.key).await;
        let r = embed(gw, Some(&gw.key), &json!({"model": "emb", "input": input})).await;
        assert_eq!(r.status, 200, "{}", r.text());
        let v = r.json();
        let want = reported as i64 * RATE;
        assert_eq!(v["usage"]["prompt_tokens"], reported);
        assert_eq!(micros(&v["usage"]["cost"]), want, "{input}: {v}");
        assert_eq!(
            micros(&v["usage"]["cost_details"]["input"]),
            want,
            "{input}"
        );
        let header = r
            .header("x-credits-charged")
            .unwrap()
            .parse::<f64>()
            .unwrap();
        assert_eq!(micros(&json!(header)), want, "{input}");
        assert_eq!(
            before - gw.balance(&gw.key).await,
            want,
            "{input}: the balance's fall"
        );
        tokens += reported as i64;
        ok.push(r.header("x-request-id").unwrap().to_owned());
    }
    let books_now = books::settled(&gw.config_db(), &gw.user_id).await;
    assert_eq!(initial - books_now.money, tokens * RATE);
    books::check(&gw.config_db(), &gw.user_id, initial, &ok).await;
    assert!(gw.metric("tollgate_usage_over_hold_total").await >= 1.0);
    assert_eq!(
        gw.metric("tollgate_credits_uncharged_micros_total").await,
        0.0
    );

    // A balance that runs out before the usage does: charged all it has, the rest counted and
    // logged with the request, never below zero.
    let (poor, poor_key) = gw.signup(&unique_email()).await;
    let start = books::read(&gw.config_db(), &poor).await.money;
    gw.admin_credits(&poor, -(start as f64) / 1e6 + 0.05).await;
    s.a.set_mode(Mode::Usage(900, 0));
    s.b.set_mode(Mode::Usage(900, 0));
    let r = embed(gw, Some(&poor_key), &json!({"model": "emb", "input": "x"})).await;
    assert_eq!(r.status, 200, "{}", r.text());
    let id = r.header("x-request-id").unwrap().to_owned();
    assert_eq!(
        micros(&r.json()["usage"]["cost"]),
        50_000,
        "all the balance had"
    );
    assert_eq!(gw.balance(&poor_key).await, 0);
    let uncharged = gw.metric("tollgate_credits_uncharged_micros_total").await;
    assert_eq!(uncharged, (900 * RATE - 50_000) as f64);
    assert!(gw.log().contains(&id), "the log names the request");
}

#[tokio::test]
async fn bad_embeddings_requests_are_refused_and_nothing_is_charged() {
    let s = setup().await;
    let gw = &s.gw;
    let key = gw.key.clone();
    let before = books::read(&gw.config_db(), &gw.user_id).await;
    let k = Some(key.as_str());
    let cases: Vec<(Value, u16, &str, &str)> = vec![
        (
            json!({"model": "chat", "input": "x"}),
            400,
            "invalid_request",
            "model",
        ),
        (
            json!({"model": "economy", "input": "x"}),
            400,
            "invalid_request",
            "model",
        ),
        (json!({"model": "emb"}), 400, "invalid_request", "input"),
        (
            json!({"model": "emb", "input": 5}),
            400,
            "invalid_request",
            "input",
        ),
        (
            json!({"model": "emb", "input": ["a", ""]}),
            400,
            "invalid_request",
            "input[1]",
        ),
        (
            json!({"model": "emb", "input": [[1, -1]]}),
            400,
            "invalid_request",
            "input[0]",
        ),
        (
            json!({"model": "emb", "input": "x", "encoding_format": "int8"}),
            400,
            "invalid_request",
            "encoding_format",
        ),
        (
            json!({"model": "emb", "input": "x", "dimensions": -3}),
            400,
            "invalid_request",
            "dimensions",
        ),
        (
            json!({"model": "nope", "input": "x"}),
            404,
            "model_not_found",
            "",
        ),
    ];
    for (body, status, ty, param) in cases {
        let r = embed(gw, k, &body).await;
        let e = r.error(status, ty);
        if !param.is_empty() {
            assert_eq!(e["error"]["param"], param, "{body}: {e}");
        }
    }
    for raw in [&b"{not json"[..], b"[]", b""] {
        let auth = format!("Bearer {key}");
        let r = request(
            gw.addr,
            "POST",
            "/v1/embeddings",
            &[("Authorization", &auth)],
            raw,
        )
        .await;
        r.error(400, "invalid_request");
    }
    // An embedding model does not chat.
    let r = gw
        .chat(json!({"model": "emb", "messages": user("hi")}))
        .await;
    let e = r.error(400, "invalid_request");
    assert!(
        e["error"]["message"]
            .as_str()
            .unwrap()
            .contains("/v1/embeddings"),
        "{e}"
    );
    // A guest may not use a model that is not a guest model; a bad key is 401.
    embed(gw, None, &json!({"model": "emb", "input": "x"}))
        .await
        .error(401, "authentication_error");
    embed(gw, Some("tg_nope"), &json!({"model": "emb", "input": "x"}))
        .await
        .error(401, "authentication_error");
    // Nothing reached a provider, nothing was charged, no row written; the gateway serves on.
    for f in [&s.a, &s.b, &s.other] {
        assert!(embedding_requests(f).is_empty());
    }
    let after = books::read(&gw.config_db(), &gw.user_id).await;
    assert_eq!(
        (after.money, after.rows.len(), after.holds),
        (before.money, before.rows.len(), 0)
    );
    let r = embed(gw, k, &json!({"model": "emb", "input": "still serving"})).await;
    assert_eq!(r.status, 200, "{}", r.text());
    // The price list says what each model is; an embedding model has no tier.
    let p = get(gw.addr, "/v1/models/pricing").await.json();
    let emb = p["data"]
        .as_array()
        .unwrap()
        .iter()
        .find(|m| m["id"] == "emb")
        .cloned()
        .unwrap();
    assert_eq!(
        (emb["kind"].as_str(), emb["tier"].is_null()),
        (Some("embedding"), true),
        "{emb}"
    );
    let chat = p["data"]
        .as_array()
        .unwrap()
        .iter()
        .find(|m| m["id"] == "chat")
        .cloned()
        .unwrap();
    assert_eq!(
        (chat["kind"].as_str(), chat["tier"].as_str()),
        (Some("chat"), Some("economy"))
    );
    let listed = get(gw.addr, "/v1/models").await.json();
    let ids: Vec<&str> = listed["data"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|m| m["id"].as_str())
        .collect();
    assert!(
        ids.contains(&"emb") && ids.contains(&"economy") && !ids.contains(&"normal"),
        "{ids:?}"
    );
}
