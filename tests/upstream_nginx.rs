//! The gateway's HTTP/1.1 client to providers against a real server (issue 50): nginx serves
//! fixed chat completions, JSON and streams, framed by Content-Length (`return`), chunked (its
//! sub and addition filters drop the length; a stream comes in several chunks) and to the close
//! (the same with `chunked_transfer_encoding off`); with keep-alive, with a `keepalive_requests`
//! limit (nginx says `Connection: close` on the last one and closes), with no keep-alive at all,
//! and with idle connections that nginx closes (`keepalive_timeout`). Every answer is relayed
//! whole and charged as its usage says, and nginx's access log (`$connection`,
//! `$connection_requests`) shows which upstream connection carried each request: kept and used
//! again while nginx keeps it, never once nginx has said close or closed it, and no request
//! sent twice. Runs on SQLite, and on Postgres + Redis when set.

use std::collections::{BTreeMap, BTreeSet};
use std::net::SocketAddr;
use std::time::{Duration, Instant};

use serde_json::{json, Value};
use tollgate_testkit::nginx::Nginx;
use tollgate_testkit::*;

/// What every answer says, and the usage it reports.
const CONTENT: &str = "Hello from nginx";
const JSON: &str = r#"{"id":"chatcmpl-nginx","object":"chat.completion","created":1700000000,"model":"up","choices":[{"index":0,"message":{"role":"assistant","content":"Hello from nginx"},"finish_reason":"stop"}],"usage":{"prompt_tokens":7,"completion_tokens":3,"total_tokens":10}}"#;

