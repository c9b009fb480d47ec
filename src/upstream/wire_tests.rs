//! The exchange against a real loopback peer that answers with scripted bytes, written in
//! small pieces so that every parser state meets a response cut at its boundary.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use super::head::Request;
use super::idle::Connections;
use pingora::upstreams::peer::HttpPeer;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpListener;

use super::wire::{exchange, Response};

/// A peer that answers the n-th request it reads (over all connections) with `replies[n]`,
/// written `piece` bytes at a time; `close_after` closes each connection after one reply. An
/// empty reply closes the connection without answering.
struct Peer {
    addr: std::net::SocketAddr,
    accepted: Arc<AtomicUsize>,
}

async fn peer(replies: Vec<&'static [u8]>, piece: usize, close_after: bool) -> Peer {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let accepted = Arc::new(AtomicUsize::new(0));
    let served = Arc::new(AtomicUsize::new(0));
    let replies = Arc::new(replies);
    let count = accepted.clone();
    tokio::spawn(async move {
        while let Ok((mut s, _)) = listener.accept().await {
            count.fetch_add(1, Ordering::SeqCst);
            s.set_nodelay(true).unwrap();
            let (replies, served) = (replies.clone(), served.clone());
            tokio::spawn(async move {
                loop {
                    let mut req = Vec::new();
                    let mut b = [0u8; 1024];
                    // Requests in these tests carry a 2-byte body after the head.
                    while !req.windows(4).any(|w| w == b"\r\n\r\n") || !req.ends_with(b"hi") {
                        match s.read(&mut b).await {
                            Ok(0) | Err(_) => return,
                            Ok(n) => req.extend_from_slice(&b[..n]),
                        }
                    }
                    let n = served.fetch_add(1, Ordering::SeqCst);
                    let reply = replies[n.min(replies.len() - 1)];
                    if reply.is_empty() {
                        return;
                    }
                    for part in reply.chunks(piece) {
                        if s.write_all(part).await.is_err() {
                            return;
                        }
                        tokio::time::sleep(Duration::from_millis(1)).await;
                    }
                    if close_after {
                        return;
                    }
                }
            });
        }
    });
    Peer { addr, accepted }
}

fn peer_of(p: &Peer) -> HttpPeer {
    let mut peer = HttpPeer::new(p.addr, false, String::new());
    peer.options.read_timeout = Some(Duration::from_secs(5));
    peer
}

async fn call(c: &Connections, p: &HttpPeer) -> Result<Response, super::wire::Failure> {
    let request = Request::new("POST", "/x")
        .and_then(|r| r.header("Host", "test"))
        .unwrap()
        .body(b"hi");
    exchange(c, p, &request).await
}

/// One exchange read to its end, its connection then released for `idle`.
async fn served(c: &Connections, p: &HttpPeer, idle: Option<Duration>) {
    let mut r = call(c, p).await.unwrap();
    body(&mut r).await.unwrap();
    r.release(c, p, idle);
}

async fn body(r: &mut Response) -> pingora::Result<Vec<u8>> {
    let mut out = Vec::new();
    while let Some(b) = r.read_body().await? {
        out.extend_from_slice(&b);
    }
    Ok(out)
}

const CHUNKED: &[u8] = b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\nContent-Type: text/event-stream\r\n\r\n5;ext=1\r\nhello\r\n7\r\n, world\r\n0\r\nX-Trailer: 1\r\n\r\n";
const LENGTH: &[u8] =
    b"HTTP/1.1 200 OK\r\ncontent-length: 11\r\nMcp-Session-Id: abc\r\n\r\nhello world";

#[tokio::test]
async fn bodies_cut_anywhere_are_read_whole_and_the_connection_is_reused() {
    for piece in [1, 3, 7, 1000] {
        let p = peer(vec![CHUNKED, LENGTH, CHUNKED], piece, false).await;
        let (c, hp) = (Connections::default(), peer_of(&p));
        let mut r = call(&c, &hp).await.unwrap();
        assert_eq!(r.status(), 200);
        assert_eq!(r.header("content-type"), Some("text/event-stream"));
        assert_eq!(body(&mut r).await.unwrap(), b"hello, world");
        r.release(&c, &hp, Some(Duration::from_secs(30)));
        let mut r = call(&c, &hp).await.unwrap();
        assert_eq!(r.header("MCP-SESSION-ID"), Some("abc"));
        assert_eq!(body(&mut r).await.unwrap(), b"hello world");
        r.release(&c, &hp, Some(Duration::from_secs(30)));
        let mut r = call(&c, &hp).await.unwrap();
        assert_eq!(body(&mut r).await.unwrap(), b"hello, world");
        assert_eq!(p.accepted.load(Ordering::SeqCst), 1, "piece {piece}");
    }
}

#[tokio::test]
async fn interim_heads_are_skipped_and_a_body_to_the_close_is_not_reused() {
    let reply: &[u8] = b"HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 200 OK\r\nX: y\r\n\r\nuntil the end";
    let p = peer(vec![reply], 4, true).await;
    let (c, hp) = (Connections::default(), peer_of(&p));
    let mut r = call(&c, &hp).await.unwrap();
    assert_eq!((r.status(), r.header("x")), (200, Some("y")));
    assert_eq!(body(&mut r).await.unwrap(), b"until the end");
    r.release(&c, &hp, Some(Duration::from_secs(30)));
    let mut r = call(&c, &hp).await.unwrap();
    assert_eq!(body(&mut r).await.unwrap(), b"until the end");
    assert_eq!(p.accepted.load(Ordering::SeqCst), 2);
}

