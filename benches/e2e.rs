//! End to end: one request straight to a fast local fake provider vs the same request through
//! the gateway on its embedded default (SQLite ledger, in-process counters) with a key, rate
//! limiting and credit metering on. JSON latency and streaming time to last byte (50 chunks),
//! over a keep-alive connection each, so `cargo bench --bench e2e` alone reports the overhead.

use std::net::SocketAddr;
use std::time::Duration;

use criterion::{criterion_group, criterion_main, Criterion};
use tokio::io::AsyncWriteExt;
use tokio::net::TcpStream;
use tollgate_testkit::load::read_response;
use tollgate_testkit::{provider, tollgate_bin, FakeOpenAi, Gateway, Opts};

async fn call(conn: &mut TcpStream, buf: &mut Vec<u8>, req: &[u8]) -> u16 {
    conn.write_all(req).await.unwrap();
    read_response(conn, buf).await.unwrap()
}

fn request(host: SocketAddr, stream: bool, key: Option<&str>) -> Vec<u8> {
    let body = format!("{{\"model\":\"bench\",\"messages\":[{{\"role\":\"user\",\"content\":\"Say something short.\"}}],\"stream\":{stream}}}");
    let auth = key
        .map(|k| format!("Authorization: Bearer {k}\r\n"))
        .unwrap_or_default();
    format!("POST /v1/chat/completions HTTP/1.1\r\nHost: {host}\r\nContent-Type: application/json\r\n{auth}Content-Length: {}\r\n\r\n{body}", body.len()).into_bytes()
}

fn bench_e2e(c: &mut Criterion) {
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .enable_all()
        .build()
        .unwrap();
    let fake = rt.block_on(FakeOpenAi::builder("bench").words(50).quiet().start());
    let cfg = format!(
        "{}[[models]]\nid = \"bench\"\nprovider = \"fake\"\ntier = \"economy\"\ninput_credits_per_1k = 0.15\noutput_credits_per_1k = 0.6\n",
        provider("fake", &[&fake], "")
    );
    // A funded account whose every request is rate limited (a business limit too high to
    // reach, still checked and counted) and metered.
    let gw = rt.block_on(async {
        let gw = Gateway::start_opts(
            tollgate_bin!(),
            &cfg,
            Opts {
                embedded: true,
                credits: Some(100_000_100.0),
                log: Some("warn".into()),
                ..Opts::default()
            },
        )
        .await;
        gw.admin_plan(&gw.user_id, "business", Some(100_000_000), None)
            .await;
        gw
    });

    let mut g = c.benchmark_group("e2e");
    g.measurement_time(Duration::from_secs(8));
    for (name, addr, key, stream) in [
        ("json/direct", fake.addr, None, false),
        ("json/gateway", gw.addr, Some(gw.key.as_str()), false),
        ("stream_50_chunks_ttlb/direct", fake.addr, None, true),
        (
            "stream_50_chunks_ttlb/gateway",
            gw.addr,
            Some(gw.key.as_str()),
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
                assert_eq!(status, 200, "{name}: {}", gw.log());
            })
        });
    }
    g.finish();
}

criterion_group!(benches, bench_e2e);
criterion_main!(benches);
