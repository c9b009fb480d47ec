//! Every metered request with a key has its record: a JSON reply, a stream (its time to first
//! token), a failover from a failing provider to the next candidate (both legs), a 402 refused
//! inside its handler, a tool call; listed newest first, filtered by model, status, key and
//! time, paged by cursor, and exported as JSON lines that parse one by one.

use serde_json::{json, Value};
use tollgate_testkit::*;

use super::common::*;

/// Two providers in one tier: `bad` answers 500, so a request for `m-bad` fails over to `m`.
async fn two_providers() -> (FakeOpenAi, FakeOpenAi, FakeToolServer, Gateway) {
    let good = FakeOpenAi::builder("good")
        .mode(Mode::Usage(10, 20))
        .start()
        .await;
    let bad = FakeOpenAi::start("bad").await;
    bad.set_mode(Mode::Status(500));
    let tools = FakeToolServer::start().await;
    let cfg = format!(
        "{FAST_TIMEOUTS}{}{}{}{}[mcp]\nallow_private_upstreams = true\ncall_timeout = 2\n",
        provider("bad", &[&bad], ""),
        provider("p", &[&good], ""),
        model("m-bad", "bad", "economy", ""),
        model("m", "p", "economy", ""),
    );
    let gw = Gateway::start_opts(tollgate_bin!(), &cfg, opts()).await;
    (good, bad, tools, gw)
}

fn legs(r: &Value) -> Vec<(String, String)> {
    r["legs"]
        .as_array()
        .unwrap_or_else(|| panic!("{r}"))
        .iter()
        .map(|l| {
            (
                l["model"].as_str().unwrap().to_owned(),
                l["outcome"].as_str().unwrap().to_owned(),
            )
        })
        .collect()
}

