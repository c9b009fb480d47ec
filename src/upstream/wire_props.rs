//! Property tests of the response framing (`wire`, `chunked`, `idle`): responses written from
//! RFC 9112's grammar, some broken on purpose, are read by `wire::exchange` from a connection
//! that hands them over cut at chosen places, and what it makes of them is compared with what
//! a reader of the whole bytes says: httparse for the heads (the parser the exchange uses, here
//! on bytes no network cut) and the RFC's framing rules, written out plainly, for the bodies.
//! How the network cuts a response must never change the answer: every byte boundary of fixed
//! responses, every truncation of them, and random cuts of random ones. The random cases are
//! seeded; a failing case prints its seed, and `TOLLGATE_PROP_SEED` (with
//! `TOLLGATE_PROP_CASES=1`) replays it.

use std::collections::VecDeque;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Duration;

use async_trait::async_trait;
use pingora::protocols::raw_connect::ProxyDigest;
use pingora::protocols::{
    GetProxyDigest, GetSocketDigest, GetTimingDigest, Peek, Shutdown, SocketDigest, Ssl,
    TimingDigest, UniqueID, UniqueIDType,
};
use pingora::upstreams::peer::HttpPeer;
use rand::rngs::StdRng;
use rand::seq::SliceRandom;
use rand::{Rng, SeedableRng};
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};

use super::chunked::{MAX_CHUNK_LINE, MAX_HEAD, MAX_TRAILERS};
use super::idle::Connections;
use super::wire::{exchange, Failure, MAX_HEADERS};

/// How the connection ends once its scripted bytes are read.
#[derive(Clone, Copy, Debug, PartialEq)]
enum End {
    /// The peer closes it (a read of 0 bytes).
    Close,
    /// The peer resets it (a read error).
    Reset,
    /// The peer keeps it open and sends nothing more.
    Hang,
}

/// An upstream connection that answers a request with scripted bytes, one piece per read
/// (a piece longer than the reader's room is cut again there). Until a request is written it
/// has nothing to read, as an idle keep-alive connection, so it can be parked and taken.
#[derive(Debug)]
struct Scripted {
    reads: VecDeque<Vec<u8>>,
    end: End,
    asked: bool,
}

impl AsyncRead for Scripted {
    fn poll_read(
        mut self: Pin<&mut Self>,
        _cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<std::io::Result<()>> {
        // No waker is kept: nothing here becomes ready later, and the peer's read timeout ends
        // a read that would wait on it.
        if !self.asked {
            return Poll::Pending;
        }
        let Some(front) = self.reads.front_mut() else {
            return match self.end {
                End::Close => Poll::Ready(Ok(())),
                End::Reset => Poll::Ready(Err(std::io::ErrorKind::ConnectionReset.into())),
                End::Hang => Poll::Pending,
            };
        };
        let n = front.len().min(buf.remaining());
        buf.put_slice(&front[..n]);
        front.drain(..n);
        if front.is_empty() {
            self.reads.pop_front();
        }
        Poll::Ready(Ok(()))
    }
}

impl AsyncWrite for Scripted {
    fn poll_write(
        mut self: Pin<&mut Self>,
        _cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<std::io::Result<usize>> {
        self.asked = true;
        Poll::Ready(Ok(buf.len()))
    }

    fn poll_flush(self: Pin<&mut Self>, _cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        Poll::Ready(Ok(()))
    }

    fn poll_shutdown(self: Pin<&mut Self>, _cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        Poll::Ready(Ok(()))
    }
}

#[async_trait]
impl Shutdown for Scripted {
    async fn shutdown(&mut self) {}
}

impl UniqueID for Scripted {
    fn id(&self) -> UniqueIDType {
        0
    }
}

impl Ssl for Scripted {}

impl GetTimingDigest for Scripted {
    fn get_timing_digest(&self) -> Vec<Option<TimingDigest>> {
        Vec::new()
    }
}

impl GetProxyDigest for Scripted {
    fn get_proxy_digest(&self) -> Option<Arc<ProxyDigest>> {
        None
    }
}

impl GetSocketDigest for Scripted {
    fn get_socket_digest(&self) -> Option<Arc<SocketDigest>> {
        None
    }
}

#[async_trait]
impl Peek for Scripted {}

/// What came of one exchange.
#[derive(Debug, PartialEq)]
enum Seen {
    /// No response. `retried`: the exchange tried again on a new connection, which is right
    /// only when not one byte came back (the request may never have been read).
    Failed { retried: bool },
    Answer {
        status: u16,
        /// The first value of each field name of the final head, as text.
        headers: Vec<(String, Option<String>)>,
        /// `None`: reading the body failed.
        body: Option<Vec<u8>>,
        /// The connection was kept for the next exchange.
        reused: bool,
    },
}

/// Where the exchanges run: a peer whose address refuses connections, so that a retry on a
/// new connection shows as a connect failure.
struct Bench {
    connections: Connections,
    peer: HttpPeer,
    // Bound and not listening: connections to it are refused while it is held.
    _port: tokio::net::TcpSocket,
}

impl Bench {
    fn new() -> Bench {
        let port = tokio::net::TcpSocket::new_v4().unwrap();
        port.bind("127.0.0.1:0".parse().unwrap()).unwrap();
        let mut peer = HttpPeer::new(port.local_addr().unwrap(), false, String::new());
        // A reader that waits where it should not fails the case instead of hanging it.
        peer.options.read_timeout = Some(Duration::from_secs(2));
        Bench {
            connections: Connections::default(),
            peer,
            _port: port,
        }
    }

