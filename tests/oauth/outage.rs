//! A ledger outage: a token's requests are answered as its key's are (503, retry), never 401:
//! an OAuth client told its token is bad would throw it away and start its sign-in over.

use std::time::Duration;

use serde_json::json;
use tollgate_testkit::*;

use crate::common::*;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_ledger_outage_answers_a_token_as_its_key_and_never_as_revoked() {
    let pg = match PrivatePostgres::try_start() {
        Ok(pg) => pg,
        Err(why) => return skip(&format!("no Postgres cluster of this test's own: {why}")),
    };
    let fake = FakeOpenAi::start("p").await;
    let tools = FakeToolServer::start().await;
    let cfg = config(&fake, "");
    let gw = Gateway::start_opts(
        tollgate_bin!(),
        &cfg,
        Opts {
            database_url: Some(pg.url()),
            storage: "acquire_timeout_ms = 1000".into(),
            ..Opts::default()
        },
    )
    .await;
    let slug = uniq("out");
    let body = json!({"slug": slug, "upstream_url": tools.url(), "default_credits": PRICE});
    let r = api(&gw, "POST", "/api/v1/mcp/services", &gw.key, &body).await;
    assert_eq!(r.status, 201, "{}", r.text());
    let path = format!("/api/v1/admin/mcp/services/{slug}/approve");
    assert_eq!(
        api(&gw, "POST", &path, ADMIN_TOKEN, &json!({}))
            .await
            .status,
        200
    );
    let client = client(&gw).await;
    let (access, _) = tokens(&gw, &gw.key, &client, "/mcp").await;
    for auth in [&gw.key, &access] {
        assert_eq!(
            rpc(&gw, "/mcp", auth, "tools/list", json!({})).await.status,
            200
        );
    }
    pg.stop();
    // Past the 4 s cache: both lookups now ask the ledger.
    tokio::time::sleep(Duration::from_secs(5)).await;
    let init = json!({"protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "t", "version": "1"}});
    let key = rpc(&gw, "/mcp", &gw.key, "initialize", init.clone()).await;
    let token = rpc(&gw, "/mcp", &access, "initialize", init.clone()).await;
    assert_eq!(token.status, 503, "{}", token.text());
    assert_eq!(token.header("www-authenticate"), None);
    assert_eq!(
        token.status,
        key.status,
        "key: {}\ntoken: {}",
        key.text(),
        token.text()
    );
    // A token never seen is not let in on the strength of the outage.
    let unknown = format!("tga_{}", "z".repeat(40));
    assert_ne!(
        rpc(&gw, "/mcp", &unknown, "tools/list", json!({}))
            .await
            .status,
        200
    );
    pg.start_again();
}
