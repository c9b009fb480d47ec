//! Shared test support: fake upstreams, the real gateway binary started on a generated config,
//! and a small HTTP/1.1 client that shows exactly what went over the wire.
#![allow(dead_code)]

pub mod fake;

use std::net::{SocketAddr, TcpListener as StdListener};
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use serde_json::Value;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

#[allow(unused_imports)]
pub use fake::{FakeProvider, Mode};

pub fn free_port() -> u16 {
    StdListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

static SEQ: AtomicUsize = AtomicUsize::new(0);

pub fn temp_dir() -> PathBuf {
    let d = std::env::temp_dir().join(format!(
        "tollgate-test-{}-{}",
        std::process::id(),
        SEQ.fetch_add(1, Ordering::SeqCst)
    ));
    std::fs::create_dir_all(&d).unwrap();
    d
}

/// A running gateway process on its own ports and config file.
pub struct Gateway {
    pub child: Child,
    pub addr: SocketAddr,
    pub metrics_addr: SocketAddr,
    pub config_path: PathBuf,
    pub dir: PathBuf,
    server_section: String,
}

/// `[timeouts]` short enough for tests.
pub const FAST_TIMEOUTS: &str =
    "[timeouts]\nconnect = 1\nresponse = 3\nstream_chunk = 2\nclient_idle = 3\n";

impl Gateway {
    /// Starts the binary with `body` (providers, models, aliases, timeouts) under a generated
    /// `[server]` section, and waits until it answers.
    pub async fn start(body: &str) -> Gateway {
        let dir = temp_dir();
        let addr: SocketAddr = format!("127.0.0.1:{}", free_port()).parse().unwrap();
        let metrics_addr: SocketAddr = format!("127.0.0.1:{}", free_port()).parse().unwrap();
        let server_section = format!(
            "[server]\nlisten = \"{addr}\"\nmetrics_listen = \"{metrics_addr}\"\nthreads = 2\ngraceful_shutdown_secs = 1\nmax_body_bytes = 8388608\n\n[storage]\ndatabase_url = \"sqlite://{}/t.db\"\n\n",
            dir.display()
        );
        let config_path = dir.join("tollgate.toml");
        std::fs::write(&config_path, format!("{server_section}{body}")).unwrap();
        let log = std::fs::File::create(dir.join("gateway.log")).unwrap();
        let child = Command::new(env!("CARGO_BIN_EXE_tollgate"))
            .args(["serve", "--config"])
            .arg(&config_path)
            .env("TOLLGATE_LOG", "info")
            .stdout(Stdio::null())
            .stderr(Stdio::from(log))
            .spawn()
            .expect("start gateway");
        let mut gw = Gateway {
            child,
            addr,
            metrics_addr,
            config_path,
            dir,
            server_section,
        };
        let start = Instant::now();
        loop {
            if let Ok(Ok(mut s)) =
                tokio::time::timeout(Duration::from_secs(1), TcpStream::connect(gw.addr)).await
            {
                let _ = s
                    .write_all(b"GET /healthz HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
                    .await;
                let mut buf = Vec::new();
                let _ = s.read_to_end(&mut buf).await;
                if buf.starts_with(b"HTTP/1.1 200") {
                    break;
                }
            }
            if let Ok(Some(status)) = gw.child.try_wait() {
                panic!("gateway exited with {status}: {}", gw.log());
            }
            assert!(
                start.elapsed() < Duration::from_secs(15),
                "gateway did not start: {}",
                gw.log()
            );
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        gw
    }

    pub fn log(&self) -> String {
        std::fs::read_to_string(self.dir.join("gateway.log")).unwrap_or_default()
    }

    /// Rewrites the config body (keeping the server section) and sends SIGHUP.
    pub fn reload_with(&self, body: &str) {
        std::fs::write(&self.config_path, format!("{}{body}", self.server_section)).unwrap();
        self.signal("HUP");
    }

    pub fn signal(&self, sig: &str) {
        let ok = Command::new("kill")
            .args([format!("-{sig}"), self.child.id().to_string()])
            .status()
            .unwrap()
            .success();
        assert!(ok, "kill -{sig} failed");
    }

    pub async fn chat(&self, body: Value) -> Response {
        post_json(self.addr, "/v1/chat/completions", &body).await
    }

    pub async fn is_healthy(&self) -> bool {
        get(self.addr, "/healthz").await.status == 200
    }
}

impl Drop for Gateway {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

/// A provider block for a fake.
pub fn provider(name: &str, fakes: &[&FakeProvider], extra: &str) -> String {
    let eps: Vec<String> = fakes.iter().map(|f| format!("\"{}\"", f.url())).collect();
    format!(
        "[[providers]]\nname = \"{name}\"\nkind = \"openai\"\nendpoints = [{}]\n{extra}\n",
        eps.join(", ")
    )
}

pub fn model(id: &str, provider: &str, tier: &str, extra: &str) -> String {
    format!(
        "[[models]]\nid = \"{id}\"\nprovider = \"{provider}\"\nupstream_model = \"up-{id}\"\ntier = \"{tier}\"\ninput_credits_per_1k = 1\noutput_credits_per_1k = 2\nmax_output_tokens = 1000\n{extra}\n"
    )
}

#[derive(Debug)]
pub struct Response {
    pub status: u16,
    pub headers: Vec<(String, String)>,
    pub body: Vec<u8>,
}

impl Response {
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(k, _)| k.eq_ignore_ascii_case(name))
            .map(|(_, v)| v.as_str())
    }

    pub fn json(&self) -> Value {
        serde_json::from_slice(&self.body)
            .unwrap_or_else(|e| panic!("not JSON ({e}): {}", String::from_utf8_lossy(&self.body)))
    }

    pub fn text(&self) -> String {
        String::from_utf8_lossy(&self.body).into_owned()
    }

    /// The `data:` payloads of an SSE body, in order.
    pub fn sse_data(&self) -> Vec<String> {
        self.text()
            .split("\n\n")
            .filter_map(|ev| {
                let lines: Vec<&str> = ev
                    .lines()
                    .filter_map(|l| l.strip_prefix("data: "))
                    .collect();
                (!lines.is_empty()).then(|| lines.join("\n"))
            })
            .collect()
    }

    /// Asserts the SPEC.md error object and returns it.
    pub fn error(&self, status: u16, ty: &str) -> Value {
        assert_eq!(self.status, status, "body: {}", self.text());
        let v = self.json();
        assert_eq!(v["error"]["type"], ty, "{v}");
        assert_eq!(v["error"]["code"], status, "{v}");
        assert!(
            v["error"]["message"]
                .as_str()
                .is_some_and(|m| !m.is_empty()),
            "{v}"
        );
        assert!(self.header("x-request-id").is_some());
        v
    }
}

pub async fn raw_request(addr: SocketAddr, raw: &[u8]) -> Response {
    let mut s = TcpStream::connect(addr).await.expect("connect gateway");
    s.write_all(raw).await.unwrap();
    let mut buf = Vec::new();
    let _ = s.read_to_end(&mut buf).await;
    parse_response(&buf)
}

pub async fn request(
    addr: SocketAddr,
    method: &str,
    path: &str,
    headers: &[(&str, &str)],
    body: &[u8],
) -> Response {
    let mut raw = format!(
        "{method} {path} HTTP/1.1\r\nHost: {addr}\r\nConnection: close\r\nContent-Length: {}\r\n",
        body.len()
    );
    for (k, v) in headers {
        raw.push_str(&format!("{k}: {v}\r\n"));
    }
    raw.push_str("\r\n");
    let mut bytes = raw.into_bytes();
    bytes.extend_from_slice(body);
    raw_request(addr, &bytes).await
}

pub async fn get(addr: SocketAddr, path: &str) -> Response {
    request(addr, "GET", path, &[], b"").await
}

pub async fn post_json(addr: SocketAddr, path: &str, body: &Value) -> Response {
    let b = serde_json::to_vec(body).unwrap();
    request(
        addr,
        "POST",
        path,
        &[("Content-Type", "application/json")],
        &b,
    )
    .await
}

pub fn parse_response(buf: &[u8]) -> Response {
    let end = buf
        .windows(4)
        .position(|w| w == b"\r\n\r\n")
        .unwrap_or_else(|| panic!("no response head in {:?}", String::from_utf8_lossy(buf)));
    let head = String::from_utf8_lossy(&buf[..end]).to_string();
    let mut lines = head.split("\r\n");
    let status: u16 = lines
        .next()
        .unwrap()
        .split(' ')
        .nth(1)
        .unwrap()
        .parse()
        .unwrap();
    let headers: Vec<(String, String)> = lines
        .filter_map(|l| l.split_once(':'))
        .map(|(k, v)| (k.trim().to_string(), v.trim().to_string()))
        .collect();
    let mut body = buf[end + 4..].to_vec();
    let chunked = headers
        .iter()
        .any(|(k, v)| k.eq_ignore_ascii_case("transfer-encoding") && v.contains("chunked"));
    if chunked {
        body = dechunk(&body);
    }
    Response {
        status,
        headers,
        body,
    }
}

fn dechunk(mut b: &[u8]) -> Vec<u8> {
    let mut out = Vec::new();
    while let Some(eol) = b.windows(2).position(|w| w == b"\r\n") {
        let size_str = String::from_utf8_lossy(&b[..eol]);
        let Ok(size) = usize::from_str_radix(size_str.split(';').next().unwrap().trim(), 16) else {
            break;
        };
        if size == 0 || b.len() < eol + 2 + size {
            out.extend_from_slice(&b[(eol + 2).min(b.len())..(eol + 2 + size).min(b.len())]);
            break;
        }
        out.extend_from_slice(&b[eol + 2..eol + 2 + size]);
        b = &b[(eol + 4 + size).min(b.len())..];
    }
    out
}

pub fn user(content: &str) -> Value {
    serde_json::json!([{"role": "user", "content": content}])
}