    /// `bytes` answered on an idle connection, cut after each of `cuts`, then `end`.
    async fn run(&self, bytes: &[u8], cuts: &[usize], end: End, names: &[String]) -> Seen {
        let (c, peer) = (&self.connections, &self.peer);
        let stream = Scripted {
            reads: pieces(bytes, cuts).into(),
            end,
            asked: false,
        };
        c.park(Box::new(stream), peer, None);
        assert_eq!(c.idle_count(), 1, "the scripted connection was not parked");
        let request = b"POST /v1/x HTTP/1.1\r\nHost: p\r\nContent-Length: 2\r\n\r\nhi";
        let mut r = match exchange(c, peer, request).await {
            Ok(r) => r,
            Err(Failure::Connect(_)) => return Seen::Failed { retried: true },
            Err(Failure::Exchange(_)) => return Seen::Failed { retried: false },
        };
        let headers = names
            .iter()
            .map(|n| (n.clone(), r.header(n).map(str::to_owned)))
            .collect();
        let mut body = Some(Vec::new());
        loop {
            match r.read_body().await {
                Ok(Some(piece)) => body.as_mut().unwrap().extend_from_slice(&piece),
                Ok(None) => break,
                Err(_) => {
                    body = None;
                    break;
                }
            }
        }
        let status = r.status();
        r.release(c, peer, None);
        let reused = c.take(peer).is_some();
        assert_eq!(c.idle_count(), 0);
        Seen::Answer {
            status,
            headers,
            body,
            reused,
        }
    }