#[tokio::test]
async fn every_metered_request_has_its_record_with_its_legs() {
    let (_good, _bad, tools, gw) = two_providers().await;
    let key = gw.key.clone();
    // A JSON reply.
    let (status, json_id, _) = chat(&gw, &key, "m", "hello", false).await;
    assert_eq!(status, 200);
    let r = record(&gw, &key, &json_id).await;
    assert_eq!(r["object"], "request");
    assert_eq!(r["account_id"], gw.user_id.as_str());
    assert_eq!(r["door"], "chat_completions");
    assert_eq!(r["route"], "chat");
    assert_eq!(
        (r["model_requested"].as_str(), r["model_used"].as_str()),
        (Some("m"), Some("m"))
    );
    assert_eq!(r["provider"], "p");
    assert_eq!(r["status"], 200);
    assert_eq!(
        (r["prompt_tokens"].as_i64(), r["completion_tokens"].as_i64()),
        (Some(10), Some(20))
    );
    // 10 × 1 / 1000 + 20 × 2 / 1000 credits.
    assert_eq!(micros(&r["cost"]), 50_000, "{r}");
    assert!(r["latency_ms"].as_i64().unwrap() >= 0);
    assert!(
        r["ttft_ms"].is_null(),
        "a JSON reply has no first token apart: {r}"
    );
    assert_eq!(legs(&r), vec![("m".into(), "served".into())]);
    assert!(r["key_id"].as_str().unwrap().starts_with("key_"), "{r}");
    assert_eq!(r["payload_stored"], false);
    assert!(
        r["request_body"].is_null() && r["response_body"].is_null(),
        "{r}"
    );
    assert!(
        !r.to_string().contains(&key),
        "the key itself is never shown"
    );

    // A stream: its time to first token.
    let (status, stream_id, _) = chat(&gw, &key, "m", "hello", true).await;
    assert_eq!(status, 200);
    let r = record(&gw, &key, &stream_id).await;
    let ttft = r["ttft_ms"].as_i64().unwrap_or_else(|| panic!("{r}"));
    assert!(ttft <= r["latency_ms"].as_i64().unwrap(), "{r}");
    assert_eq!(r["status"], 200);

    // A failover: the failing provider's leg, then the one that served.
    let (status, failover_id, _) = chat(&gw, &key, "m-bad", "hello", false).await;
    assert_eq!(status, 200);
    let r = record(&gw, &key, &failover_id).await;
    assert_eq!(
        legs(&r),
        vec![
            ("m-bad".into(), "failover".into()),
            ("m".into(), "served".into())
        ],
        "{r}"
    );
    assert_eq!(r["legs"][0]["reason"], "5xx", "{r}");
    assert_eq!(r["legs"][0]["provider"], "bad");
    assert!(r["legs"][0]["endpoint"]
        .as_str()
        .unwrap()
        .starts_with("127.0.0.1:"));
    assert!(r["legs"][1]["duration_ms"].is_i64());
    assert_eq!(
        (r["model_requested"].as_str(), r["model_used"].as_str()),
        (Some("m-bad"), Some("m"))
    );

    // A 402, refused inside the handler: an account with nothing left.
    let (broke, broke_key) = gw.signup(&unique_email()).await;
    gw.admin_credits(&broke, -100.0).await;
    let (status, refused_id, _) = chat(&gw, &broke_key, "m", "hello", false).await;
    assert_eq!(status, 402);
    let r = record(&gw, &broke_key, &refused_id).await;
    assert_eq!(r["status"], 402);
    assert!(r["error"].as_str().unwrap_or_default().len() > 3, "{r}");
    assert_eq!(r["account_id"], broke.as_str());

    // A tool call.
    let slug = format!(
        "rl-{}",
        unique_email().split('@').next().unwrap().replace('.', "")
    );
    let (dev, dev_key) = gw.signup(&unique_email()).await;
    let r = gw
        .api_as(
            &dev_key,
            "POST",
            "/api/v1/mcp/services",
            &json!({"slug": slug, "upstream_url": tools.url(), "default_credits": 3}),
        )
        .await;
    assert_eq!(r.status, 201, "{}", r.text());
    let ok = gw
        .api_as(
            ADMIN_TOKEN,
            "POST",
            &format!("/api/v1/admin/mcp/services/{slug}/approve"),
            &json!({}),
        )
        .await;
    assert_eq!(ok.status, 200, "{}", ok.text());
    let call = json!({"jsonrpc": "2.0", "id": 1, "method": "tools/call",
                     "params": {"name": format!("{slug}__echo"), "arguments": {"text": "x"}}});
    let r = gw.api_as(&key, "POST", "/mcp", &call).await;
    assert_eq!(r.status, 200, "{}", r.text());
    let tool_id = r.header("x-request-id").unwrap().to_owned();
    let r = record(&gw, &key, &tool_id).await;
    assert_eq!(r["door"], "mcp");
    assert_eq!(r["model_requested"], format!("{slug}__echo"));
    assert_eq!(micros(&r["cost"]), 3_000_000, "{r}");
    assert_ne!(dev, gw.user_id);

    // Listed newest first, filtered.
    let all = list(&gw, &key, "").await;
    assert_eq!(all.status, 200, "{}", all.text());
    let page = all.json();
    assert_eq!(
        ids(&page),
        vec![
            tool_id.clone(),
            failover_id.clone(),
            stream_id.clone(),
            json_id.clone()
        ]
    );
    assert_eq!(page["has_more"], false);
    assert_eq!(
        ids(&list(&gw, &key, "model=m-bad").await.json()),
        vec![failover_id.clone()]
    );
    let served_by_m = ids(&list(&gw, &key, "model=m&status=200").await.json());
    assert_eq!(
        served_by_m,
        vec![failover_id.clone(), stream_id.clone(), json_id.clone()]
    );
    assert_eq!(
        ids(&list(&gw, &broke_key, "status=error").await.json()),
        vec![refused_id.clone()]
    );
    assert_eq!(
        ids(&list(&gw, &broke_key, "status=402").await.json()),
        vec![refused_id]
    );
    assert!(ids(&list(&gw, &key, "status=error").await.json()).is_empty());
    let key_id = page["data"][0]["key_id"].as_str().unwrap().to_owned();
    assert_eq!(
        ids(&list(&gw, &key, &format!("key_id={key_id}")).await.json()).len(),
        4
    );
    assert!(ids(&list(&gw, &key, "key_id=key_nobody").await.json()).is_empty());
    let first = page["data"][3]["created_at"].as_i64().unwrap();
    assert_eq!(
        ids(&list(&gw, &key, &format!("since={}", first + 3600))
            .await
            .json())
        .len(),
        0
    );
    assert_eq!(
        ids(
            &list(&gw, &key, &format!("since={first}&until={}", first + 3600))
                .await
                .json()
        )
        .len(),
        4
    );
    assert!(ids(&list(&gw, &key, &format!("until={first}")).await.json()).is_empty());

    // Paged by cursor: two pages of two, then none.
    let p1 = list(&gw, &key, "limit=2").await.json();
    assert_eq!(ids(&p1), vec![tool_id.clone(), failover_id.clone()]);
    assert_eq!(p1["has_more"], true);
    let cursor = p1["next_cursor"].as_str().unwrap();
    let p2 = list(&gw, &key, &format!("limit=2&cursor={cursor}"))
        .await
        .json();
    assert_eq!(ids(&p2), vec![stream_id.clone(), json_id.clone()]);
    assert_eq!(p2["has_more"], false);
    assert!(p2["next_cursor"].is_null());

    // JSON lines: one record per line, with its legs.
    let r = list(&gw, &key, "format=jsonl&limit=3").await;
    assert_eq!(r.status, 200);
    assert!(r
        .header("content-type")
        .unwrap()
        .starts_with("application/jsonl"));
    assert!(r.header("x-next-cursor").is_some());
    let text = r.text();
    let lines: Vec<Value> = text
        .lines()
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("{e}: {l}")))
        .collect();
    assert_eq!(lines.len(), 3, "{text}");
    assert_eq!(lines[1]["id"], failover_id.as_str());
    assert_eq!(lines[1]["legs"].as_array().unwrap().len(), 2);
    assert!(
        lines[1].get("request_body").is_some(),
        "the export carries the payload fields"
    );
    assert!(gw.is_healthy().await);
}
