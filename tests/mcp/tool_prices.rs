//! Per-tool prices (issue 30): a developer prices each tool of a service (the rest cost the
//! service's price), agents see each tool's price in its `_meta`, each call is charged its
//! tool's price exactly, the developer earns their share of it, and earnings are shown per tool;
//! a bad price or an unknown tool is a 400 naming the field and changes nothing.

use serde_json::{json, Value};
use tollgate_testkit::*;

use crate::common::{admin, api, gateway, rpc, uniq, MCP_OPEN};

const PRICE: &str = "tollgate/price_credits";

/// The listed tools by name: name → `_meta` price.
fn prices(list: &Value) -> Vec<(String, Value)> {
    let mut out: Vec<(String, Value)> = list["result"]["tools"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| {
            (
                t["name"].as_str().unwrap().to_owned(),
                t["_meta"][PRICE].clone(),
            )
        })
        .collect();
    out.sort_by(|a, b| a.0.cmp(&b.0));
    out
}

async fn own_service(gw: &Gateway, dev_key: &str) -> Value {
    let v = api(gw, "GET", "/api/v1/mcp/services", dev_key, &json!({}))
        .await
        .json();
    v["data"][0].clone()
}

#[tokio::test]
async fn each_tool_is_charged_its_own_price_and_earnings_are_per_tool() {
    let gw = gateway(MCP_OPEN).await;
    let tools = FakeToolServer::start().await;
    let slug = uniq("priced");
    let (_, dev_key) = gw.signup(&unique_email()).await;
    let r = api(&gw, "POST", "/api/v1/mcp/services", &dev_key, &json!({"slug": slug, "upstream_url": tools.url(), "default_credits": 3, "tool_prices": {"add": 7}})).await;
    assert_eq!(r.status, 201, "{}", r.text());
    assert_eq!(r.json()["tool_prices"], json!({"add": 7}));
    assert_eq!(admin(&gw, &slug, "approve").await.status, 200);

    // Each tool's price in its `_meta`, on both endpoints.
    let all = rpc(&gw, "/mcp", &gw.key, "tools/list", json!({})).await;
    let ours: Vec<_> = prices(&all)
        .into_iter()
        .filter(|(n, _)| n.starts_with(&format!("{slug}__")))
        .collect();
    assert_eq!(
        ours,
        [
            (format!("{slug}__add"), json!(7)),
            (format!("{slug}__echo"), json!(3))
        ]
    );
    let one = format!("/mcp/{slug}");
    let listed = rpc(&gw, &one, &gw.key, "tools/list", json!({})).await;
    assert_eq!(
        prices(&listed),
        [("add".to_owned(), json!(7)), ("echo".to_owned(), json!(3))]
    );
    // The rest of a tool's definition is the server's.
    assert_eq!(
        listed["result"]["tools"][0]["inputSchema"]["type"],
        "object"
    );

    // Charged exactly, the developer paid 80 % of each call's own price (rounded up).
    let call = |name: &str| {
        let (gw, path, name) = (&gw, one.clone(), name.to_owned());
        async move {
            let args = if name == "add" {
                json!({"a": 1, "b": 2})
            } else {
                json!({"text": "t"})
            };
            let v = rpc(
                gw,
                &path,
                &gw.key,
                "tools/call",
                json!({"name": name, "arguments": args}),
            )
            .await;
            assert!(v["result"]["content"].is_array(), "{v}");
        }
    };
    let (before, dev_before) = (gw.balance(&gw.key).await, gw.balance(&dev_key).await);
    call("echo").await;
    call("echo").await;
    call("add").await;
    assert_eq!(before - gw.balance(&gw.key).await, 13_000_000);
    assert_eq!(gw.balance(&dev_key).await - dev_before, 12_000_000); // 3 + 3 + 6
    let u = gw.usage(&gw.key).await;
    assert_eq!(u["recent"][0]["model_requested"], format!("{slug}__add"));
    assert_eq!(u["recent"][0]["credits"].as_f64(), Some(7.0));
    assert_eq!(u["recent"][1]["credits"].as_f64(), Some(3.0));
    let e = api(&gw, "GET", "/api/v1/mcp/earnings", &dev_key, &json!({}))
        .await
        .json();
    assert_eq!(
        (
            e["total_calls"].as_i64(),
            e["total_credits_earned"].as_f64()
        ),
        (Some(3), Some(12.0)),
        "{e}"
    );
    let s = &e["services"][0];
    assert_eq!(
        (
            s["slug"].as_str(),
            s["calls"].as_i64(),
            s["credits_earned"].as_f64()
        ),
        (Some(slug.as_str()), Some(3), Some(12.0)),
        "{e}"
    );
    assert_eq!(
        s["tools"],
        json!([
            {"tool": "add", "calls": 1, "credits_earned": 6.0},
            {"tool": "echo", "calls": 2, "credits_earned": 6.0},
        ])
    );
    assert_eq!(
        (
            e["recent"][0]["tool"].as_str(),
            e["recent"][0]["credits_earned"].as_f64()
        ),
        (Some("add"), Some(6.0))
    );

    // Changed by the owner: replaced whole; the service price alone leaves them be; null clears.
    let patch = |body: Value| {
        let (gw, dev_key, path) = (&gw, &dev_key, format!("/api/v1/mcp/services/{slug}"));
        async move {
            let r = api(gw, "PATCH", &path, dev_key, &body).await;
            assert_eq!(r.status, 200, "{}", r.text());
            r.json()
        }
    };
    let v = patch(json!({"tool_prices": {"echo": 60, "add": 0}})).await;
    assert_eq!(v["tool_prices"], json!({"add": 0, "echo": 60}));
    assert_eq!(v["status"], "live");
    let v = patch(json!({"default_credits": 1})).await;
    assert_eq!(
        (v["default_credits"].as_i64(), &v["tool_prices"]),
        (Some(1), &json!({"add": 0, "echo": 60}))
    );
    let listed = rpc(&gw, &one, &gw.key, "tools/list", json!({})).await;
    assert_eq!(
        prices(&listed),
        [("add".to_owned(), json!(0)), ("echo".to_owned(), json!(60))]
    );
    let (before, dev_before) = (gw.balance(&gw.key).await, gw.balance(&dev_key).await);
    call("echo").await;
    call("add").await;
    assert_eq!(before - gw.balance(&gw.key).await, 60_000_000);
    assert_eq!(gw.balance(&dev_key).await - dev_before, 48_000_000);
    let v = patch(json!({"tool_prices": null})).await;
    assert_eq!(v["tool_prices"], json!({}));
    let listed = rpc(&gw, &one, &gw.key, "tools/list", json!({})).await;
    assert_eq!(
        prices(&listed),
        [("add".to_owned(), json!(1)), ("echo".to_owned(), json!(1))]
    );
    let before = gw.balance(&gw.key).await;
    call("add").await;
    assert_eq!(before - gw.balance(&gw.key).await, 1_000_000);
    let e = api(&gw, "GET", "/api/v1/mcp/earnings", &dev_key, &json!({}))
        .await
        .json();
    assert_eq!(
        e["services"][0]["tools"],
        json!([
            {"tool": "add", "calls": 2, "credits_earned": 7.0},
            {"tool": "echo", "calls": 3, "credits_earned": 54.0},
        ])
    );
}

