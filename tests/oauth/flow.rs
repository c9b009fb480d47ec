//! The flow an MCP client goes through, and what its tokens may do.

use serde_json::json;
use tollgate_testkit::*;

use crate::common::*;

#[tokio::test]
async fn discovery_points_a_client_without_credentials_at_the_metadata() {
    let (gw, _tools, slug, _) = gateway("").await;
    let base = format!("http://{}", gw.addr);
    for (path, resource) in [
        (
            "/.well-known/oauth-protected-resource".to_owned(),
            format!("{base}/mcp"),
        ),
        (
            "/.well-known/oauth-protected-resource/mcp".to_owned(),
            format!("{base}/mcp"),
        ),
        (
            format!("/.well-known/oauth-protected-resource/mcp/{slug}"),
            format!("{base}/mcp/{slug}"),
        ),
    ] {
        let v = get(gw.addr, &path).await.json();
        assert_eq!(v["resource"], resource.as_str(), "{path}");
        assert_eq!(v["authorization_servers"], json!([base]));
    }
    for path in [
        "/.well-known/oauth-authorization-server",
        "/.well-known/openid-configuration",
    ] {
        let v = get(gw.addr, path).await.json();
        assert_eq!(v["issuer"], base.as_str());
        assert_eq!(v["token_endpoint"], format!("{base}/oauth/token"));
        assert_eq!(v["registration_endpoint"], format!("{base}/oauth/register"));
        assert_eq!(v["code_challenge_methods_supported"], json!(["S256"]));
    }
    // No credentials: 401 and the challenge naming the endpoint's own metadata.
    for path in ["/mcp".to_owned(), format!("/mcp/{slug}")] {
        let r = request(
            gw.addr,
            "POST",
            &path,
            &[("Content-Type", "application/json")],
            br#"{"jsonrpc":"2.0","id":1,"method":"tools/list"}"#,
        )
        .await;
        assert_eq!(r.status, 401);
        assert_eq!(r.json()["error"]["type"], "authentication_error");
        let want = format!("Bearer resource_metadata=\"{base}/.well-known/oauth-protected-resource{path}\", scope=\"mcp\"");
        assert_eq!(r.header("www-authenticate"), Some(want.as_str()));
    }
    // A bad token or key: the same, and why.
    for bad in [format!("tga_{}", "x".repeat(40)), "tg_nope".to_owned()] {
        let r = rpc(&gw, "/mcp", &bad, "tools/list", json!({})).await;
        assert_eq!(r.status, 401);
        assert!(r
            .header("www-authenticate")
            .unwrap()
            .contains("error=\"invalid_token\""));
    }
    // API keys work as before, with no challenge.
    let r = rpc(&gw, "/mcp", &gw.key, "tools/list", json!({})).await;
    assert_eq!(r.status, 200, "{}", r.text());
    assert_eq!(r.header("www-authenticate"), None);
    // The authorization endpoint sends the browser to the consent page, query and all.
    let client = client(&gw).await;
    let p = params(&gw, &client, "/mcp");
    let q: Vec<(String, String)> = p
        .as_object()
        .unwrap()
        .iter()
        .map(|(k, v)| (k.clone(), v.as_str().unwrap().to_owned()))
        .collect();
    let q = q
        .iter()
        .map(|(k, v)| format!("{k}={}", enc(v)))
        .collect::<Vec<_>>()
        .join("&");
    let r = get(gw.addr, &format!("/oauth/authorize?{q}")).await;
    assert_eq!(r.status, 302);
    assert_eq!(
        r.header("location"),
        Some(format!("/dashboard/authorize?{q}").as_str())
    );
    assert_eq!(get(gw.addr, "/dashboard/authorize").await.status, 200);
    assert_eq!(get(gw.addr, "/dashboard/apps").await.status, 200);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_token_calls_tools_charged_as_its_key_on_every_instance_and_refresh_rotates() {
    let (gw, _tools, slug, cfg) = gateway("").await;
    let client = client(&gw).await;
    let (access, refresh_token) = tokens(&gw, &gw.key, &client, "/mcp").await;
    let before = gw.balance(&gw.key).await;
    let call = json!({"name": format!("{slug}__echo"), "arguments": {"text": "via oauth"}});
    let r = rpc(&gw, "/mcp", &access, "tools/call", call.clone()).await;
    assert_eq!(r.status, 200, "{}", r.text());
    assert_eq!(r.json()["result"]["content"][0]["text"], "via oauth");
    let r = rpc(
        &gw,
        &format!("/mcp/{slug}"),
        &access,
        "tools/call",
        json!({"name": "echo", "arguments": {"text": "one"}}),
    )
    .await;
    assert_eq!(
        r.json()["result"]["content"][0]["text"],
        "one",
        "{}",
        r.text()
    );
    assert_eq!(before - gw.balance(&gw.key).await, 2 * PRICE * 1_000_000);
    // Another instance on the same ledger takes the token.
    let second = gw.second(tollgate_bin!(), &cfg).await;
    let r = rpc(&second, "/mcp", &access, "tools/call", call.clone()).await;
    assert_eq!(
        r.json()["result"]["content"][0]["text"],
        "via oauth",
        "{}",
        r.text()
    );
    // Charged once more, on the other instance (its lease round reaches the ledger shortly).
    let mut spent = 0;
    for _ in 0..50 {
        spent = before - gw.balance(&gw.key).await;
        if spent == 3 * PRICE * 1_000_000 {
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
    }
    assert_eq!(spent, 3 * PRICE * 1_000_000);
    // The token is for the MCP endpoints only.
    assert_eq!(
        gw.chat_as(
            Some(&access),
            &json!({"model": "m-2024-01-01", "messages": [{"role": "user", "content": "hi"}]})
        )
        .await
        .status,
        401
    );
    // Refresh rotates: a new pair, on the other instance too; the old refresh token is done.
    let r = refresh(&second, &client, &refresh_token).await;
    assert_eq!(r.status, 200, "{}", r.text());
    let v = r.json();
    let (access2, refresh2) = (
        v["access_token"].as_str().unwrap().to_owned(),
        v["refresh_token"].as_str().unwrap().to_owned(),
    );
    assert_ne!(refresh2, refresh_token);
    assert_eq!(
        rpc(&gw, "/mcp", &access2, "tools/list", json!({}))
            .await
            .status,
        200
    );
    let r = refresh(&gw, &client, &refresh2).await;
    assert_eq!(r.status, 200, "{}", r.text());
    let refresh3 = r.json()["refresh_token"].as_str().unwrap().to_owned();
    // Presenting a rotated refresh token again: refused, and the grant is revoked, so every
    // token of it stops, here at once and on the other instance within 5 s.
    let r = refresh(&gw, &client, &refresh_token).await;
    assert_eq!(r.status, 400);
    assert_eq!(r.json()["error"], "invalid_grant");
    assert_eq!(
        rpc(&gw, "/mcp", &access2, "tools/list", json!({}))
            .await
            .status,
        401
    );
    assert_eq!(status_becomes(&second, "/mcp", &access2, 401).await, 401);
    assert_eq!(
        refresh(&gw, &client, &refresh3).await.json()["error"],
        "invalid_grant"
    );
    // A grant for one service does not open the others.
    let (one, _) = tokens(&gw, &gw.key, &client, &format!("/mcp/{slug}")).await;
    assert_eq!(
        rpc(&gw, &format!("/mcp/{slug}"), &one, "tools/list", json!({}))
            .await
            .status,
        200
    );
    let r = rpc(&gw, "/mcp", &one, "tools/list", json!({})).await;
    assert_eq!(r.status, 401);
    assert!(r
        .header("www-authenticate")
        .unwrap()
        .contains("invalid_token"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn codes_work_once_verifiers_must_match_and_tokens_expire() {
    let (gw, _tools, _slug, cfg) = gateway("[oauth]\naccess_token_secs = 60\n").await;
    let client = client(&gw).await;
    // A wrong verifier: refused, and the code is spent.
    let code = approve(&gw, &gw.key, &client, "/mcp").await;
    let r = exchange(&gw, &client, &code, &format!("{VERIFIER}-wrong")).await;
    assert_eq!(
        (r.status, r.json()["error"].clone()),
        (400, json!("invalid_grant"))
    );
    assert!(r.json()["error_description"]
        .as_str()
        .unwrap()
        .contains("code_verifier"));
    assert_eq!(
        exchange(&gw, &client, &code, VERIFIER).await.json()["error"],
        "invalid_grant"
    );
    // A code exchanged twice: the second refused and the first's tokens revoked.
    let code = approve(&gw, &gw.key, &client, "/mcp").await;
    let r = exchange(&gw, &client, &code, VERIFIER).await;
    assert_eq!(r.status, 200, "{}", r.text());
    let access = r.json()["access_token"].as_str().unwrap().to_owned();
    assert_eq!(r.json()["expires_in"], 60);
    assert_eq!(
        rpc(&gw, "/mcp", &access, "tools/list", json!({}))
            .await
            .status,
        200
    );
    let r = exchange(&gw, &client, &code, VERIFIER).await;
    assert_eq!(
        (r.status, r.json()["error"].clone()),
        (400, json!("invalid_grant"))
    );
    assert_eq!(
        rpc(&gw, "/mcp", &access, "tools/list", json!({}))
            .await
            .status,
        401
    );
    // Another client cannot exchange this client's code.
    let other = crate::common::client(&gw).await;
    let code = approve(&gw, &gw.key, &client, "/mcp").await;
    assert_eq!(
        exchange(&gw, &other, &code, VERIFIER).await.json()["error"],
        "invalid_grant"
    );
    // Expiry: an instance whose clock is two minutes ahead refuses a 60 s token; this one
    // still takes it.
    let (access, _) = tokens(&gw, &gw.key, &client, "/mcp").await;
    let later = Gateway::start_opts(
        tollgate_bin!(),
        &cfg,
        Opts {
            database_url: Some(gw.config_db()),
            redis_prefix: gw.redis_prefix(),
            no_account: true,
            env: vec![("TOLLGATE_CLOCK_OFFSET_MS".into(), "120000".into())],
            ..Opts::default()
        },
    )
    .await;
    let r = rpc(&later, "/mcp", &access, "tools/list", json!({})).await;
    assert_eq!(r.status, 401);
    assert!(
        r.json()["error"]["message"]
            .as_str()
            .unwrap()
            .contains("expired"),
        "{}",
        r.text()
    );
    assert!(r
        .header("www-authenticate")
        .unwrap()
        .contains("error=\"invalid_token\""));
    assert_eq!(
        rpc(&gw, "/mcp", &access, "tools/list", json!({}))
            .await
            .status,
        200
    );
    // An expired code: the later instance sees every code of this one as expired.
    let code = approve(&gw, &gw.key, &client, "/mcp").await;
    let r = exchange(&later, &client, &code, VERIFIER).await;
    assert_eq!(r.json()["error"], "invalid_grant");
    assert!(r.json()["error_description"]
        .as_str()
        .unwrap()
        .contains("expired"));
}