    /// Compares the exchange with the reader of whole bytes; `Ok(false)` when the case would
    /// wait for bytes that never come (`End::Hang` on an unfinished response: not run).
    async fn check(&self, bytes: &[u8], cuts: &[usize], end: End) -> Result<bool, String> {
        let Some((want, names)) = expect(bytes, end) else {
            return Ok(false);
        };
        let seen = self.run(bytes, cuts, end, &names).await;
        if seen == want {
            return Ok(true);
        }
        Err(format!(
            "response {}\n({} bytes) cut at {}, then {end:?}\nexpected {}\nseen     {}",
            shown(&String::from_utf8_lossy(bytes)),
            bytes.len(),
            shown(&format!("{cuts:?}")),
            shown(&format!("{want:?}")),
            shown(&format!("{seen:?}")),
        ))
    }
}

/// At most a screenful of a failing case: the oversize ones are 64 KiB.
fn shown(text: &str) -> String {
    let escaped = format!("{text:?}");
    match escaped.char_indices().nth(600) {
        Some((i, _)) => format!("{}...", &escaped[..i]),
        None => escaped,
    }
}

fn pieces(bytes: &[u8], cuts: &[usize]) -> Vec<Vec<u8>> {
    let mut out = Vec::new();
    let mut at = 0;
    for &c in cuts.iter().chain([&bytes.len()]) {
        if c > at && c <= bytes.len() {
            out.push(bytes[at..c].to_vec());
            at = c;
        }
    }
    out
}

/// What a reader of the whole bytes makes of them (RFC 9112 sections 6 and 7, the heads by
/// httparse), with the exchange's limits; `None` when it would wait for more bytes.
fn expect(bytes: &[u8], end: End) -> Option<(Seen, Vec<String>)> {
    let failed = |retried| Some((Seen::Failed { retried }, Vec::new()));
    // Interim heads count toward the limit of the head.
    let (mut at, mut interim) = (0, 0);
    loop {
        let mut fields = [httparse::EMPTY_HEADER; MAX_HEADERS];
        let mut head = httparse::Response::new(&mut fields);
        let rest = &bytes[at..];
        let limit = MAX_HEAD - interim;
        let len = match head.parse(rest) {
            Err(_) => return failed(false),
            Ok(httparse::Status::Partial) if rest.len() > limit => return failed(false),
            Ok(httparse::Status::Partial) => {
                return match end {
                    End::Hang => None,
                    End::Close | End::Reset => failed(bytes.is_empty()),
                }
            }
            Ok(httparse::Status::Complete(len)) if len > limit => return failed(false),
            Ok(httparse::Status::Complete(len)) => len,
        };
        let status = head.code.unwrap();
        if (100..200).contains(&status) && status != 101 {
            at += len;
            interim += len;
            continue;
        }
        let mut close = head.version != Some(1);
        let (mut length, mut coded, mut chunked) = (None::<u64>, false, false);
        let mut headers: Vec<(String, Option<String>)> = Vec::new();
        for h in head.headers.iter() {
            let name = h.name.to_ascii_lowercase();
            if !headers.iter().any(|(n, _)| *n == name) {
                let text = std::str::from_utf8(h.value).ok().map(str::to_owned);
                headers.push((name.clone(), text));
            }
            let value = h.value.trim_ascii();
            let list = || value.split(|&b| b == b',').map(<[u8]>::trim_ascii);
            match name.as_str() {
                "content-length" => {
                    let digits = !value.is_empty() && value.iter().all(u8::is_ascii_digit);
                    let n = std::str::from_utf8(value).unwrap_or("").parse::<u64>();
                    match n {
                        Ok(n) if digits && length.is_none_or(|l| l == n) => length = Some(n),
                        _ => return failed(false),
                    }
                }
                "transfer-encoding" => {
                    coded = true;
                    if let Some(last) = list().rfind(|c| !c.is_empty()) {
                        chunked = last.eq_ignore_ascii_case(b"chunked");
                    }
                }
                "connection" => close |= list().any(|t| t.eq_ignore_ascii_case(b"close")),
                _ => {}
            }
        }
        // Both framings at once: the coding decides, and the connection is not kept.
        close |= coded && (!chunked || length.is_some());
        let names = headers.iter().map(|(n, _)| n.clone()).collect();
        let rest = &rest[len..];
        let answer = |body, reused| Seen::Answer {
            status,
            headers: headers.clone(),
            body,
            reused,
        };
        let body = if matches!(status, 101 | 204 | 304) {
            Body::Whole(Vec::new(), 0)
        } else if chunked {
            dechunk(rest)
        } else if let Some(n) = length.filter(|_| !coded) {
            let n = usize::try_from(n).unwrap_or(usize::MAX);
            match rest.get(..n) {
                Some(b) => Body::Whole(b.to_vec(), n),
                None => Body::Short,
            }
        } else {
            // To the close: every byte is the body, and only a close ends it well.
            let seen = match end {
                End::Hang => return None,
                End::Close => answer(Some(rest.to_vec()), false),
                End::Reset => answer(None, false),
            };
            return Some((seen, names));
        };
        let seen = match body {
            Body::Whole(b, used) => {
                // Kept only when nothing follows the response and the peer keeps it open.
                let keep = !close && status != 101 && used == rest.len() && end == End::Hang;
                answer(Some(b), keep)
            }
            Body::Bad => answer(None, false),
            Body::Short if end == End::Hang => return None,
            Body::Short => answer(None, false),
        };
        return Some((seen, names));
    }
}

enum Body {
    /// The body and how many bytes of the connection it took.
    Whole(Vec<u8>, usize),
    /// The bytes end before the body does.
    Short,
    /// The body's framing is broken.
    Bad,
}

/// A chunked body read from whole bytes: each size line by httparse and the limit on its
/// length, at least one hex digit (RFC 9112 section 7.1), data, CRLF, and trailer fields as a
/// head's.
fn dechunk(rest: &[u8]) -> Body {
    let mut body = Vec::new();
    let mut at = 0;
    loop {
        let line = &rest[at..];
        if line.first().is_some_and(|b| !b.is_ascii_hexdigit()) {
            return Body::Bad;
        }
        let (used, size) = match httparse::parse_chunk_size(line) {
            Err(_) => return Body::Bad,
            Ok(httparse::Status::Partial) if line.len() >= MAX_CHUNK_LINE => return Body::Bad,
            Ok(httparse::Status::Partial) => return Body::Short,
            Ok(httparse::Status::Complete((used, _))) if used > MAX_CHUNK_LINE => return Body::Bad,
            Ok(httparse::Status::Complete(c)) => c,
        };
        at += used;
        if size == 0 {
            let mut fields = [httparse::EMPTY_HEADER; MAX_TRAILERS];
            return match httparse::parse_headers(&rest[at..], &mut fields) {
                Ok(httparse::Status::Complete((used, _))) if used <= MAX_HEAD => {
                    Body::Whole(body, at + used)
                }
                Ok(httparse::Status::Partial) if rest.len() - at < MAX_HEAD => Body::Short,
                _ => Body::Bad,
            };
        }
        let Some(data) = usize::try_from(size)
            .ok()
            .and_then(|n| rest.get(at..at + n))
        else {
            return Body::Short;
        };
        body.extend_from_slice(data);
        at += data.len();
        match rest.get(at..at + 2) {
            Some(b"\r\n") => at += 2,
            Some(_) => return Body::Bad,
            // One byte, even a wrong one, waits for the second, as the exchange does.
            None => return Body::Short,
        }
    }
}

/// Responses whose every byte boundary is tried.
const SAMPLES: &[&[u8]] = &[
    // Chunked, with a chunk extension, upper-case hex and a trailer field.
    b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\nContent-Type: text/event-stream\r\n\r\n5;ext=1\r\nhello\r\nA\r\n, world!!!\r\n0\r\nX-Trailer: 1\r\n\r\n",
    // Content-Length, a body that looks like framing.
    b"HTTP/1.1 200 OK\r\ncontent-length: 22\r\nMcp-Session-Id: abc\r\n\r\n0\r\n\r\nHTTP/1.1 200 OK\r\n",
    // Interim heads before the final one.
    b"HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 103 Early Hints\r\nLink: </a>; rel=preload\r\n\r\nHTTP/1.1 200 OK\r\nTransfer-Encoding: Chunked\r\n\r\n3\r\nabc\r\n0\r\n\r\n",
    // No body, kept alive.
    b"HTTP/1.1 204 No Content\r\nX-Request-Id: r1\r\n\r\n",
    // HTTP/1.0: read by its length, not kept.
    b"HTTP/1.0 200 OK\r\nContent-Length: 4\r\n\r\nabcd",
    // Read to the close.
    b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\n\r\n{\"a\":1}\r\n",
    // Both framings: the coding wins, the connection is not kept.
    b"HTTP/1.1 200 OK\r\nContent-Length: 3\r\nTransfer-Encoding: chunked\r\n\r\n2\r\nab\r\n0\r\n\r\n",
    // `Connection: close` on a framed body.
    b"HTTP/1.1 200 OK\r\nConnection: keep-alive, Close\r\nContent-Length: 2\r\n\r\nok",
];

/// Whether a truncated `sample` must fail: its body is framed (a length or chunks), so a close
/// before its end is never a whole body.
fn framed(sample: &[u8]) -> bool {
    let text = String::from_utf8_lossy(sample).to_ascii_lowercase();
    text.contains("content-length") || text.contains("chunked") || text.contains(" 204 ")
}

#[tokio::test]
async fn every_cut_of_a_response_reads_as_the_whole_response() {
    let bench = Bench::new();
    let mut runs = 0;
    for &sample in SAMPLES {
        let every: Vec<usize> = (1..sample.len()).collect();
        let mut cases: Vec<Vec<usize>> = every.iter().map(|&k| vec![k]).collect();
        cases.push(Vec::new());
        cases.push(every.clone());
        for cuts in &cases {
            for end in [End::Hang, End::Close, End::Reset] {
                let ran = bench.check(sample, cuts, end).await.unwrap();
                runs += usize::from(ran);
            }
        }
        // Every response here is whole: the reader must say so, and keep the connection
        // when the peer does and the framing allows.
        let (whole, _) = expect(sample, End::Close).unwrap();
        assert!(
            matches!(whole, Seen::Answer { body: Some(_), .. }),
            "{whole:?}"
        );
    }
    assert!(runs > 1500, "{runs}");
}

#[tokio::test]
async fn a_response_cut_short_by_a_close_is_an_error_never_a_short_body() {
    let bench = Bench::new();
    for &sample in SAMPLES {
        for t in 0..sample.len() {
            let short = &sample[..t];
            let every: Vec<usize> = (1..t).collect();
            for cuts in [&[][..], &every[..], &[t / 2][..]] {
                for end in [End::Close, End::Reset] {
                    let (want, names) = expect(short, end).unwrap();
                    let seen = bench.run(short, cuts, end, &names).await;
                    let ctx = || {
                        format!(
                            "{:?} cut at {cuts:?} then {end:?}",
                            String::from_utf8_lossy(short)
                        )
                    };
                    assert_eq!(seen, want, "{}", ctx());
                    if framed(sample) {
                        assert!(
                            !matches!(seen, Seen::Answer { body: Some(_), .. }),
                            "a truncated framed body read as whole: {}",
                            ctx()
                        );
                    }
                    // An answer that began (an interim head included) is never sent again.
                    if t > 0 {
                        assert_ne!(seen, Seen::Failed { retried: true }, "{}", ctx());
                    }
                }
            }
        }
    }
}

/// A response `head_len` bytes long up to its empty line, padded by one long field.
fn head_of(head_len: usize, interim: &[u8]) -> Vec<u8> {
    let start = b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\nX-Filler: ";
    let pad = head_len - start.len() - 4;
    let mut v = interim.to_vec();
    v.extend_from_slice(start);
    v.extend(std::iter::repeat_n(b'a', pad));
    v.extend_from_slice(b"\r\n\r\nok");
    v
}

/// Cuts around each of `marks` (every position within `by` of it), one at a time.
fn cuts_around(marks: &[usize], by: usize, len: usize) -> Vec<Vec<usize>> {
    let mut out = vec![Vec::new()];
    for &m in marks {
        for k in m.saturating_sub(by)..=(m + by).min(len - 1) {
            if k > 0 {
                out.push(vec![k]);
            }
        }
    }
    out
}

#[tokio::test]
async fn oversize_heads_are_refused_however_they_arrive() {
    let bench = Bench::new();
    let interim: &[u8] = b"HTTP/1.1 100 Continue\r\n\r\n";
    for before in [&b""[..], interim] {
        for len in [
            MAX_HEAD - 100,
            MAX_HEAD - 1,
            MAX_HEAD,
            MAX_HEAD + 1,
            MAX_HEAD + 2,
        ] {
            let head_len = len - before.len();
            let bytes = head_of(head_len, before);
            let marks = [MAX_HEAD, len, before.len(), 4096];
            for cuts in cuts_around(&marks, 3, bytes.len()) {
                for end in [End::Hang, End::Close] {
                    bench.check(&bytes, &cuts, end).await.unwrap();
                    let seen = bench.run(&bytes, &cuts, end, &[]).await;
                    let fits = len <= MAX_HEAD;
                    assert_eq!(
                        matches!(seen, Seen::Answer { status: 200, .. }),
                        fits,
                        "heads of {len} bytes ({} interim) cut at {cuts:?}: {seen:?}",
                        before.len()
                    );
                }
            }
        }
    }
    // Fields past the count the exchange reads are refused as well.
    for n in [MAX_HEADERS - 1, MAX_HEADERS, MAX_HEADERS + 1] {
        let mut bytes = b"HTTP/1.1 200 OK\r\nContent-Length: 0\r\n".to_vec();
        for i in 1..n {
            bytes.extend_from_slice(format!("X-{i}: {i}\r\n").as_bytes());
        }
        bytes.extend_from_slice(b"\r\n");
        let mut all = vec![Vec::new()];
        all.extend((1..bytes.len()).step_by(7).map(|k| vec![k]));
        for cuts in all {
            bench.check(&bytes, &cuts, End::Hang).await.unwrap();
        }
        let seen = bench.run(&bytes, &[], End::Hang, &[]).await;
        assert_eq!(matches!(seen, Seen::Answer { .. }), n <= MAX_HEADERS, "{n}");
    }
}

#[tokio::test]
async fn oversize_chunk_size_lines_and_trailers_are_refused_however_they_arrive() {
    let bench = Bench::new();
    let head = b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n";
    // A size line of `len` bytes: `5;x=aaa...\r\n`.
    for len in [
        MAX_CHUNK_LINE - 1,
        MAX_CHUNK_LINE,
        MAX_CHUNK_LINE + 1,
        MAX_CHUNK_LINE + 2,
    ] {
        let mut bytes = head.to_vec();
        bytes.extend_from_slice(b"5;x=");
        bytes.extend(std::iter::repeat_n(b'a', len - 6));
        bytes.extend_from_slice(b"\r\nhello\r\n0\r\n\r\n");
        let line_end = head.len() + len;
        let marks = [line_end, head.len() + MAX_CHUNK_LINE, head.len()];
        for cuts in cuts_around(&marks, 3, bytes.len()) {
            for end in [End::Hang, End::Close] {
                bench.check(&bytes, &cuts, end).await.unwrap();
                let seen = bench.run(&bytes, &cuts, end, &[]).await;
                let whole = matches!(&seen, Seen::Answer { body: Some(b), .. } if b == b"hello");
                assert_eq!(whole, len <= MAX_CHUNK_LINE, "{len}, {cuts:?}: {seen:?}");
            }
        }
    }
    // Trailers of `len` bytes, their empty line included.
    for len in [MAX_HEAD - 1, MAX_HEAD, MAX_HEAD + 1] {
        let mut bytes = head.to_vec();
        bytes.extend_from_slice(b"2\r\nok\r\n0\r\nX-Pad: ");
        let at = bytes.len() - "X-Pad: ".len();
        bytes.extend(std::iter::repeat_n(b'a', len - "X-Pad: ".len() - 4));
        bytes.extend_from_slice(b"\r\n\r\n");
        let marks = [at + MAX_HEAD, at + len, at];
        for cuts in cuts_around(&marks, 2, bytes.len()) {
            bench.check(&bytes, &cuts, End::Hang).await.unwrap();
            let seen = bench.run(&bytes, &cuts, End::Hang, &[]).await;
            let whole =
                matches!(&seen, Seen::Answer { body: Some(b), reused: true, .. } if b == b"ok");
            assert_eq!(whole, len <= MAX_HEAD, "{len}, {cuts:?}: {seen:?}");
        }
    }
}

fn pick<'a, T>(rng: &mut StdRng, xs: &'a [T]) -> &'a T {
    &xs[rng.gen_range(0..xs.len())]
}

/// A body with bytes that look like framing, so that a reader scanning for framing is misled.
fn body_bytes(rng: &mut StdRng) -> Vec<u8> {
    const TRICKY: &[&[u8]] = &[
        b"\r\n",
        b"\r\n\r\n",
        b"0\r\n\r\n",
        b"HTTP/1.1 200 OK\r\n",
        b"data: {}\n\n",
        b"\n",
        b"\xff\x00",
    ];
    let n = *pick(rng, &[0, 1, 2, 5, 16, 100, 300]);
    let mut v = Vec::new();
    while v.len() < n {
        if rng.gen_bool(0.2) {
            let piece: &&[u8] = pick(rng, TRICKY);
            v.extend_from_slice(piece);
        } else {
            v.push(rng.gen_range(b' '..=b'~'));
        }
    }
    v.truncate(n);
    v
}

/// A chunk-size line for `n`: either case of hex, leading zeros, extensions.
fn size_line(rng: &mut StdRng, n: usize) -> String {
    let hex = if rng.gen_bool(0.5) {
        format!("{n:x}")
    } else {
        format!("{n:X}")
    };
    let zeros = "0".repeat(if rng.gen_bool(0.2) {
        rng.gen_range(1..4)
    } else {
        0
    });
    let ext = *pick(
        rng,
        &[
            "",
            "",
            "",
            ";ext=1",
            ";name=\"quoted value\"",
            " ;a",
            ";a;b=c",
        ],
    );
    format!("{zeros}{hex}{ext}\r\n")
}

/// `body` in chunks of random sizes, a last chunk and random trailer fields.
fn chunk(rng: &mut StdRng, body: &[u8]) -> Vec<u8> {
    let mut out = Vec::new();
    let mut rest = body;
    while !rest.is_empty() {
        let n = rng.gen_range(1..=rest.len().min(64));
        out.extend_from_slice(size_line(rng, n).as_bytes());
        out.extend_from_slice(&rest[..n]);
        out.extend_from_slice(b"\r\n");
        rest = &rest[n..];
    }
    out.extend_from_slice(size_line(rng, 0).as_bytes());
    for _ in 0..rng.gen_range(0..3) {
        let t = *pick(
            rng,
            &["X-Checksum: abc\r\n", "Server-Timing: total;dur=12\r\n"],
        );
        out.extend_from_slice(t.as_bytes());
    }
    out.extend_from_slice(b"\r\n");
    out
}

/// A response from the grammar: interim heads, a status line, fields in any order and case,
/// a body framed by length, chunks or the close; framing fields that disagree or are invalid;
/// now and then truncated, followed by more bytes, or with one byte changed.
fn response(rng: &mut StdRng) -> Vec<u8> {
    const INTERIM: &[&str] = &[
        "HTTP/1.1 100 Continue\r\n\r\n",
        "HTTP/1.1 102 Processing\r\n\r\n",
        "HTTP/1.1 103 Early Hints\r\nLink: </style.css>; rel=preload\r\n\r\n",
    ];
    const FIELDS: &[&str] = &[
        "Content-Type: application/json",
        "content-type: text/event-stream",
        "X-Request-Id: req_123",
        "Server: nginx",
        "Mcp-Session-Id: abc",
        "X-Empty:",
        "X-Spaced:   padded   ",
        "Date: Tue, 15 Nov 1994 08:12:31 GMT",
    ];
    const CONNECTION: &[&str] = &[
        "Connection: close",
        "Connection: keep-alive",
        "connection: Keep-Alive, CLOSE",
        "Connection: closed",
        "Connection: upgrade",
    ];
    let mut out = Vec::new();
    while rng.gen_bool(0.25) {
        out.extend_from_slice(pick(rng, INTERIM).as_bytes());
    }
    let version = if rng.gen_bool(0.9) {
        "HTTP/1.1"
    } else {
        "HTTP/1.0"
    };
    let status = *pick(
        rng,
        &[200, 200, 200, 201, 204, 304, 400, 404, 429, 500, 503, 101],
    );
    let reason = *pick(rng, &[" OK", " ", "", " Whatever It Says"]);
    out.extend_from_slice(format!("{version} {status}{reason}\r\n").as_bytes());
    let mut fields: Vec<String> = (0..rng.gen_range(0..4))
        .map(|_| pick(rng, FIELDS).to_string())
        .collect();
    if rng.gen_bool(0.25) {
        fields.push(pick(rng, CONNECTION).to_string());
    }
    let body = body_bytes(rng);
    let n = body.len();
    let wire = match rng.gen_range(0..10) {
        0..=2 => {
            let name = *pick(rng, &["Content-Length", "content-length", "CONTENT-LENGTH"]);
            fields.push(format!("{name}: {n}"));
            if rng.gen_bool(0.1) {
                fields.push(format!("Content-Length: {n}"));
            }
            body
        }
        3..=5 => {
            let coding = *pick(
                rng,
                &[
                    "chunked",
                    "chunked",
                    "Chunked",
                    "CHUNKED",
                    "gzip, chunked",
                    " chunked ",
                    "gzip,chunked",
                ],
            );
            fields.push(format!("Transfer-Encoding: {coding}"));
            chunk(rng, &body)
        }
        6 => body,
        7 => {
            let odd = [
                format!("Content-Length: +{n}"),
                format!("Content-Length: {n} "),
                format!("Content-Length: 0{n}"),
                format!("Content-Length: {n}, {n}"),
                format!("Content-Length: -{n}"),
                "Content-Length:".into(),
                "Content-Length: 99999999999999999999".into(),
                format!("Content-Length: {n}\r\nContent-Length: {}", n + 1),
                "Transfer-Encoding: gzip".into(),
                "Transfer-Encoding: chunked, gzip".into(),
                "Transfer-Encoding: xchunked".into(),
                "Transfer-Encoding: gzip\r\nTransfer-Encoding: chunked".into(),
                "Transfer-Encoding: chunked\r\nTransfer-Encoding:".into(),
                format!("Transfer-Encoding: chunked\r\nContent-Length: {n}"),
            ];
            let field = pick(rng, &odd).clone();
            let chunks = field.contains("chunked") && rng.gen_bool(0.7);
            fields.push(field);
            if chunks {
                chunk(rng, &body)
            } else {
                body
            }
        }
        _ => {
            // A length that does not match the bytes sent.
            let off = n as i64 + rng.gen_range(-3..=3);
            fields.push(format!("Content-Length: {}", off.max(0)));
            body
        }
    };
    fields.shuffle(rng);
    for f in fields {
        out.extend_from_slice(f.as_bytes());
        out.extend_from_slice(b"\r\n");
    }
    out.extend_from_slice(b"\r\n");
    out.extend_from_slice(&wire);
    match rng.gen_range(0..20) {
        0..=1 => out.truncate(rng.gen_range(0..=out.len())),
        2 => out.extend_from_slice(b"HTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n"),
        3 => out.extend_from_slice(b"\r\n"),
        4 if !out.is_empty() => {
            let i = rng.gen_range(0..out.len());
            out[i] = *pick(rng, b"\r\n:; 0aZ\x00\xff");
        }
        _ => {}
    }
    out
}

/// Random cuts: none, one, several, or every byte.
fn random_cuts(rng: &mut StdRng, len: usize) -> Vec<usize> {
    if len < 2 {
        return Vec::new();
    }
    let mut cuts: Vec<usize> = match rng.gen_range(0..4) {
        0 => Vec::new(),
        1 => vec![rng.gen_range(1..len)],
        2 => (0..rng.gen_range(2..10))
            .map(|_| rng.gen_range(1..len))
            .collect(),
        _ => (1..len).collect(),
    };
    cuts.sort_unstable();
    cuts.dedup();
    cuts
}

fn env_number(name: &str) -> Option<u64> {
    std::env::var(name).ok().and_then(|v| v.parse().ok())
}

#[tokio::test]
async fn random_responses_cut_at_random_read_as_the_whole_bytes_say() {
    let bench = Bench::new();
    let base = env_number("TOLLGATE_PROP_SEED").unwrap_or_else(rand::random);
    let cases = env_number("TOLLGATE_PROP_CASES").unwrap_or(3000);
    let (mut answers, mut reused, mut failed) = (0, 0, 0);
    for i in 0..cases {
        let seed = base.wrapping_add(i);
        let mut rng = StdRng::seed_from_u64(seed);
        let bytes = response(&mut rng);
        let cuts = random_cuts(&mut rng, bytes.len());
        let mut end = *pick(&mut rng, &[End::Hang, End::Close, End::Reset]);
        if expect(&bytes, end).is_none() {
            end = End::Close;
        }
        if let Err(e) = bench.check(&bytes, &cuts, end).await {
            panic!("{e}\nreplay: TOLLGATE_PROP_SEED={seed} TOLLGATE_PROP_CASES=1");
        }
        match expect(&bytes, end) {
            Some((Seen::Answer { reused: true, .. }, _)) => reused += 1,
            Some((Seen::Answer { .. }, _)) => answers += 1,
            _ => failed += 1,
        }
    }
    eprintln!(
        "seed {base}: {cases} cases, {reused} kept, {answers} other answers, {failed} failed"
    );
    // The generator reaches every outcome, or the comparison proves little.
    if cases >= 1000 {
        assert!(
            reused > cases / 25 && answers > cases / 10 && failed > cases / 25,
            "reused {reused}, other answers {answers}, failures {failed} (seed {base})"
        );
    }
}
