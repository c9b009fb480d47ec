//! The proxy's client connections (src/proxy/listen.rs): a keep-alive connection carries request
//! after request, connections that send nothing (or close at once) cost the service nothing,
//! one that speaks late is served, and every one is closed as soon as the gateway stops, long
//! before its grace period ends.

use std::net::SocketAddr;
use std::time::Duration;

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;
use tollgate_testkit::*;

/// Reads one response (head, then a Content-Length body) off a keep-alive connection: its
/// status and body.
async fn read_response(s: &mut TcpStream) -> (u16, Vec<u8>) {
    let mut buf = Vec::new();
    let mut chunk = [0u8; 4096];
    let head_end = loop {
        if let Some(i) = buf.windows(4).position(|w| w == b"\r\n\r\n") {
            break i + 4;
        }
        let n = s.read(&mut chunk).await.expect("read a response");
        assert!(
            n > 0,
            "closed before a whole head: {:?}",
            String::from_utf8_lossy(&buf)
        );
        buf.extend_from_slice(&chunk[..n]);
    };
    let head = String::from_utf8_lossy(&buf[..head_end]).to_ascii_lowercase();
    let status: u16 = head[9..12].parse().expect("a status");
    let len: usize = head
        .lines()
        .find_map(|l| l.strip_prefix("content-length:"))
        .and_then(|v| v.trim().parse().ok())
        .expect("a Content-Length");
    while buf.len() < head_end + len {
        let n = s.read(&mut chunk).await.expect("read a body");
        assert!(n > 0, "closed inside a body");
        buf.extend_from_slice(&chunk[..n]);
    }
    (status, buf[head_end..head_end + len].to_vec())
}

async fn ask_models(s: &mut TcpStream, addr: SocketAddr) -> u16 {
    let req = format!("GET /v1/models HTTP/1.1\r\nHost: {addr}\r\n\r\n");
    s.write_all(req.as_bytes()).await.expect("write a request");
    let (status, body) = read_response(s).await;
    let v: serde_json::Value = serde_json::from_slice(&body).expect("a JSON body");
    assert_eq!(v["object"], "list", "{v}");
    status
}

/// True when the peer closed the connection (end of stream or reset) within `within`.
async fn closed_within(s: &mut TcpStream, within: Duration) -> bool {
    let mut b = [0u8; 64];
    matches!(
        tokio::time::timeout(within, s.read(&mut b)).await,
        Ok(Ok(0)) | Ok(Err(_))
    )
}

#[tokio::test]
async fn keep_alive_and_idle_connections_are_served_and_closed_when_the_gateway_stops() {
    let fake = FakeOpenAi::start("p").await;
    // A long grace period: the connections must close when the stop begins, not at the exit.
    let mut gw = Gateway::start_opts(
        tollgate_bin!(),
        &one_model_config(&fake, "m-2024-01-01"),
        Opts {
            grace_secs: Some(30),
            ..Opts::default()
        },
    )
    .await;
    let addr = gw.addr;
    let mut kept = TcpStream::connect(addr).await.expect("connect");
    for _ in 0..5 {
        assert_eq!(ask_models(&mut kept, addr).await, 200);
    }
    // Connections that never send anything, and some that close at once.
    let mut idle = Vec::new();
    for _ in 0..200 {
        idle.push(TcpStream::connect(addr).await.expect("connect an idle one"));
    }
    for _ in 0..50 {
        drop(TcpStream::connect(addr).await.expect("connect and leave"));
    }
    // Bytes that are not HTTP on one of them: a bare 400 and that one closed; the rest wait.
    let mut garbage = idle.pop().expect("an idle connection");
    garbage.write_all(b"GARBAGE\r\n\r\n").await.unwrap();
    let mut raw = Vec::new();
    let _ = garbage.read_to_end(&mut raw).await;
    assert!(
        raw.starts_with(b"HTTP/1.1 400"),
        "{}",
        String::from_utf8_lossy(&raw)
    );
    // The service still answers, on a new connection and on one that waited to speak.
    assert_eq!(get(addr, "/v1/models").await.status, 200);
    tokio::time::sleep(Duration::from_millis(300)).await;
    let mut late = idle.pop().expect("an idle connection");
    assert_eq!(ask_models(&mut late, addr).await, 200);
    assert_eq!(ask_models(&mut kept, addr).await, 200, "still kept alive");

    gw.signal("TERM");
    for (i, s) in idle.iter_mut().chain([&mut kept, &mut late]).enumerate() {
        assert!(
            closed_within(s, Duration::from_secs(5)).await,
            "connection {i} still open after the stop began"
        );
    }
    assert!(
        gw.child.try_wait().expect("the gateway's status").is_none(),
        "closed by the stop itself, not by the process exiting"
    );
    // No new connection is served once stopping.
    if let Ok(mut s) = TcpStream::connect(addr).await {
        let req = format!("GET /v1/models HTTP/1.1\r\nHost: {addr}\r\n\r\n");
        let _ = s.write_all(req.as_bytes()).await;
        assert!(closed_within(&mut s, Duration::from_secs(5)).await);
    }
    let _ = gw.child.kill();
    let _ = gw.child.wait();
}

