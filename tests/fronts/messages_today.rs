//! `POST /v1/messages` as Anthropic serves it today (what Claude Code sends): a `system` turn
//! inside `messages` on both kinds of provider, `anthropic-beta` forwarded to Anthropic
//! providers only, `?beta=true` accepted, and a thinking budget at or above the model's output
//! cap named in a 400 before anything is held. Runs on SQLite, and on Postgres + Redis when set.

use serde_json::{json, Value};
use tollgate_testkit::*;

async fn messages(gw: &Gateway, path: &str, body: &Value) -> Response {
    let b = serde_json::to_vec(body).unwrap();
    let headers = [
        ("Content-Type", "application/json"),
        ("anthropic-version", "2023-06-01"),
        (
            "anthropic-beta",
            "context-management-2025-06-27,mid-conversation-system-2026-04-07",
        ),
        ("x-api-key", gw.key.as_str()),
    ];
    request(gw.addr, "POST", path, &headers, &b).await
}

fn body(model: &str) -> Value {
    json!({"model": model, "max_tokens": 500,
        "messages": [{"role": "user", "content": "hi"}, {"role": "system", "content": "Be brief."},
                     {"role": "user", "content": "again"}],
        "thinking": {"type": "adaptive"},
        "context_management": {"edits": [{"type": "clear_thinking_20251015", "keep": "all"}]}})
}

#[tokio::test]
async fn todays_messages_requests_reach_both_kinds_of_provider() {
    let (a, o) = (
        FakeAnthropic::start("a").await,
        FakeOpenAi::start("o").await,
    );
    let cfg = format!(
        "{FAST_TIMEOUTS}{}{}[[models]]\nid = \"claude-x\"\nprovider = \"anth\"\ntier = \"powerful\"\ninput_credits_per_1k = 3\noutput_credits_per_1k = 15\nmax_output_tokens = 2000\n\n{}",
        anthropic_provider("anth", &[&a], ""),
        provider("oai", &[&o], ""),
        model("gpt-x", "oai", "economy", ""),
    );
    let gw = Gateway::start(tollgate_bin!(), &cfg).await;
    let db = gw.config_db();
    let initial = books::read(&db, &gw.user_id).await.money;
    let mut ok = Vec::new();

    // To Anthropic: the body as sent, the betas forwarded, `?beta=true` as Claude Code asks.
    let r = messages(&gw, "/v1/messages?beta=true", &body("claude-x")).await;
    assert_eq!(r.status, 200, "{}", r.text());
    let sent = a.requests().pop().unwrap();
    assert_eq!(
        sent.header("anthropic-beta"),
        Some("context-management-2025-06-27,mid-conversation-system-2026-04-07")
    );
    let sent = sent.json();
    assert_eq!(
        sent["messages"][1],
        json!({"role": "system", "content": "Be brief."})
    );
    assert_eq!(sent["context_management"], body("x")["context_management"]);
    ok.push(r.header("x-request-id").unwrap().to_owned());

    // To an OpenAI-compatible model: the system turn where it stands, no beta header, no
    // thinking or context management (only Anthropic's models take them).
    let r = messages(&gw, "/v1/messages?beta=true", &body("gpt-x")).await;
    assert_eq!(r.status, 200, "{}", r.text());
    assert_eq!(r.json()["type"], "message");
    let sent = o.requests().pop().unwrap();
    assert!(sent.header("anthropic-beta").is_none());
    let sent = sent.json();
    let roles: Vec<&str> = sent["messages"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| m["role"].as_str().unwrap())
        .collect();
    assert_eq!(roles, ["user", "system", "user"]);
    assert!(sent.get("thinking").is_none() && sent.get("context_management").is_none());
    ok.push(r.header("x-request-id").unwrap().to_owned());

    // A thinking budget the model's cap cannot hold: 400 naming the field and the cap.
    let mut b = body("claude-x");
    b["max_tokens"] = json!(64000);
    b["thinking"] = json!({"type": "enabled", "budget_tokens": 5000});
    let r = messages(&gw, "/v1/messages", &b).await;
    assert_eq!(r.status, 400, "{}", r.text());
    let e = r.json();
    let msg = e["error"]["message"].as_str().unwrap();
    assert!(
        msg.starts_with("thinking.budget_tokens") && msg.contains("2000"),
        "{e}"
    );
    let calls = a.requests().len();
    // A wrong role is named too.
    let mut b = body("claude-x");
    b["messages"][1]["role"] = json!("tool");
    assert_eq!(messages(&gw, "/v1/messages", &b).await.status, 400);
    assert_eq!(
        a.requests().len(),
        calls,
        "nothing refused reached the provider"
    );

    books::check(&db, &gw.user_id, initial, &ok).await;
}
