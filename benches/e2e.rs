//! End to end: one request straight to a fast local fake provider vs the same request through
//! the gateway on its embedded default (SQLite ledger, in-process counters) with a key, rate
//! limiting and credit metering on. JSON latency and streaming time to last byte (50 chunks),
//! over a keep-alive connection each, so `cargo bench --bench e2e` alone reports the overhead.

#[path = "tool/client.rs"]
mod client;
#[path = "../tests/support/fake.rs"]
#[allow(dead_code)]
mod fake;

use std::net::{SocketAddr, TcpListener};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use criterion::{criterion_group, criterion_main, Criterion};
use tokio::io::AsyncWriteExt;
use tokio::net::TcpStream;

struct Gateway(Child, std::path::PathBuf);

impl Drop for Gateway {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
        let _ = std::fs::remove_dir_all(&self.1);
    }
}

fn free_addr() -> SocketAddr {
    TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
}

async fn call(conn: &mut TcpStream, buf: &mut Vec<u8>, req: &[u8]) -> u16 {
    conn.write_all(req).await.unwrap();
    client::read_response(conn, buf).await.unwrap()
}

fn request(host: SocketAddr, stream: bool, key: Option<&str>) -> Vec<u8> {
    let body = format!("{{\"model\":\"bench\",\"messages\":[{{\"role\":\"user\",\"content\":\"Say something short.\"}}],\"stream\":{stream}}}");
    let auth = key
        .map(|k| format!("Authorization: Bearer {k}\r\n"))
        .unwrap_or_default();
    format!("POST /v1/chat/completions HTTP/1.1\r\nHost: {host}\r\nContent-Type: application/json\r\n{auth}Content-Length: {}\r\n\r\n{body}", body.len()).into_bytes()
}

async fn send(addr: SocketAddr, method: &str, path: &str, headers: &str, body: &str) -> String {
    let mut s = TcpStream::connect(addr).await.unwrap();
    let req = format!("{method} {path} HTTP/1.1\r\nHost: x\r\nConnection: close\r\n{headers}Content-Length: {}\r\n\r\n{body}", body.len());
    s.write_all(req.as_bytes()).await.unwrap();
    let mut out = Vec::new();
    tokio::io::AsyncReadExt::read_to_end(&mut s, &mut out)
        .await
        .unwrap();
    String::from_utf8_lossy(&out).into_owned()
}

fn bench_e2e(c: &mut Criterion) {
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .enable_all()
        .build()
        .unwrap();
    let fake = rt.block_on(fake::FakeProvider::start_on(
        "bench",
        "127.0.0.1:0",
        Some(50),
    ));
    fake.state
        .record
        .store(false, std::sync::atomic::Ordering::Relaxed);

    let dir = std::env::temp_dir().join(format!("tollgate-e2e-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let gw_addr = free_addr();
    let cfg = format!(
        "[server]\nlisten = \"{gw_addr}\"\nmetrics_listen = \"\"\nthreads = 2\n\n[storage]\ndatabase_url = \"sqlite://{}/ledger.db\"\n\n[[providers]]\nname = \"fake\"\nendpoints = [\"{}\"]\n\n[[models]]\nid = \"bench\"\nprovider = \"fake\"\ntier = \"economy\"\ninput_credits_per_1k = 0.15\noutput_credits_per_1k = 0.6\n",
        dir.display(),
        fake.url()
    );
    std::fs::write(dir.join("bench.toml"), cfg).unwrap();
    let child = Command::new(env!("CARGO_BIN_EXE_tollgate"))
        .args(["serve", "--config"])
        .arg(dir.join("bench.toml"))
        .env("TOLLGATE_ADMIN_TOKEN", "bench-admin")
        .env("TOLLGATE_LOG", "warn")
        .stdout(Stdio::null())
        .stderr(std::fs::File::create(dir.join("gateway.log")).unwrap())
        .spawn()
        .unwrap();
    let log = dir.join("gateway.log");
    let _gw = Gateway(child, dir);
    // Wait for the ledger, then make a funded account whose every request is rate limited
    // (a business limit too high to reach, still checked and counted) and metered.
    let key = rt.block_on(async {
        let t = Instant::now();
        loop {
            if let Ok(mut s) = TcpStream::connect(gw_addr).await {
                let _ = s
                    .write_all(b"GET /readyz HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
                    .await;
                let mut out = Vec::new();
                let _ = tokio::io::AsyncReadExt::read_to_end(&mut s, &mut out).await;
                if String::from_utf8_lossy(&out).contains("\"ledger\":true") {
                    break;
                }
            }
            assert!(
                t.elapsed() < Duration::from_secs(20),
                "gateway did not start"
            );
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        let email = format!("bench{}@example.com", std::process::id());
        let r = send(
            gw_addr,
            "POST",
            "/api/v1/auth/signup",
            "",
            &format!("{{\"email\":\"{email}\",\"password\":\"benchmark1\"}}"),
        )
        .await;
        let body = &r[r.find("\r\n\r\n").unwrap() + 4..];
        let v: serde_json::Value = serde_json::from_str(body).unwrap();
        let (uid, key) = (
            v["user_id"].as_str().unwrap().to_string(),
            v["api_key"].as_str().unwrap().to_string(),
        );
        let r = send(
            gw_addr,
            "PUT",
            &format!("/api/v1/admin/accounts/{uid}/plan"),
            "Authorization: Bearer bench-admin\r\n",
            "{\"plan\":\"business\",\"requests_per_hour\":100000000}",
        )
        .await;
        assert!(r.starts_with("HTTP/1.1 200"), "{r}");
        send(
            gw_addr,
            "POST",
            &format!("/api/v1/admin/accounts/{uid}/credits"),
            "Authorization: Bearer bench-admin\r\n",
            "{\"delta\":100000000,\"reason\":\"bench\"}",
        )
        .await;
        key
    });

    let mut g = c.benchmark_group("e2e");
    g.measurement_time(Duration::from_secs(8));
    for (name, addr, key, stream) in [
        ("json/direct", fake.addr, None, false),
        ("json/gateway", gw_addr, Some(key.as_str()), false),
        ("stream_50_chunks_ttlb/direct", fake.addr, None, true),
        (
            "stream_50_chunks_ttlb/gateway",
            gw_addr,
            Some(key.as_str()),
            true,
        ),
    ] {
        let req = request(addr, stream, key);
        let mut conn = rt.block_on(TcpStream::connect(addr)).unwrap();
        conn.set_nodelay(true).unwrap();
        let mut buf = Vec::with_capacity(64 * 1024);
        g.bench_function(name, |b| {
            b.iter(|| {
                let status = rt.block_on(call(&mut conn, &mut buf, &req));
                assert_eq!(
                    status,
                    200,
                    "{name}: {}",
                    std::fs::read_to_string(&log).unwrap_or_default()
                );
            })
        });
    }
    g.finish();
}

criterion_group!(benches, bench_e2e);
criterion_main!(benches);
