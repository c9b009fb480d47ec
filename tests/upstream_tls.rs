//! TLS to providers (issue 49): nginx terminates TLS in front of the fake provider with
//! certificates of a private CA made by `openssl` at test time. With the provider's `ca_file`
//! the gateway serves and charges exactly over https on another port and on 443, with and
//! without health checks; a server certificate of an unknown CA, for another name or expired is
//! refused before the request leaves (nginx reads no request), each logged with the provider
//! and rustls' reason, on the request path and by the health check; a client certificate is
//! presented to an nginx that requires one (`ssl_verify_client on`), and without it nginx
//! refuses the request. `check-config` refuses unreadable or unusable TLS files. Runs on
//! SQLite, and on Postgres + Redis when set.

use std::net::SocketAddr;
use std::time::{Duration, Instant};

use serde_json::json;
use tollgate_testkit::nginx::{cert, Nginx, Pki, Site};
use tollgate_testkit::*;

/// The private PKI, or `None` (reported as skipped) when nginx or openssl is missing.
fn pki() -> Option<Pki> {
    if let Some(why) = nginx::missing() {
        skip(&why);
        return None;
    }
    Some(Pki::make().expect("make the test PKI"))
}

fn loopback() -> SocketAddr {
    format!("127.0.0.1:{}", free_port()).parse().unwrap()
}

/// nginx presenting `cert` on `listen`, in front of `fake`.
async fn nginx(
    pki: &Pki,
    cert: &str,
    listen: SocketAddr,
    fake: &FakeOpenAi,
    client_ca: Option<String>,
) -> Nginx {
    let site = Site {
        listen,
        cert,
        client_ca,
        upstream: fake.addr,
    };
    Nginx::start(pki, &site).await.expect("start nginx")
}

/// A `[[providers]]` block on one endpoint URL, with `extra` lines (TLS keys, health check).
fn tls_provider(name: &str, url: &str, extra: &str) -> String {
    format!(
        "[[providers]]\nname = \"{name}\"\nkind = \"openai\"\nendpoints = [\"{url}\"]\n{extra}\n"
    )
}

const HEALTH: &str =
    "health_check = { path = \"/v1/models\", interval_ms = 200, timeout_ms = 1000 }";

