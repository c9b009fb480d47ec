//! Each timeout of SPEC.md's Limits, configured short: connect, the non-streaming response
//! deadline, upstream silence between chunks, and the SSE comment that keeps a client from
//! seeing `client_idle` of silence.

use std::time::{Duration, Instant};

use serde_json::{json, Value};
use tokio::net::{TcpSocket, TcpStream};
use tollgate_testkit::*;

#[tokio::test]
async fn connect_timeout_fails_over() {
    // A listener that never accepts, with its backlog filled: further SYNs are dropped, so a
    // connect hangs until the gateway's connect timeout.
    let sock = TcpSocket::new_v4().unwrap();
    sock.bind("127.0.0.1:0".parse().unwrap()).unwrap();
    let listener = sock.listen(0).unwrap();
    let addr = listener.local_addr().unwrap();
    let mut fillers = Vec::new();
    for _ in 0..4 {
        if let Ok(Ok(s)) =
            tokio::time::timeout(Duration::from_millis(200), TcpStream::connect(addr)).await
        {
            fillers.push(s);
        }
    }
    let good = FakeOpenAi::start("good").await;
    let cfg = format!(
        "[timeouts]\nconnect = 0.5\nresponse = 10\nstream_chunk = 5\nclient_idle = 5\n[[providers]]\nname = \"blackhole\"\nendpoints = [\"http://{addr}\"]\n\n{}{}{}",
        provider("pg", &[&good], ""),
        model("a", "blackhole", "economy", ""),
        model("b", "pg", "economy", ""),
    );
    let gw = Gateway::start(tollgate_bin!(), &cfg).await;
    let t = Instant::now();
    let r = gw.chat(json!({"model":"a","messages":user("hi")})).await;
    let took = t.elapsed();
    assert_eq!(r.status, 200, "{}", r.text());
    assert_eq!(r.json()["model"], "b");
    assert!(
        took >= Duration::from_millis(400),
        "waited for the connect timeout: {took:?}"
    );
    assert!(took < Duration::from_secs(5), "but no longer: {took:?}");
    drop(listener);
}

#[tokio::test]
async fn non_streaming_response_deadline_is_total() {
    let hang = FakeOpenAi::start("hang").await;
    let hang2 = FakeOpenAi::start("hang2").await;
    hang.set_mode(Mode::Hang);
    hang2.set_mode(Mode::Hang);
    let cfg = format!(
        "[timeouts]\nconnect = 1\nresponse = 1\nstream_chunk = 5\nclient_idle = 5\n{}{}{}{}",
        provider("p1", &[&hang], ""),
        provider("p2", &[&hang2], ""),
        model("a", "p1", "economy", ""),
        model("b", "p2", "economy", ""),
    );
    let gw = Gateway::start(tollgate_bin!(), &cfg).await;
    let t = Instant::now();
    let r = gw.chat(json!({"model":"a","messages":user("hi")})).await;
    let took = t.elapsed();
    r.error(502, "upstream_error");
    assert!(took >= Duration::from_millis(900), "{took:?}");
    assert!(
        took < Duration::from_millis(2500),
        "one deadline for the whole request, not per attempt: {took:?}"
    );
}

#[tokio::test]
async fn upstream_silence_between_chunks_ends_the_stream() {
    let f = FakeOpenAi::start("stall").await;
    f.set_mode(Mode::StallAfter(2));
    let cfg = format!(
        "[timeouts]\nconnect = 1\nresponse = 10\nstream_chunk = 0.7\nclient_idle = 10\n{}{}",
        provider("p", &[&f], ""),
        model("a", "p", "economy", ""),
    );
    let gw = Gateway::start(tollgate_bin!(), &cfg).await;
    let t = Instant::now();
    let r = gw
        .chat(json!({"model":"a","messages":user("hi"),"stream":true}))
        .await;
    let took = t.elapsed();
    assert_eq!(r.status, 200);
    let data = r.sse_data();
    let last: Value = serde_json::from_str(data.last().unwrap()).unwrap();
    assert_eq!(last["error"]["type"], "upstream_error");
    assert!(last["error"]["message"]
        .as_str()
        .unwrap()
        .contains("silent"));
    assert!(!data.iter().any(|d| d == "[DONE]"));
    assert!(
        took >= Duration::from_millis(650) && took < Duration::from_secs(4),
        "{took:?}"
    );
}

#[tokio::test]
async fn stream_that_never_starts_fails_over_after_stream_chunk() {
    let hang = FakeOpenAi::start("hang").await;
    let good = FakeOpenAi::start("good").await;
    hang.set_mode(Mode::SilentStream);
    let cfg = format!(
        "[timeouts]\nconnect = 1\nresponse = 10\nstream_chunk = 0.5\nclient_idle = 10\n{}{}{}{}",
        provider("p1", &[&hang], ""),
        provider("p2", &[&good], ""),
        model("a", "p1", "economy", ""),
        model("b", "p2", "economy", ""),
    );
    let gw = Gateway::start(tollgate_bin!(), &cfg).await;
    let t = Instant::now();
    let r = gw
        .chat(json!({"model":"a","messages":user("hi"),"stream":true}))
        .await;
    assert_eq!(r.status, 200);
    // Nothing had reached the client, so the silent upstream was abandoned for the next one.
    let first: Value = serde_json::from_str(&r.sse_data()[0]).unwrap();
    assert_eq!(first["model"], "b");
    assert_eq!(r.sse_data().last().unwrap(), "[DONE]");
    assert!(
        t.elapsed() >= Duration::from_millis(450),
        "{:?}",
        t.elapsed()
    );
}

#[tokio::test]
async fn sse_comment_keeps_a_slow_stream_alive() {
    let f = FakeOpenAi::start("slow").await;
    f.set_mode(Mode::Slow(Duration::from_millis(700)));
    let cfg = format!(
        "[timeouts]\nconnect = 1\nresponse = 10\nstream_chunk = 5\nclient_idle = 0.6\n{}{}",
        provider("p", &[&f], ""),
        model("a", "p", "economy", ""),
    );
    let gw = Gateway::start(tollgate_bin!(), &cfg).await;
    let r = gw
        .chat(json!({"model":"a","messages":user("hi"),"stream":true}))
        .await;
    assert_eq!(r.status, 200);
    let text = r.text();
    assert!(text.contains(": keep-alive\n\n"), "{text}");
    assert_eq!(r.sse_data().last().unwrap(), "[DONE]");
    // The comment never splits an event: every data line still parses.
    for d in r.sse_data().iter().filter(|d| d.as_str() != "[DONE]") {
        serde_json::from_str::<Value>(d).unwrap();
    }
}
