//! What is refused: endpoints on private, loopback or link-local addresses (unless the
//! operator allows them), and at delivery too when the rule changed since; every bad body of
//! every endpoint (unknown fields, wrong types, bad URLs, unknown or no events), each a 400
//! naming its field with nothing written; someone else's endpoint and another organization's
//! are 404, an organization member who is not an admin 403.

use std::time::Duration;

use serde_json::{json, Value};
use tollgate_testkit::*;

use super::{endpoint, gateway, log, register, WAIT};

async fn count(gw: &Gateway, key: &str, query: &str) -> usize {
    let r = gw
        .api_as(key, "GET", &format!("/api/v1/webhooks{query}"), &json!({}))
        .await;
    assert_eq!(r.status, 200, "{}", r.text());
    r.json()["data"].as_array().unwrap().len()
}

/// Registers `url` until the answer is `status` (a reload takes a moment): the endpoint's id
/// when made.
async fn until_registered(gw: &Gateway, url: &str, status: u16) -> Option<String> {
    let start = std::time::Instant::now();
    loop {
        let r = register(gw, &gw.key, json!({"url": url, "events": ["balance.low"]})).await;
        if r.status == status {
            return r.json()["id"].as_str().map(str::to_owned);
        }
        assert!(start.elapsed() < WAIT, "{}", r.text());
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

#[tokio::test]
async fn private_addresses_are_refused_unless_allowed() {
    let fake = FakeOpenAi::start("p").await;
    let strict = format!(
        "{}[webhooks]\npoll_interval_ms = 100\n",
        one_model_config(&fake, "m")
    );
    // A ledger of its own: on a shared one, another test's gateway (loopback allowed) could
    // claim this endpoint's delivery, as any instance of one deployment may.
    let opts = Opts {
        embedded: true,
        ..Opts::default()
    };
    let gw = Gateway::start_opts(tollgate_bin!(), &strict, opts).await;
    for url in [
        "http://127.0.0.1:9/x",
        "http://localhost/x",
        "http://10.1.2.3/x",
        "http://192.168.0.10/x",
        "http://169.254.169.254/latest/meta-data",
        "http://[::1]/x",
        "http://[fd00::1]/x",
        "http://[fe80::1]/x",
        "http://0.0.0.0/x",
        "http://224.0.0.1/x",
    ] {
        let r = register(&gw, &gw.key, json!({"url": url, "events": ["balance.low"]})).await;
        let e = r.error(400, "invalid_request");
        assert_eq!(e["error"]["param"], "url", "{url}: {e}");
        let msg = e["error"]["message"].as_str().unwrap();
        assert!(msg.contains("may not use"), "{url}: {msg}");
    }
    assert_eq!(count(&gw, &gw.key, "").await, 0);
    assert!(gw.is_healthy().await);

    // Allowed by the operator, then disallowed by a reload: the delivery is refused at its
    // address and the receiver gets nothing.
    let rx = Receiver::start().await;
    let allowing = strict.replace(
        "[webhooks]\n",
        "[webhooks]\nallow_private_targets = true\nretry_base_ms = 200\nmax_backoff_secs = 1\n",
    );
    gw.reload_with(&allowing);
    let id = until_registered(&gw, &rx.url("/p"), 201).await.unwrap();
    gw.reload_with(&strict.replace(
        "[webhooks]\n",
        "[webhooks]\nretry_base_ms = 200\nmax_backoff_secs = 1\n",
    ));
    // The reload has taken when a loopback URL is refused again.
    until_registered(&gw, &rx.url("/q"), 400).await;
    let r = gw
        .api_as(
            &gw.key,
            "POST",
            &format!("/api/v1/webhooks/{id}/test"),
            &json!({}),
        )
        .await;
    assert_eq!(r.status, 202);
    let start = std::time::Instant::now();
    loop {
        let rows = log(&gw, &gw.key, &id).await;
        if rows
            .first()
            .is_some_and(|r| r["attempts"].as_i64().unwrap_or(0) >= 2)
        {
            let err = rows[0]["last_error"].as_str().unwrap_or("");
            assert!(err.contains("loopback"), "{rows:?}");
            assert_eq!(rows[0]["status"], "pending");
            break;
        }
        assert!(start.elapsed() < WAIT, "{rows:?}");
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    assert!(
        rx.all().is_empty(),
        "a refused address is never connected to"
    );
}

#[tokio::test]
async fn bad_input_on_every_endpoint_names_its_field_and_writes_nothing() {
    let (_f, gw) = gateway().await;
    let rx = Receiver::start().await;
    let url = rx.url("/ok");
    let bad: Vec<(Value, &str)> = vec![
        (
            json!({"url": url, "events": ["balance.low"], "extra": 1}),
            "extra",
        ),
        (json!({"events": ["balance.low"]}), "url"),
        (json!({"url": url}), "events"),
        (json!({"url": 5, "events": ["balance.low"]}), "url"),
        (
            json!({"url": "ftp://example.com/", "events": ["balance.low"]}),
            "url",
        ),
        (
            json!({"url": "not a url", "events": ["balance.low"]}),
            "url",
        ),
        (
            json!({"url": "https://user:pw@example.com/", "events": ["balance.low"]}),
            "url",
        ),
        (
            json!({"url": "https://nowhere.invalid/", "events": ["balance.low"]}),
            "url",
        ),
        (json!({"url": url, "events": []}), "events"),
        (json!({"url": url, "events": "balance.low"}), "events"),
        (json!({"url": url, "events": ["balance.high"]}), "events[0]"),
        (
            json!({"url": url, "events": ["balance.low", "webhook.test"]}),
            "events[1]",
        ),
        (
            json!({"url": url, "events": ["balance.low"], "balance_threshold": -1}),
            "balance_threshold",
        ),
        (
            json!({"url": url, "events": ["balance.low"], "balance_threshold": "5"}),
            "balance_threshold",
        ),
        (
            json!({"url": url, "events": ["balance.low"], "description": 7}),
            "description",
        ),
        (
            json!({"url": url, "events": ["balance.low"], "organization_id": 7}),
            "organization_id",
        ),
    ];
    for (body, field) in &bad {
        let e = register(&gw, &gw.key, body.clone())
            .await
            .error(400, "invalid_request");
        assert_eq!(e["error"]["param"], *field, "{body}: {e}");
    }
    for raw in [&b"not json"[..], b"[1]", b""] {
        let r = gw
            .with_auth(
                "POST",
                "/api/v1/webhooks",
                &format!("Bearer {}", gw.key),
                raw,
            )
            .await;
        r.error(400, "invalid_request");
    }
    assert_eq!(count(&gw, &gw.key, "").await, 0, "nothing written");

    let (id, _) = endpoint(&gw, &gw.key, &url, &["balance.low"]).await;
    let patch = |body: Value| {
        let gw = &gw;
        let path = format!("/api/v1/webhooks/{id}");
        async move { gw.api_as(&gw.key, "PATCH", &path, &body).await }
    };
    for (body, field) in [
        (json!({"enabled": "yes"}), "enabled"),
        (json!({"events": []}), "events"),
        (json!({"events": ["nope"]}), "events[0]"),
        (json!({"url": "http://[::1"}), "url"),
        (json!({"url": "https://nowhere.invalid/"}), "url"),
        (json!({"secret": "mine"}), "secret"),
        (json!({"balance_threshold": 2e9}), "balance_threshold"),
        (json!({"enabled": false, "events": ["x"]}), "events[0]"),
    ] {
        let e = patch(body.clone()).await.error(400, "invalid_request");
        assert_eq!(e["error"]["param"], field, "{body}: {e}");
    }
    // Nothing changed by the refused ones (the last one's `enabled` included).
    let got = gw
        .api_as(
            &gw.key,
            "GET",
            &format!("/api/v1/webhooks/{id}"),
            &json!({}),
        )
        .await
        .json();
    assert_eq!(
        (
            got["enabled"].clone(),
            got["events"].clone(),
            got["url"].clone()
        ),
        (json!(true), json!(["balance.low"]), json!(url))
    );
    let ok = patch(json!({"enabled": false, "description": "ops", "balance_threshold": 3})).await;
    assert_eq!(ok.status, 200, "{}", ok.text());
    assert_eq!(
        (
            ok.json()["enabled"].clone(),
            ok.json()["balance_threshold"].clone()
        ),
        (json!(false), json!(3.0))
    );
    let cleared = patch(json!({"description": null, "balance_threshold": null}))
        .await
        .json();
    assert_eq!(
        (
            cleared["description"].clone(),
            cleared["balance_threshold"].clone()
        ),
        (Value::Null, Value::Null)
    );
    // Unknown ids.
    for (method, path) in [
        ("GET", "/api/v1/webhooks/we_nope"),
        ("PATCH", "/api/v1/webhooks/we_nope"),
        ("DELETE", "/api/v1/webhooks/we_nope"),
        ("POST", "/api/v1/webhooks/we_nope/test"),
        ("GET", "/api/v1/webhooks/we_nope/deliveries"),
        ("POST", "/api/v1/webhooks/we_nope/rotate_secret"),
    ] {
        gw.api_as(&gw.key, method, path, &json!({}))
            .await
            .error(404, "not_found");
    }
    assert!(gw.is_healthy().await);
}

#[tokio::test]
async fn someone_elses_and_another_organizations_endpoints_are_not_found() {
    let (_f, gw) = gateway().await;
    let rx = Receiver::start().await;
    let (mine, _) = endpoint(&gw, &gw.key, &rx.url("/m"), &["balance.low"]).await;
    let (_, stranger) = gw.signup(&unique_email()).await;
    for (method, path) in [
        ("GET", format!("/api/v1/webhooks/{mine}")),
        ("PATCH", format!("/api/v1/webhooks/{mine}")),
        ("DELETE", format!("/api/v1/webhooks/{mine}")),
        ("POST", format!("/api/v1/webhooks/{mine}/test")),
        ("GET", format!("/api/v1/webhooks/{mine}/deliveries")),
        ("POST", format!("/api/v1/webhooks/{mine}/rotate_secret")),
    ] {
        gw.api_as(&stranger, method, &path, &json!({"enabled": false}))
            .await
            .error(404, "not_found");
    }
    assert_eq!(count(&gw, &stranger, "").await, 0);
    // An organization's endpoints: its owner and admins manage them; a member is told its
    // role is too small; anyone else finds no organization.
    let (_, owner) = gw.signup(&unique_email()).await;
    let r = gw
        .api_as(&owner, "POST", "/api/v1/orgs", &json!({"name": "Hooks"}))
        .await;
    assert_eq!(r.status, 201, "{}", r.text());
    let org = r.json()["id"].as_str().unwrap().to_owned();
    let member_email = unique_email();
    let (_, member) = gw.signup(&member_email).await;
    let inv = gw
        .api_as(
            &owner,
            "POST",
            &format!("/api/v1/orgs/{org}/invitations"),
            &json!({"email": member_email, "role": "member"}),
        )
        .await;
    assert_eq!(inv.status, 201, "{}", inv.text());
    let token = inv.json()["token"].as_str().unwrap().to_owned();
    let acc = gw
        .api_as(
            &member,
            "POST",
            "/api/v1/invitations/accept",
            &json!({"token": token}),
        )
        .await;
    assert_eq!(acc.status, 200, "{}", acc.text());
    let body = json!({"url": rx.url("/org"), "events": ["balance.low"], "organization_id": org});
    register(&gw, &member, body.clone())
        .await
        .error(403, "permission_error");
    register(&gw, &stranger, body.clone())
        .await
        .error(404, "not_found");
    let r = register(&gw, &owner, body).await;
    assert_eq!(r.status, 201, "{}", r.text());
    assert_eq!(r.json()["organization_id"], org.as_str());
    let theirs = r.json()["id"].as_str().unwrap().to_owned();
    gw.api_as(
        &member,
        "GET",
        &format!("/api/v1/webhooks/{theirs}"),
        &json!({}),
    )
    .await
    .error(403, "permission_error");
    gw.api_as(
        &stranger,
        "GET",
        &format!("/api/v1/webhooks/{theirs}"),
        &json!({}),
    )
    .await
    .error(404, "not_found");
    gw.api_as(
        &gw.key,
        "DELETE",
        &format!("/api/v1/webhooks/{theirs}"),
        &json!({}),
    )
    .await
    .error(404, "not_found");
    gw.api_as(
        &stranger,
        "GET",
        &format!("/api/v1/webhooks?organization_id={org}"),
        &json!({}),
    )
    .await
    .error(404, "not_found");
    assert_eq!(
        count(&gw, &owner, &format!("?organization_id={org}")).await,
        1
    );
    assert_eq!(
        count(&gw, &owner, "").await,
        0,
        "the owner's own wallet has none"
    );
    // The organization's test event names the organization.
    gw.api_as(
        &owner,
        "POST",
        &format!("/api/v1/webhooks/{theirs}/test"),
        &json!({}),
    )
    .await;
    let d = rx.wait_for("webhook.test", WAIT).await;
    assert_eq!(d.json()["organization_id"], org.as_str());
    assert!(d.json().get("account_id").is_none());
    // Deleted: gone for its owner too.
    let del = gw
        .api_as(
            &owner,
            "DELETE",
            &format!("/api/v1/webhooks/{theirs}"),
            &json!({}),
        )
        .await;
    assert_eq!(del.status, 200);
    assert_eq!(
        count(&gw, &owner, &format!("?organization_id={org}")).await,
        0
    );
}