/// A stream's events in three parts (for the three chunks nginx's addition filter makes).
fn sse_parts() -> [String; 3] {
    let chunk = |choices: &str| {
        format!(
            r#"data: {{"id":"chatcmpl-nginx","object":"chat.completion.chunk","created":1700000000,"model":"up","choices":{choices}}}\n\n"#
        )
    };
    let delta = |d: &str, finish: &str| {
        chunk(&format!(
            r#"[{{"index":0,"delta":{d},"finish_reason":{finish}}}]"#
        ))
    };
    let usage = r#"data: {"id":"chatcmpl-nginx","object":"chat.completion.chunk","created":1700000000,"model":"up","choices":[],"usage":{"prompt_tokens":7,"completion_tokens":3,"total_tokens":10}}\n\n"#;
    [
        delta(r#"{"role":"assistant","content":""}"#, "null"),
        delta(r#"{"content":"Hello"}"#, "null") + &delta(r#"{"content":" from nginx"}"#, "null"),
        delta("{}", r#""stop""#) + usage + r"data: [DONE]\n\n",
    ]
}

/// How nginx frames a server's bodies.
#[derive(Clone, Copy, Debug, PartialEq)]
enum Framing {
    /// Content-Length (`return` alone).
    Length,
    /// Chunked: the sub filter (JSON) and the addition filter (streams, three chunks) drop the
    /// length.
    Chunked,
    /// No length and no chunks: read to the close (`chunked_transfer_encoding off`).
    Close,
}

/// One nginx `server` on its own port: `/json` and `/sse` serve the JSON answer and the stream.
struct Server {
    name: &'static str,
    addr: SocketAddr,
    framing: Framing,
    /// nginx directives of its keep-alive.
    keepalive: &'static str,
}

impl Server {
    fn new(name: &'static str, framing: Framing, keepalive: &'static str) -> Server {
        let addr = format!("127.0.0.1:{}", free_port()).parse().unwrap();
        Server {
            name,
            addr,
            framing,
            keepalive,
        }
    }

    fn config(&self) -> String {
        let [first, middle, last] = sse_parts();
        let all = format!("{first}{middle}{last}");
        let (json_filter, stream) = match self.framing {
            Framing::Length => (String::new(), format!("return 200 '{all}';")),
            Framing::Chunked | Framing::Close => (
                // A substitution that changes nothing still drops the length.
                "sub_filter 'nginx' 'nginx'; sub_filter_types application/json;".to_owned(),
                format!(
                    "add_before_body /{name}-first; add_after_body /{name}-last; addition_types text/event-stream; return 200 '{middle}';",
                    name = self.name
                ),
            ),
        };
        let chunking = if self.framing == Framing::Close {
            "chunked_transfer_encoding off;"
        } else {
            ""
        };
        format!(
            "  server {{
    listen {addr};
    {keepalive}
    {chunking}
    location = /json/v1/chat/completions {{ default_type application/json; {json_filter} return 200 '{JSON}'; }}
    location = /sse/v1/chat/completions {{ default_type text/event-stream; {stream} }}
    location = /{name}-first {{ default_type text/event-stream; return 200 '{first}'; }}
    location = /{name}-last {{ default_type text/event-stream; return 200 '{last}'; }}
  }}
",
            addr = self.addr,
            keepalive = self.keepalive,
            name = self.name,
        )
    }

    /// Its two providers (`/json` and `/sse` on it) and their models.
    fn gateway_config(&self) -> String {
        let mut cfg = String::new();
        for kind in ["json", "sse"] {
            let name = format!("{}-{kind}", self.name);
            cfg.push_str(&format!(
                "[[providers]]\nname = \"{name}\"\nkind = \"openai\"\nendpoints = [\"http://{}/{kind}\"]\n\n",
                self.addr
            ));
            cfg.push_str(&model(&format!("m-{name}"), &name, "economy", ""));
        }
        cfg
    }

    /// The requests nginx logged on this server: (connection, its request number), in order.
    fn requests(&self, site: &Nginx) -> Vec<(u64, u64)> {
        let port = self.addr.port().to_string();
        site.access_log()
            .lines()
            .filter_map(|l| {
                let f: Vec<&str> = l.split(' ').collect();
                (f[0] == port).then(|| (f[1].parse().unwrap(), f[2].parse().unwrap()))
            })
            .collect()
    }

    /// How many requests each connection carried.
    fn per_connection(&self, site: &Nginx) -> BTreeMap<u64, u64> {
        let mut m = BTreeMap::new();
        for (c, _) in self.requests(site) {
            *m.entry(c).or_default() += 1;
        }
        m
    }
}

/// nginx with `servers`, or `None` (reported as skipped) when it is not installed.
async fn nginx(servers: &[&Server]) -> Option<Nginx> {
    if nginx::nginx_bin().is_none() {
        skip("nginx is not installed (./dev test installs Debian's nginx-light)");
        return None;
    }
    let config: String = servers.iter().map(|s| s.config()).collect();
    Some(
        Nginx::plain(servers[0].addr, &config)
            .await
            .expect("start nginx"),
    )
}

/// The head and body of one request straight to nginx, for what framing it uses.
async fn direct(server: &Server, kind: &str) -> (String, Vec<u8>) {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let mut s = tokio::net::TcpStream::connect(server.addr).await.unwrap();
    let req = format!(
        "POST /{kind}/v1/chat/completions HTTP/1.1\r\nHost: x\r\nConnection: close\r\nContent-Length: 2\r\n\r\n{{}}"
    );
    s.write_all(req.as_bytes()).await.unwrap();
    let mut buf = Vec::new();
    s.read_to_end(&mut buf).await.unwrap();
    let end = buf.windows(4).position(|w| w == b"\r\n\r\n").unwrap();
    let head = String::from_utf8_lossy(&buf[..end]).to_ascii_lowercase();
    (head, buf[end + 4..].to_vec())
}

/// Asserts that nginx frames `server`'s answers as it is meant to: the test's premise.
async fn frames_as_meant(server: &Server) {
    for kind in ["json", "sse"] {
        let (head, body) = direct(server, kind).await;
        let (length, chunked) = (
            head.contains("\r\ncontent-length:"),
            head.contains("\r\ntransfer-encoding: chunked"),
        );
        let what = format!("{} /{kind}: {head}", server.name);
        match server.framing {
            Framing::Length => assert!(length && !chunked, "{what}"),
            Framing::Chunked => {
                assert!(!length && chunked, "{what}");
                if kind == "sse" {
                    // Three chunks and the last one.
                    let sizes = body.windows(2).filter(|w| w == b"\r\n").count();
                    assert!(sizes >= 7, "{what}: {}", String::from_utf8_lossy(&body));
                }
            }
            Framing::Close => assert!(
                !length && !chunked && head.contains("\r\nconnection: close"),
                "{what}"
            ),
        }
    }
}

/// A JSON chat request to `model` that must be served whole: its content, and its
/// `X-Credits-Charged` exactly what the balance fell by. Returns its request id.
async fn served_json(gw: &Gateway, model: &str) -> String {
    let before = gw.balance(&gw.key).await;
    let r = gw
        .chat(json!({"model": model, "messages": user("Say hello")}))
        .await;
    assert_eq!(r.status, 200, "{model}: {}\n{}", r.text(), gw.log());
    assert_eq!(
        r.json()["choices"][0]["message"]["content"],
        CONTENT,
        "{model}"
    );
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

/// A streamed chat request to `model` that must be served whole: every delta, then `[DONE]`.
async fn served_stream(gw: &Gateway, model: &str) -> String {
    let r = gw
        .chat(json!({"model": model, "messages": user("Say hello"), "stream": true}))
        .await;
    assert_eq!(r.status, 200, "{model}: {}\n{}", r.text(), gw.log());
    let data = r.sse_data();
    assert_eq!(data.last().map(String::as_str), Some("[DONE]"), "{model}");
    let text: String = data
        .iter()
        .filter_map(|d| serde_json::from_str::<Value>(d).ok())
        .filter_map(|v| {
            v["choices"][0]["delta"]["content"]
                .as_str()
                .map(str::to_owned)
        })
        .collect();
    assert_eq!(text, CONTENT, "{model}: {}", r.text());
    r.header("x-request-id").unwrap().to_owned()
}

/// `n` requests to `server`'s models, JSON and streamed in turn; their request ids.
async fn serve(gw: &Gateway, server: &Server, n: usize) -> Vec<String> {
    let mut ok = Vec::new();
    for i in 0..n {
        ok.push(if i % 2 == 0 {
            served_json(gw, &format!("m-{}-json", server.name)).await
        } else {
            served_stream(gw, &format!("m-{}-sse", server.name)).await
        });
    }
    ok
}

/// Waits until nginx has logged `n` requests on `server` (it logs once the answer is sent,
/// which may be just after the gateway has relayed it), then checks it logged no more.
async fn logged(site: &Nginx, server: &Server, n: usize) {
    let start = Instant::now();
    while server.requests(site).len() < n {
        assert!(
            start.elapsed() < Duration::from_secs(10),
            "{}: {n} requests expected:\n{}",
            server.name,
            site.access_log()
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    assert_eq!(
        server.requests(site).len(),
        n,
        "{}: a request sent twice:\n{}",
        server.name,
        site.access_log()
    );
}

/// Upstream connections the gateway may hold to one server while requests come one at a time:
/// one per proxy thread (the testkit's gateway runs two; idle lists are per thread).
const THREADS: usize = 2;

const KEEPALIVE: &str = "keepalive_timeout 60s;";

#[tokio::test]
async fn answers_framed_by_length_by_chunks_and_by_the_close_are_relayed_whole_over_reused_connections(
) {
    let servers = [
        Server::new("length", Framing::Length, KEEPALIVE),
        Server::new("chunked", Framing::Chunked, KEEPALIVE),
        Server::new("close", Framing::Close, KEEPALIVE),
    ];
    let Some(site) = nginx(&servers.iter().collect::<Vec<_>>()).await else {
        return;
    };
    for s in &servers {
        frames_as_meant(s).await;
    }
    let cfg: String = servers.iter().map(Server::gateway_config).collect();
    let gw = Gateway::start(tollgate_bin!(), &format!("{FAST_TIMEOUTS}{cfg}")).await;
    let db = gw.config_db();
    let initial = books::read(&db, &gw.user_id).await.money;
    let n = 8;
    let mut ok = Vec::new();
    for s in &servers {
        ok.extend(serve(&gw, s, n).await);
    }
    for s in &servers {
        // The requests straight to nginx above are one per connection, logged before.
        let direct = 2;
        logged(&site, s, n + direct).await;
        let gateway: Vec<(u64, u64)> = s.requests(&site).split_off(direct);
        let connections: BTreeSet<u64> = gateway.iter().map(|(c, _)| *c).collect();
        let log = site.access_log();
        match s.framing {
            // Kept between requests: a new connection only for a thread that had none.
            Framing::Length | Framing::Chunked => assert!(
                connections.len() <= THREADS,
                "{}: {n} requests on {} connections:\n{log}",
                s.name,
                connections.len()
            ),
            // A body read to the close leaves nothing to reuse.
            Framing::Close => assert!(
                connections.len() == n && gateway.iter().all(|(_, r)| *r == 1),
                "{}: {gateway:?}\n{log}",
                s.name
            ),
        }
    }
    books::check(&db, &gw.user_id, initial, &ok).await;
}

#[tokio::test]
async fn a_connection_nginx_closes_is_never_used_again_and_no_request_fails_for_it() {
    let servers = [
        // nginx answers a connection's second request with `Connection: close` and closes it.
        Server::new("limit", Framing::Length, "keepalive_requests 2;"),
        Server::new("limit-chunked", Framing::Chunked, "keepalive_requests 2;"),
        // Every answer says `Connection: close`.
        Server::new("none", Framing::Length, "keepalive_timeout 0;"),
        // Idle connections closed after a second.
        Server::new("idle", Framing::Chunked, "keepalive_timeout 1s;"),
    ];
    let Some(site) = nginx(&servers.iter().collect::<Vec<_>>()).await else {
        return;
    };
    let cfg: String = servers.iter().map(Server::gateway_config).collect();
    let gw = Gateway::start(tollgate_bin!(), &format!("{FAST_TIMEOUTS}{cfg}")).await;
    let db = gw.config_db();
    let initial = books::read(&db, &gw.user_id).await.money;
    let n = 8;
    let mut ok = Vec::new();
    for s in &servers[..3] {
        ok.extend(serve(&gw, s, n).await);
        logged(&site, s, n).await;
    }
    let log = site.access_log();
    for s in &servers[..2] {
        let per = s.per_connection(&site);
        // Each connection used again once, then left when nginx said close: a third request
        // on one would be logged as its third, or fail and be missing.
        assert!(per.values().all(|&k| k <= 2), "{}: {per:?}\n{log}", s.name);
        assert!(per.values().any(|&k| k == 2), "{}: {per:?}\n{log}", s.name);
    }
    let none = servers[2].requests(&site);
    assert!(none.iter().all(|(_, r)| *r == 1), "{none:?}\n{log}");

    // Connections used again while nginx keeps them; after nginx closed them idle, new ones.
    let idle = &servers[3];
    ok.extend(serve(&gw, idle, n).await);
    logged(&site, idle, n).await;
    let first: BTreeSet<u64> = idle.per_connection(&site).into_keys().collect();
    assert!(first.len() <= THREADS, "{first:?}\n{}", site.access_log());
    tokio::time::sleep(Duration::from_millis(2000)).await;
    ok.extend(serve(&gw, idle, n).await);
    logged(&site, idle, 2 * n).await;
    let later: Vec<u64> = idle.requests(&site)[n..].iter().map(|(c, _)| *c).collect();
    assert!(
        later.iter().all(|c| !first.contains(c)),
        "a connection nginx closed was used again: {first:?} then {later:?}\n{}",
        site.access_log()
    );
    books::check(&db, &gw.user_id, initial, &ok).await;
}
