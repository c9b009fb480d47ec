//! DNS-rebinding protection of `/mcp` and `/mcp/{slug}` (issue 30, part): a request through
//! another host name, or from another site's page, is 403 before anything else; the gateway's
//! own host, its loopback names and `[mcp] allowed_hosts` / `allowed_origins` are served.

use serde_json::{json, Value};
use tollgate_testkit::*;

async fn initialize(gw: &Gateway, path: &str, headers: &[(&str, &str)]) -> Response {
    let body = json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
        "protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "t", "version": "1"}}});
    let auth = format!("Bearer {}", gw.key);
    let mut raw = format!(
        "POST {path} HTTP/1.1\r\nConnection: close\r\nAuthorization: {auth}\r\nContent-Type: application/json\r\nAccept: application/json, text/event-stream\r\nContent-Length: {}\r\n",
        body.to_string().len()
    );
    for (k, v) in headers {
        raw.push_str(&format!("{k}: {v}\r\n"));
    }
    raw.push_str(&format!("\r\n{body}"));
    raw_request(gw.addr, raw.as_bytes()).await
}

fn forbidden(r: &Response, what: &str) {
    assert_eq!(r.status, 403, "{}", r.text());
    let v: Value = r.json();
    assert_eq!(v["error"]["type"], "permission_error", "{v}");
    assert!(
        v["error"]["message"].as_str().unwrap().contains(what),
        "{v}"
    );
}

#[tokio::test]
async fn another_host_or_another_sites_page_is_refused() {
    let fake = FakeOpenAi::start("p").await;
    let gw = Gateway::start(tollgate_bin!(), &one_model_config(&fake, "m")).await;
    let own = gw.addr.to_string();
    let port = gw.addr.port().to_string();
    for path in ["/mcp", "/mcp/some-service"] {
        forbidden(
            &initialize(&gw, path, &[("Host", "evil.example")]).await,
            "host `evil.example`",
        );
        forbidden(
            &initialize(
                &gw,
                path,
                &[("Host", &own), ("Origin", "http://evil.example")],
            )
            .await,
            "origin `http://evil.example`",
        );
    }
    // Its own address, a loopback name on its port, and its own pages are served.
    let ok = initialize(&gw, "/mcp", &[("Host", &own)]).await;
    assert_eq!(ok.status, 200, "{}", ok.text());
    let local = format!("localhost:{port}");
    assert_eq!(
        initialize(&gw, "/mcp", &[("Host", &local)]).await.status,
        200
    );
    let origin = format!("http://{own}");
    assert_eq!(
        initialize(&gw, "/mcp", &[("Host", &own), ("Origin", &origin)])
            .await
            .status,
        200
    );
    // The rest of the API is not concerned.
    let r = raw_request(
        gw.addr,
        b"GET /healthz HTTP/1.1\r\nHost: evil.example\r\nConnection: close\r\n\r\n",
    )
    .await;
    assert_eq!(r.status, 200);
    assert!(gw.is_healthy().await);
}

#[tokio::test]
async fn a_deployment_behind_a_proxy_lists_its_names() {
    let fake = FakeOpenAi::start("p").await;
    let cfg = format!(
        "{}[mcp]\nallowed_hosts = [\"tools.internal:8443\"]\nallowed_origins = [\"https://app.example\"]\n",
        one_model_config(&fake, "m")
    );
    let gw = Gateway::start(tollgate_bin!(), &cfg).await;
    let r = initialize(
        &gw,
        "/mcp",
        &[
            ("Host", "tools.internal:8443"),
            ("Origin", "https://app.example"),
        ],
    )
    .await;
    assert_eq!(r.status, 200, "{}", r.text());
    forbidden(
        &initialize(&gw, "/mcp", &[("Host", "tools.internal:9999")]).await,
        "host",
    );

    let cfg = format!(
        "{}[mcp]\nallowed_hosts = [\"*\"]\n",
        one_model_config(&fake, "m")
    );
    let open = Gateway::start(tollgate_bin!(), &cfg).await;
    assert_eq!(
        initialize(&open, "/mcp", &[("Host", "10.1.2.3:8080")])
            .await
            .status,
        200
    );
    forbidden(
        &initialize(
            &open,
            "/mcp",
            &[("Host", "x"), ("Origin", "http://evil.example")],
        )
        .await,
        "origin",
    );
}