async fn eventually(what: &str, mut done: impl FnMut() -> bool) {
    let start = Instant::now();
    while !done() {
        assert!(start.elapsed() < Duration::from_secs(10), "{what}");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// A JSON chat request to `model` that must be served: its `X-Credits-Charged` is exactly
/// what the balance fell by. Returns its request id.
async fn served(gw: &Gateway, model: &str) -> String {
    let before = gw.balance(&gw.key).await;
    let r = gw
        .chat(json!({"model": model, "messages": user("Say hello")}))
        .await;
    assert_eq!(r.status, 200, "{model}: {}\n{}", r.text(), gw.log());
    let fell = before - gw.balance(&gw.key).await;
    let header: f64 = r
        .header("x-credits-charged")
        .expect("X-Credits-Charged")
        .parse()
        .unwrap();
    assert!(fell > 0, "{model}: nothing charged");
    assert_eq!(micros(&json!(header)), fell, "{model}");
    r.header("x-request-id").unwrap().to_owned()
}

/// A chat request to `model` that must fail with nothing charged; returns its status.
async fn refused(gw: &Gateway, model: &str) -> u16 {
    let before = gw.balance(&gw.key).await;
    let r = gw
        .chat(json!({"model": model, "messages": user("Say hello")}))
        .await;
    assert_ne!(r.status, 200, "{model} was served: {}", r.text());
    assert_eq!(gw.balance(&gw.key).await, before, "{model}: charged");
    r.status
}

#[tokio::test]
async fn served_and_charged_exactly_over_https_on_another_port_with_and_without_health_checks() {
    let Some(pki) = pki() else { return };
    let fake = FakeOpenAi::start("p").await;
    let site = nginx(&pki, cert::GOOD, loopback(), &fake, None).await;
    let url = format!("https://localhost:{}", site.addr.port());
    let ca = format!("ca_file = \"{}\"", pki.path("ca.pem"));
    let cfg = format!(
        "{FAST_TIMEOUTS}{}{}{}{}",
        tls_provider("plain", &url, &ca),
        tls_provider("checked", &url, &format!("{ca}\n{HEALTH}")),
        model("m-plain", "plain", "economy", ""),
        model("m-checked", "checked", "economy", ""),
    );
    let gw = Gateway::start(tollgate_bin!(), &cfg).await;
    let db = gw.config_db();
    let initial = books::read(&db, &gw.user_id).await.money;
    // The health check passes through nginx: its certificate verified against `ca_file`.
    eventually("a health check reached the provider through TLS", || {
        fake.health_checks() > 0
    })
    .await;
    let host = format!("localhost:{}", site.addr.port());
    assert!(fake.health_check_hosts().iter().all(|h| *h == host));

    let mut ok = Vec::new();
    for model in ["m-plain", "m-checked", "m-plain", "m-checked"] {
        ok.push(served(&gw, model).await);
    }
    // A stream too, charged as the books say.
    let r = gw
        .chat(json!({"model": "m-checked", "messages": user("Say hello"), "stream": true}))
        .await;
    assert_eq!(r.status, 200, "{}", r.text());
    assert!(r.text().contains("[DONE]"));
    ok.push(r.header("x-request-id").unwrap().to_owned());

    assert_eq!(fake.chat_count(), 5);
    let chats = site
        .access_log()
        .lines()
        .filter(|l| l.contains("POST /v1/chat/completions"))
        .count();
    assert_eq!(chats, 5, "{}", site.access_log());
    books::check(&db, &gw.user_id, initial, &ok).await;
    assert!(!gw.log().contains("TLS handshake"), "{}", gw.log());
}

/// The scheme's own port: `https://localhost` (no port in the URL, the `Host` header or the
/// server name). The one test of the suite that binds 127.0.0.1:443 (we run as root).
#[tokio::test]
async fn served_and_charged_exactly_over_https_on_port_443() {
    let Some(pki) = pki() else { return };
    let fake = FakeOpenAi::start("p").await;
    let site = nginx(
        &pki,
        cert::GOOD,
        "127.0.0.1:443".parse().unwrap(),
        &fake,
        None,
    )
    .await;
    let ca = format!("ca_file = \"{}\"", pki.path("ca.pem"));
    let cfg = format!(
        "{FAST_TIMEOUTS}{}{}{}{}",
        tls_provider("plain", "https://localhost", &ca),
        tls_provider("checked", "https://localhost/", &format!("{ca}\n{HEALTH}")),
        model("m-plain", "plain", "economy", ""),
        model("m-checked", "checked", "economy", ""),
    );
    let gw = Gateway::start(tollgate_bin!(), &cfg).await;
    let db = gw.config_db();
    let initial = books::read(&db, &gw.user_id).await.money;
    eventually("a health check reached the provider on 443", || {
        fake.health_checks() > 0
    })
    .await;
    assert!(fake.health_check_hosts().iter().all(|h| h == "localhost"));
    let ok = vec![served(&gw, "m-plain").await, served(&gw, "m-checked").await];
    let hosts: Vec<String> = fake
        .requests()
        .iter()
        .map(|r| r.header("host").unwrap_or_default().to_owned())
        .collect();
    assert_eq!(hosts, ["localhost", "localhost"]);
    let chats = site
        .access_log()
        .lines()
        .filter(|l| l.contains("POST /v1/chat/completions"))
        .count();
    assert_eq!(chats, 2, "{}", site.access_log());
    books::check(&db, &gw.user_id, initial, &ok).await;
}

#[tokio::test]
async fn an_untrusted_ca_a_wrong_name_and_an_expired_certificate_are_refused_before_the_request_leaves(
) {
    let Some(pki) = pki() else { return };
    let fake = FakeOpenAi::start("p").await;
    let ca = format!("ca_file = \"{}\"", pki.path("ca.pem"));
    // (provider, certificate nginx presents, what rustls says of it, its model's tier: one
    // each, so that a request fails over to no other of them)
    let cases = [
        ("untrusted", cert::UNTRUSTED, "UnknownIssuer", "economy"),
        (
            "wrong-name",
            cert::WRONG_NAME,
            "certificate not valid for name \"localhost\"",
            "normal",
        ),
        ("expired", cert::EXPIRED, "certificate expired", "powerful"),
    ];
    let mut sites = Vec::new();
    let mut cfg = FAST_TIMEOUTS.to_string();
    for (name, cert, _, tier) in cases {
        let site = nginx(&pki, cert, loopback(), &fake, None).await;
        let url = format!("https://localhost:{}", site.addr.port());
        // The same server twice: requests only, and a health check only.
        cfg.push_str(&tls_provider(name, &url, &ca));
        cfg.push_str(&tls_provider(
            &format!("{name}-checked"),
            &url,
            &format!("{ca}\n{HEALTH}"),
        ));
        cfg.push_str(&model(&format!("m-{name}"), name, tier, ""));
        sites.push(site);
    }
    let gw = Gateway::start(tollgate_bin!(), &cfg).await;
    let db = gw.config_db();
    let initial = books::read(&db, &gw.user_id).await.money;
    for (site, (name, _, reason, _)) in sites.iter().zip(cases) {
        let before = gw.balance(&gw.key).await;
        let r = gw
            .chat(json!({"model": format!("m-{name}"), "messages": user("Say hello")}))
            .await;
        // The client is told the model could not be reached, never the address or the reason.
        let e = r.error(502, "upstream_error");
        let message = e["error"]["message"]
            .as_str()
            .unwrap_or_default()
            .to_owned();
        assert!(
            !message.contains("127.0.0.1") && !message.contains(reason),
            "{message}"
        );
        assert_eq!(gw.balance(&gw.key).await, before, "{name}: charged");
        // The log is written off the request's path: its line may follow the answer.
        let warned = |log: &str| {
            log.lines()
                .filter(|l| l.contains("TLS handshake with the provider failed"))
                .filter(|l| l.contains(&format!("provider={name} ")))
                .map(str::to_owned)
                .collect::<Vec<_>>()
        };
        eventually(&format!("a TLS warning for {name}"), || {
            !warned(&gw.log()).is_empty()
        })
        .await;
        let log = gw.log();
        let lines = warned(&log);
        assert_eq!(lines.len(), 1, "one TLS warning for {name}:\n{log}");
        let endpoint = format!("endpoint={} ", site.addr);
        assert!(
            lines[0].contains("WARN") && lines[0].contains(reason) && lines[0].contains(&endpoint),
            "{name}: {}",
            lines[0]
        );
    }
    // The health checks say why, once each, naming the provider.
    for (name, _, reason, _) in cases {
        let provider = format!("provider={name}-checked ");
        let start = Instant::now();
        loop {
            let log = gw.log();
            let lines: Vec<&str> = log
                .lines()
                .filter(|l| l.contains("health check failed") && l.contains(&provider))
                .collect();
            if let Some(line) = lines.first() {
                assert!(line.contains(reason), "{name}: {line}");
                assert_eq!(lines.len(), 1, "{name}: logged once: {lines:?}");
                break;
            }
            assert!(
                start.elapsed() < Duration::from_secs(10),
                "no health check failure for {name}:\n{log}"
            );
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }
    // Nothing reached nginx's HTTP side, nor the provider behind it.
    for (site, (name, ..)) in sites.iter().zip(cases) {
        assert_eq!(site.requests(), 0, "{name}: {}", site.access_log());
    }
    assert_eq!((fake.chat_count(), fake.health_checks()), (0, 0));
    let books = books::settled(&db, &gw.user_id).await;
    assert_eq!(books.holds, 0);
    assert_eq!(books.money, initial, "nothing charged");
}

#[tokio::test]
async fn mutual_tls_is_accepted_with_the_client_certificate_and_refused_without() {
    let Some(pki) = pki() else { return };
    let fake = FakeOpenAi::start("p").await;
    let site = nginx(
        &pki,
        cert::GOOD,
        loopback(),
        &fake,
        Some(pki.path("client-ca.pem")),
    )
    .await;
    let url = format!("https://localhost:{}", site.addr.port());
    let ca = format!("ca_file = \"{}\"", pki.path("ca.pem"));
    let client = format!(
        "client_cert_file = \"{}\"\nclient_key_file = \"{}\"",
        pki.path("client.pem"),
        pki.path("client.key")
    );
    let cfg = format!(
        "{FAST_TIMEOUTS}{}{}{}{}",
        tls_provider("mtls", &url, &format!("{ca}\n{client}\n{HEALTH}")),
        tls_provider("no-cert", &url, &ca),
        model("m-mtls", "mtls", "economy", ""),
        model("m-no-cert", "no-cert", "economy", ""),
    );
    let gw = Gateway::start(tollgate_bin!(), &cfg).await;
    let db = gw.config_db();
    let initial = books::read(&db, &gw.user_id).await.money;
    // The health check presents the certificate too.
    eventually("a health check with the client certificate", || {
        fake.health_checks() > 0
    })
    .await;
    let served_id = served(&gw, "m-mtls").await;
    assert_eq!(fake.chat_count(), 1);

    // Without it the handshake completes (TLS 1.3 sends the client's certificate after the
    // server's Finished), and nginx refuses the request itself: 400 "No required SSL
    // certificate was sent". The provider behind it never sees it.
    let status = refused(&gw, "m-no-cert").await;
    assert_eq!(fake.chat_count(), 1, "the request reached the provider");
    let refusals = site
        .access_log()
        .lines()
        .filter(|l| l.contains("POST /v1/chat/completions") && l.contains("\" 400 "))
        .count();
    assert_eq!(refusals, 1, "status {status}: {}", site.access_log());

    let books = books::settled(&db, &gw.user_id).await;
    assert_eq!(books.holds, 0);
    let charged: i64 = books.rows.iter().map(|(_, c)| c).sum();
    assert_eq!(initial - books.money, charged);
    let served_row = books.rows.iter().find(|(id, _)| *id == served_id);
    assert!(served_row.is_some_and(|(_, c)| *c > 0), "{:?}", books.rows);
}

/// `check-config` on a config of one provider with `extra`: its exit status and stderr.
fn check_config(url: &str, extra: &str) -> (bool, String) {
    let dir = temp_dir();
    let cfg = dir.join("tollgate.toml");
    std::fs::write(
        &cfg,
        format!(
            "[server]\nlisten = \"127.0.0.1:0\"\n{}",
            tls_provider("p", url, extra)
        ),
    )
    .unwrap();
    let out = std::process::Command::new(tollgate_bin!())
        .args(["check-config", "--config"])
        .arg(&cfg)
        .env("TOLLGATE_ADMIN_TOKEN", ADMIN_TOKEN)
        .output()
        .unwrap();
    let _ = std::fs::remove_dir_all(&dir);
    (
        out.status.success(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

#[test]
fn check_config_refuses_tls_files_it_cannot_use() {
    let Some(pki) = pki() else { return };
    let https = "https://localhost:8443";
    let p = |f: &str| pki.path(f);
    let refusals = [
        (
            https,
            format!("ca_file = \"{}\"", p("absent.pem")),
            "providers[0].ca_file: cannot read",
        ),
        (
            https,
            format!("ca_file = \"{}\"", p("good.key")),
            "providers[0].ca_file: ",
        ),
        (
            https,
            format!("ca_file = \"{}\"", p("ca.index")),
            "holds no PEM certificate",
        ),
        (
            https,
            format!("client_cert_file = \"{}\"", p("client.pem")),
            "providers[0].client_key_file: must be set with client_cert_file",
        ),
        (
            https,
            format!(
                "client_cert_file = \"{}\"\nclient_key_file = \"{}\"",
                p("client.pem"),
                p("good.key")
            ),
            "providers[0].client_cert_file: ",
        ),
        (
            "http://localhost:8000",
            format!("ca_file = \"{}\"", p("ca.pem")),
            "providers[0].ca_file: applies to https:// endpoints only",
        ),
    ];
    for (url, extra, expected) in refusals {
        let (ok, err) = check_config(url, &extra);
        assert!(!ok, "accepted: {extra}");
        assert!(err.contains(expected), "{extra}: {err}");
    }
    let good = format!(
        "ca_file = \"{}\"\nclient_cert_file = \"{}\"\nclient_key_file = \"{}\"",
        p("ca.pem"),
        p("client.pem"),
        p("client.key")
    );
    let (ok, err) = check_config(https, &good);
    assert!(ok, "{err}");
}