#[tokio::test]
async fn an_idle_connection_the_peer_closed_is_replaced_by_a_new_one() {
    let cases: [(Vec<&'static [u8]>, bool); 2] = [
        // Content-Length framing says "reusable", but the peer closes after each reply: the
        // close is seen when the connection is taken, and a new one is made.
        (vec![LENGTH], true),
        // Open when taken, then closed by the peer on reading the request, before any response
        // byte (a server's idle timeout racing the request): retried once, on a new connection.
        (vec![LENGTH, b"", LENGTH], false),
    ];
    for (replies, close_after) in cases {
        let p = peer(replies, 1000, close_after).await;
        let (c, hp) = (Connections::default(), peer_of(&p));
        served(&c, &hp, Some(Duration::from_secs(30))).await;
        tokio::time::sleep(Duration::from_millis(50)).await;
        let mut r = call(&c, &hp).await.unwrap();
        assert_eq!(body(&mut r).await.unwrap(), b"hello world");
        assert_eq!(
            p.accepted.load(Ordering::SeqCst),
            2,
            "close_after {close_after}"
        );
    }
}

#[tokio::test]
async fn idle_connections_expire_and_the_sweep_closes_what_the_peer_closed() {
    // Expired: not used again (a new connection), though the peer kept it open.
    let p = peer(vec![LENGTH], 1000, false).await;
    let (c, hp) = (Connections::default(), peer_of(&p));
    served(&c, &hp, Some(Duration::from_millis(1))).await;
    tokio::time::sleep(Duration::from_millis(20)).await;
    let mut r = call(&c, &hp).await.unwrap();
    body(&mut r).await.unwrap();
    assert_eq!(p.accepted.load(Ordering::SeqCst), 2);
    // Kept: an open connection within its idle time survives the sweep.
    r.release(&c, &hp, Some(Duration::from_secs(30)));
    c.sweep();
    assert_eq!(c.idle_count(), 1);
    // The peer closes its idle connections: the sweep lets them go without a request.
    let closing = peer(vec![LENGTH], 1000, true).await;
    let hc = peer_of(&closing);
    served(&c, &hc, None).await;
    assert_eq!(c.idle_count(), 2);
    tokio::time::sleep(Duration::from_millis(50)).await;
    // Swept from another thread, outside this runtime, as the health loop's own runtime does.
    std::thread::scope(|s| s.spawn(|| c.sweep()).join().unwrap());
    assert_eq!(c.idle_count(), 1);
}

#[tokio::test]
async fn broken_replies_are_errors_never_a_short_body() {
    let cases: [(&[u8], bool); 6] = [
        (
            b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\nhello\r\n0\r\n\r\n",
            false,
        ),
        (
            b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nhelloXX0\r\n\r\n",
            false,
        ),
        (
            b"HTTP/1.1 200 OK\r\nContent-Length: 3\r\nContent-Length: 4\r\n\r\nabcd",
            true,
        ),
        (b"HTTP/1.1 200 OK\r\nContent-Length: x\r\n\r\nabcd", true),
        (b"NOT HTTP AT ALL\r\n\r\n", true),
        // Closed mid-body: 5 of 11 bytes.
        (b"HTTP/1.1 200 OK\r\nContent-Length: 11\r\n\r\nhello", false),
    ];
    for (reply, head_fails) in cases {
        let p = peer(vec![reply], 3, true).await;
        let (c, hp) = (Connections::default(), peer_of(&p));
        match call(&c, &hp).await {
            Err(_) => assert!(head_fails, "{}", String::from_utf8_lossy(reply)),
            Ok(mut r) => {
                assert!(!head_fails, "{}", String::from_utf8_lossy(reply));
                assert!(
                    body(&mut r).await.is_err(),
                    "{}",
                    String::from_utf8_lossy(reply)
                );
            }
        }
    }
}

#[tokio::test]
async fn a_head_without_end_is_refused_at_its_limit() {
    static HUGE: std::sync::OnceLock<Vec<u8>> = std::sync::OnceLock::new();
    let huge = HUGE.get_or_init(|| {
        let mut v = b"HTTP/1.1 200 OK\r\n".to_vec();
        while v.len() < 80 * 1024 {
            // Few, long headers: the size limit, not the count of headers, is what refuses it.
            v.extend_from_slice(b"X-Filler: ");
            v.extend_from_slice(&[b'a'; 2000]);
            v.extend_from_slice(b"\r\n");
        }
        v
    });
    let p = peer(vec![huge.as_slice()], 4096, false).await;
    let (c, hp) = (Connections::default(), peer_of(&p));
    assert!(call(&c, &hp).await.is_err());
}

#[tokio::test]
async fn a_body_read_to_its_end_is_refused_past_the_limit_and_a_cut_one_is_an_error() {
    use super::wire::BodyError;
    let replies: Vec<&'static [u8]> = vec![
        b"HTTP/1.1 200 OK\r\nContent-Length: 10\r\n\r\n0123456789",
        b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n5\r\n01234\r\n5\r\n56789\r\n0\r\n\r\n",
        b"HTTP/1.1 200 OK\r\nContent-Length: 10\r\n\r\n0123456789",
        b"HTTP/1.1 200 OK\r\nContent-Length: 10\r\n\r\n01234",
    ];
    let p = peer(replies, 3, true).await;
    let (c, hp) = (Connections::default(), peer_of(&p));
    let mut r = call(&c, &hp).await.unwrap();
    assert_eq!(&r.read_to_end(10).await.unwrap()[..], b"0123456789");
    let mut r = call(&c, &hp).await.unwrap();
    assert_eq!(&r.read_to_end(10).await.unwrap()[..], b"0123456789");
    let mut r = call(&c, &hp).await.unwrap();
    assert!(matches!(r.read_to_end(9).await, Err(BodyError::TooLarge)));
    let mut r = call(&c, &hp).await.unwrap();
    assert!(matches!(r.read_to_end(100).await, Err(BodyError::Read(_))));
}
