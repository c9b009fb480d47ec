//! A resumed stream's legs in the ledger (docs/api.md, "Streams that survive a cut"): one
//! `usage_legs` row per provider under the request's id, each with its tokens and its charge
//! at its model's rates, their sum what the balance fell by. Runs on SQLite, and on Postgres +
//! Redis when `TOLLGATE_TEST_DATABASE_URL` and `TOLLGATE_TEST_REDIS_URL` are set.

use std::time::Duration;

use serde_json::json;
use tollgate::ledger::Ledger;
use tollgate_filters::tokens;
use tollgate_testkit::*;

#[tokio::test]
async fn each_leg_is_a_row_under_the_request_id() {
    let a = FakeOpenAi::builder("a")
        .mode(Mode::DieAfter(3))
        .start()
        .await;
    let b = FakeOpenAi::start("b").await;
    let cfg = format!(
        "{FAST_TIMEOUTS}{}{}{}{}",
        provider("p1", &[&a], ""),
        provider("p2", &[&b], ""),
        "[[models]]\nid = \"m1\"\nprovider = \"p1\"\ntier = \"economy\"\ninput_credits_per_1k = 1\noutput_credits_per_1k = 2\nmax_output_tokens = 1000\n\n",
        "[[models]]\nid = \"m2\"\nprovider = \"p2\"\ntier = \"economy\"\ninput_credits_per_1k = 3\noutput_credits_per_1k = 5\nmax_output_tokens = 1000\n\n",
    );
    let gw = Gateway::start(tollgate_bin!(), &cfg).await;
    let before = gw.balance(&gw.key).await;
    let body = json!({"model": "m1", "messages": user("Say hello"), "stream": true});
    let auth = format!("Bearer {}", gw.key);
    let headers = [
        ("Authorization", auth.as_str()),
        ("X-Tollgate-Resume", "on"),
    ];
    let r = request(
        gw.addr,
        "POST",
        "/v1/chat/completions",
        &headers,
        body.to_string().as_bytes(),
    )
    .await;
    assert!(r.text().contains("data: [DONE]"), "{}", r.text());
    let request_id = r.header("x-request-id").unwrap().to_owned();
    let charged = before - gw.balance(&gw.key).await;

    let ledger = Ledger::connect(&gw.config_db(), Duration::from_secs(2))
        .await
        .unwrap();
    let legs = ledger.usage_legs(&request_id).await.unwrap();
    assert_eq!(legs.len(), 2, "{legs:?}");
    let messages = serde_json::to_string(&body["messages"]).unwrap();
    let (p1, c1) = (
        tokens::count_prompt_json(&messages) as i64,
        tokens::count_text("Hello from a ") as i64,
    );
    let (p2, c2) = (FakeOpenAi::PROMPT_TOKENS as i64, b.reply_words() as i64);
    let expect = [
        (1, "m1", "p1", p1, c1, p1 * 1_000 + c1 * 2_000),
        (2, "m2", "p2", p2, c2, p2 * 3_000 + c2 * 5_000),
    ];
    for (row, (leg, model, provider, p, c, credits)) in legs.iter().zip(expect) {
        assert_eq!(row.request_id, request_id);
        assert_eq!(
            (row.leg, row.model_used.as_str(), row.provider.as_str()),
            (leg, model, provider)
        );
        assert_eq!(
            (row.prompt_tokens, row.completion_tokens, row.credits),
            (p, c, credits),
            "{row:?}"
        );
    }
    assert_eq!(legs.iter().map(|l| l.credits).sum::<i64>(), charged);

    // A stream served by one provider has no legs.
    let r = request(
        gw.addr,
        "POST",
        "/v1/chat/completions",
        &headers,
        json!({"model": "m2", "messages": user("hi"), "stream": true})
            .to_string()
            .as_bytes(),
    )
    .await;
    let id = r.header("x-request-id").unwrap();
    assert!(ledger.usage_legs(id).await.unwrap().is_empty());
}