#[tokio::test]
async fn a_bad_tool_price_is_a_400_naming_the_field_and_changes_nothing() {
    let gw = gateway(MCP_OPEN).await;
    let tools = FakeToolServer::start().await;
    let slug = uniq("bad-prices");
    let (dev, dev_key) = gw.signup(&unique_email()).await;
    let bad = [
        (json!({"echo": -1}), "tool_prices.echo", "whole number"),
        (json!({"echo": 61}), "tool_prices.echo", "at most 60"),
        (json!({"echo": 1e12}), "tool_prices.echo", "whole number"),
        (json!({"echo": 1.5}), "tool_prices.echo", "whole number"),
        (json!({"echo": "2"}), "tool_prices.echo", "whole number"),
        (
            json!({"echo": 2, "nope": 2}),
            "tool_prices.nope",
            "offers no tool `nope`",
        ),
        (json!([2]), "tool_prices:", "object"),
    ];
    for (prices, field, says) in &bad {
        let body = json!({"slug": slug, "upstream_url": tools.url(), "default_credits": 3, "tool_prices": prices});
        let r = api(&gw, "POST", "/api/v1/mcp/services", &dev_key, &body).await;
        let m = r.error(400, "invalid_request")["error"]["message"]
            .as_str()
            .unwrap()
            .to_owned();
        assert!(m.starts_with(field) && m.contains(says), "{prices}: {m}");
    }
    // Nothing was registered: the slug is still free.
    assert_eq!(own_service(&gw, &dev_key).await, Value::Null);
    let body = json!({"slug": slug, "upstream_url": tools.url(), "default_credits": 3, "tool_prices": {"echo": 5}});
    assert_eq!(
        api(&gw, "POST", "/api/v1/mcp/services", &dev_key, &body)
            .await
            .status,
        201
    );
    let before = own_service(&gw, &dev_key).await;
    let path = format!("/api/v1/mcp/services/{slug}");
    for (prices, field, says) in &bad {
        // Beside a good price change: neither is written.
        let body = json!({"default_credits": 9, "tool_prices": prices});
        let r = api(&gw, "PATCH", &path, &dev_key, &body).await;
        let m = r.error(400, "invalid_request")["error"]["message"]
            .as_str()
            .unwrap()
            .to_owned();
        assert!(m.starts_with(field) && m.contains(says), "{prices}: {m}");
    }
    let after = own_service(&gw, &dev_key).await;
    assert_eq!(
        (&after["default_credits"], &after["tool_prices"]),
        (&before["default_credits"], &before["tool_prices"])
    );
    assert_eq!(after["tool_prices"], json!({"echo": 5}));
    // A first-party server (the operator's) is not bound by the cap, per tool either.
    let fp = uniq("fp-prices");
    let body = json!({"slug": fp, "upstream_url": tools.url(), "default_credits": 100, "owner_id": dev, "tool_prices": {"add": 500}});
    let r = api(
        &gw,
        "POST",
        "/api/v1/admin/mcp/services",
        ADMIN_TOKEN,
        &body,
    )
    .await;
    assert_eq!(r.status, 201, "{}", r.text());
    assert_eq!(r.json()["tool_prices"], json!({"add": 500}));
}