#[tokio::test]
async fn an_address_taken_by_another_process_stops_the_gateway_with_an_error() {
    let fake = FakeOpenAi::start("p").await;
    // Held without SO_REUSEPORT: the gateway's sockets cannot join it.
    let taken = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
    let addr = taken.local_addr().unwrap();
    let dir = temp_dir();
    let config = dir.join("tollgate.toml");
    std::fs::write(
        &config,
        format!(
            "[server]\nlisten = \"{addr}\"\nmetrics_listen = \"\"\nthreads = 2\n\n[storage]\ndatabase_url = \"sqlite://{}/ledger.db\"\n\n{}",
            dir.display(),
            one_model_config(&fake, "m-2024-01-01")
        ),
    )
    .unwrap();
    let mut child = std::process::Command::new(tollgate_bin!())
        .args(["serve", "--config"])
        .arg(&config)
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("start the gateway");
    let mut status = None;
    for _ in 0..300 {
        if let Some(s) = child.try_wait().unwrap() {
            status = Some(s);
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let Some(status) = status else {
        let _ = child.kill();
        panic!("the gateway kept running without its listening socket");
    };
    let mut err = String::new();
    std::io::Read::read_to_string(&mut child.stderr.take().unwrap(), &mut err).unwrap();
    assert!(!status.success());
    assert!(err.contains("cannot listen"), "{err}");
    drop(taken);
    let _ = std::fs::remove_dir_all(dir);
}

/// This test process's own soft open-file limit raised to its hard one (it opens thousands of
/// client connections); the hard limit.
fn raise_own_fd_limit() -> u64 {
    use nix::sys::resource::{getrlimit, setrlimit, Resource};
    let (_, hard) = getrlimit(Resource::RLIMIT_NOFILE).unwrap();
    setrlimit(Resource::RLIMIT_NOFILE, hard, hard).unwrap();
    hard
}

/// CPU seconds the process has used (user and system), from `/proc/PID/stat`.
fn cpu_secs(pid: u32) -> f64 {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap();
    // Fields after the command's closing parenthesis; utime and stime are the 12th and 13th.
    let rest = &stat[stat.rfind(')').unwrap() + 2..];
    let f: Vec<u64> = rest
        .split(' ')
        .skip(11)
        .take(2)
        .map(|v| v.parse().unwrap())
        .collect();
    (f[0] + f[1]) as f64 / 100.0
}

#[tokio::test]
async fn started_with_a_soft_limit_of_1024_it_holds_5000_idle_connections_and_still_answers() {
    if raise_own_fd_limit() < 12_000 {
        return skip("this host's hard open-file limit is below 12,000");
    }
    let fake = FakeOpenAi::start("p").await;
    let opts = Opts {
        nofile: Some((1024, 20_000)),
        ..Opts::default()
    };
    let gw = Gateway::start_opts(tollgate_bin!(), &one_model_config(&fake, "m"), opts).await;
    assert!(
        gw.log()
            .contains("raised the open-file limit to its hard limit"),
        "{}",
        gw.log()
    );
    let mut idle = Vec::new();
    for _ in 0..5_000 {
        idle.push(TcpStream::connect(gw.addr).await.expect("connect"));
    }
    tokio::time::sleep(Duration::from_millis(300)).await;
    let t = std::time::Instant::now();
    assert!(gw.is_healthy().await);
    let r = gw.chat(json_hi()).await;
    assert_eq!(r.status, 200, "{}", r.text());
    assert!(t.elapsed() < Duration::from_secs(1), "{:?}", t.elapsed());
    // The idle ones are still open and served.
    for s in idle.iter_mut().step_by(1_000) {
        assert_eq!(ask_models(s, gw.addr).await, 200);
    }
    assert!(
        !gw.log().contains("out of file descriptors"),
        "{}",
        gw.log()
    );
}

fn json_hi() -> serde_json::Value {
    serde_json::json!({"model": "m", "messages": [{"role": "user", "content": "hi"}]})
}

#[tokio::test]
async fn at_max_connections_new_ones_wait_without_spinning_and_are_served_as_others_close() {
    let fake = FakeOpenAi::start("p").await;
    let opts = Opts {
        server_extra: "max_connections = 40".into(),
        ..Opts::default()
    };
    let gw = Gateway::start_opts(tollgate_bin!(), &one_model_config(&fake, "m"), opts).await;
    // The start-up's own readiness probe has closed; 40 idle clients take every place.
    tokio::time::sleep(Duration::from_millis(200)).await;
    let mut idle = Vec::new();
    for _ in 0..40 {
        idle.push(TcpStream::connect(gw.addr).await.expect("connect"));
    }
    // Each served once, so each is accepted (each proxy thread's socket has its own queue, and
    // a thread could otherwise accept a later connection before an earlier one on the other).
    for s in idle.iter_mut() {
        assert_eq!(ask_models(s, gw.addr).await, 200);
    }
    // What the gateway spends at the bound with nobody waiting: its background tasks (health
    // checks, lease rounds, timers), a few percent of a core in a debug build.
    let pid = gw.child.id();
    let window = Duration::from_secs(4);
    let before = cpu_secs(pid);
    tokio::time::sleep(window).await;
    let baseline = cpu_secs(pid) - before;
    // 20 more connect (the kernel's backlog takes them) and ask, but are not accepted.
    let mut waiting = Vec::new();
    for _ in 0..20 {
        let mut s = TcpStream::connect(gw.addr).await.expect("connect");
        let req = format!("GET /v1/models HTTP/1.1\r\nHost: {}\r\n\r\n", gw.addr);
        s.write_all(req.as_bytes()).await.unwrap();
        waiting.push(s);
    }
    let cpu = cpu_secs(pid);
    let mut b = [0u8; 16];
    let answered = tokio::time::timeout(window, waiting[0].read(&mut b)).await;
    assert!(
        answered.is_err(),
        "served past the bound: {answered:?} {:?}",
        String::from_utf8_lossy(&b)
    );
    let used = cpu_secs(pid) - cpu;
    // The waiting flood adds under 5 % of a core to that: a spinning accept loop burns all of
    // one. (Measured against the baseline, not alone: CI once measured the background alone
    // at the whole 5 % of a 2 s window.)
    eprintln!(
        "CPU in {window:?}: {baseline:.3} s at the bound, {used:.3} s with the flood waiting"
    );
    assert!(
        used - baseline < 0.05 * window.as_secs_f64(),
        "{used} s of CPU in {window:?} while the flood waits, {baseline} s before it (a spin)"
    );
    // Connections already open keep being served at the bound.
    assert_eq!(ask_models(&mut idle[0], gw.addr).await, 200);
    // As 25 close, the 20 waiting are accepted and answered.
    idle.truncate(15);
    for s in waiting.iter_mut() {
        let (status, _) = tokio::time::timeout(Duration::from_secs(3), read_response(s))
            .await
            .expect("a waiting connection was served once others closed");
        assert_eq!(status, 200);
    }
    assert!(gw.log().contains("at the connection bound"), "{}", gw.log());
}
