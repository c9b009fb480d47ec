//! The gateway's HTTP/1.1 exchange with an upstream (providers, tool servers, Stripe).
//!
//! Pingora's `TransportConnector` stays the TLS layer: it connects and handshakes; idle
//! connections are kept between exchanges by [`Connections`] (`idle.rs`). This module writes one
//! request and reads its response. Pingora 0.9's HTTP client was used before; two of its habits
//! cost on every request: it flushes a request's head on its own (two `sendto` per request, and
//! two wakeups of the upstream), and it reads every response body through a fixed 64 KiB buffer
//! per connection, which was 64 of the 66 KB each concurrent stream cost. Here head and body
//! leave in one write, and a response is read through a 4 KiB buffer that grows only for a
//! body that arrives faster than it is consumed.
//!
//! The response head is parsed by `httparse` (the parser Pingora and hyper use); bodies are
//! framed as RFC 9112 section 6.3 says: no body for 1xx/204/304, chunked, Content-Length, or
//! until the connection closes (then never reused).

use std::ops::Range;
use std::time::Duration;

use bytes::{Buf, Bytes, BytesMut};
use pingora::protocols::Stream;
use pingora::upstreams::peer::HttpPeer;
use pingora::{Error, ErrorType};

use super::chunked::{bad_reply, state_step, Chunk, Step, MAX_HEAD};
use super::idle::Connections;
use tokio::io::{AsyncReadExt, AsyncWriteExt};

/// What one read asks the socket for at first: SSE events and JSON replies are far smaller.
/// A read that fills it doubles the next one, up to `MAX_READ_SIZE`, for large bodies.
const READ_SIZE: usize = 4 * 1024;
const MAX_READ_SIZE: usize = 64 * 1024;
pub(super) const MAX_HEADERS: usize = 96;

/// Why an exchange failed: before a connection existed, or on it.
#[derive(Debug)]
pub enum Failure {
    Connect(Box<Error>),
    Exchange(Box<Error>),
}

impl std::fmt::Display for Failure {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Failure::Connect(e) | Failure::Exchange(e) => e.fmt(f),
        }
    }
}

enum Framing {
    Length(u64),
    Chunked(Chunk),
    UntilClose,
    Done,
}

/// Why [`Response::read_to_end`] read no whole body.
#[derive(Debug)]
pub enum BodyError {
    /// It would pass the limit.
    TooLarge,
    /// The upstream failed or closed before the body's end.
    Read(Box<Error>),
}

/// A response whose head has been read; its body is read with [`Response::read_body`].
pub struct Response {
    status: u16,
    head: Bytes,
    headers: Vec<(Range<usize>, Range<usize>)>,
    stream: Stream,
    buf: BytesMut,
    body: Framing,
    keepalive: bool,
    read_timeout: Option<Duration>,
    read_size: usize,
}

fn io_error(what: &'static str, e: std::io::Error) -> Box<Error> {
    let kind = if e.kind() == std::io::ErrorKind::TimedOut {
        ErrorType::ReadTimedout
    } else {
        ErrorType::ReadError
    };
    Error::because(kind, what, e)
}

/// Sends `request` (written by [`super::head::Request`]) on an idle connection to `peer` (a
/// new one when none is idle) and reads the response head. An idle connection the upstream
/// closed fails before any byte of a response arrives; that case is retried once on a new
/// connection, as HTTP clients do, instead of being counted against the endpoint.
pub async fn exchange(
    connections: &Connections,
    peer: &HttpPeer,
    request: &[u8],
) -> Result<Response, Failure> {
    if let Some(stream) = connections.take(peer) {
        match send(stream, peer, request).await {
            Ok(r) => return Ok(r),
            Err((true, e)) => tracing::debug!("stale pooled connection, retrying fresh: {e}"),
            Err((false, e)) => return Err(Failure::Exchange(e)),
        }
    }
    // Boxed: connecting (TCP, TLS handshake) is an 8 KB future, and unboxed it would sit inside
    // every request's future for the request's whole life, streams included, though it runs
    // only when no pooled connection is idle.
    let stream = Box::pin(connections.connect(peer))
        .await
        .map_err(Failure::Connect)?;
    send(stream, peer, request)
        .await
        .map_err(|(_, e)| Failure::Exchange(e))
}

/// Writes the request and reads the response head. The error's flag says the connection
/// failed before any response byte came (worth one retry on a new connection).
async fn send(
    mut stream: Stream,
    peer: &HttpPeer,
    wire: &[u8],
) -> Result<Response, (bool, Box<Error>)> {
    let write = async {
        stream.write_all(wire).await?;
        stream.flush().await
    };
    let written = match peer.options.write_timeout {
        Some(t) => tokio::time::timeout(t, write)
            .await
            .unwrap_or_else(|_| Err(std::io::ErrorKind::TimedOut.into())),
        None => write.await,
    };
    if let Err(e) = written {
        let stale = e.kind() != std::io::ErrorKind::TimedOut;
        return Err((
            stale,
            Error::because(ErrorType::WriteError, "while writing the request", e),
        ));
    }
    let mut r = Response {
        status: 0,
        head: Bytes::new(),
        headers: Vec::new(),
        stream,
        buf: BytesMut::with_capacity(READ_SIZE),
        body: Framing::Done,
        keepalive: false,
        read_timeout: peer.options.read_timeout,
        read_size: READ_SIZE,
    };
    // Interim heads count toward the head's limit: an upstream sending them without end would
    // otherwise hold the exchange for as long as it likes.
    let mut interim = 0;
    // Whether any byte came: an interim head leaves the buffer empty, but the request was read,
    // and sending it again would be a second request.
    let mut answered = false;
    loop {
        let limit = MAX_HEAD - interim;
        let before = r.buf.len();
        let parsed = r.parse_head(limit).map_err(|e| (false, e))?;
        match parsed {
            Some(true) => return Ok(r),
            // An interim 1xx head: read on for the final one.
            Some(false) => {
                interim += before - r.buf.len();
                continue;
            }
            None => {}
        }
        if r.buf.len() > limit {
            return Err((false, bad_reply("response head too large")));
        }
        match r.fill().await {
            Ok(0) => {
                let e = Error::explain(ErrorType::ConnectionClosed, "closed before a response");
                return Err((!answered, e));
            }
            Ok(_) => answered = true,
            Err(e) => {
                let stale = !answered && e.etype() == &ErrorType::ReadError;
                return Err((stale, e));
            }
        }
    }
}

fn has_token(value: &[u8], token: &str) -> bool {
    value
        .split(|&b| b == b',')
        .any(|t| t.trim_ascii().eq_ignore_ascii_case(token.as_bytes()))
}

impl Response {
    /// Parses a head at the start of the buffer: `None` when incomplete, `Some(false)` for an
    /// interim 1xx head (consumed), `Some(true)` for the final head. A head longer than `limit`
    /// is refused here when it came whole, as `send` refuses one still coming past it, so that
    /// what is refused does not depend on how the network cut it.
    fn parse_head(&mut self, limit: usize) -> pingora::Result<Option<bool>> {
        let mut headers = [httparse::EMPTY_HEADER; MAX_HEADERS];
        let mut resp = httparse::Response::new(&mut headers);
        let len = match resp.parse(&self.buf) {
            Ok(httparse::Status::Complete(len)) if len > limit => {
                return Err(bad_reply("response head too large"))
            }
            Ok(httparse::Status::Complete(len)) => len,
            Ok(httparse::Status::Partial) => return Ok(None),
            Err(_) => return Err(bad_reply("invalid response head")),
        };
        let status = resp.code.unwrap_or(0);
        if (100..200).contains(&status) && status != 101 {
            self.buf.advance(len);
            return Ok(Some(false));
        }
        let base = self.buf.as_ptr() as usize;
        let offset = |s: &[u8]| {
            let start = s.as_ptr() as usize - base;
            start..start + s.len()
        };
        let (mut length, mut close) = (None, resp.version != Some(1));
        // A Transfer-Encoding field, and whether chunked is its last coding.
        let (mut coded, mut chunked) = (false, false);
        let mut ranges = Vec::with_capacity(resp.headers.len());
        for h in resp.headers.iter() {
            if h.name.eq_ignore_ascii_case("content-length") {
                // Digits only (RFC 9112 section 6.2): Rust's integer parser would take `+5`,
                // which a server in front of us may read otherwise.
                let n = Some(h.value.trim_ascii())
                    .filter(|v| !v.is_empty() && v.iter().all(u8::is_ascii_digit))
                    .and_then(|v| std::str::from_utf8(v).ok()?.parse::<u64>().ok())
                    .ok_or_else(|| bad_reply("invalid Content-Length"))?;
                if length.is_some_and(|l| l != n) {
                    return Err(bad_reply("conflicting Content-Length"));
                }
                length = Some(n);
            } else if h.name.eq_ignore_ascii_case("transfer-encoding") {
                // The codings of every such field in order, their names in any case (RFC 9112
                // section 7): chunked must be the last; a body under any other is read to the
                // close.
                coded = true;
                for coding in h.value.split(|&b| b == b',').map(<[u8]>::trim_ascii) {
                    if !coding.is_empty() {
                        chunked = coding.eq_ignore_ascii_case(b"chunked");
                    }
                }
            } else if h.name.eq_ignore_ascii_case("connection") {
                close |= has_token(h.value, "close");
            }
            ranges.push((offset(h.name.as_bytes()), offset(h.value)));
        }
        // Both framings at once is how responses are smuggled past one reader to the next
        // (RFC 9112 section 6.3): the coding decides this body, and the connection is not kept.
        close |= coded && (!chunked || length.is_some());
        self.body = if status == 204 || status == 304 || status == 101 {
            Framing::Done
        } else if chunked {
            Framing::Chunked(Chunk::Size)
        } else if coded {
            Framing::UntilClose
        } else if let Some(n) = length {
            if n == 0 {
                Framing::Done
            } else {
                Framing::Length(n)
            }
        } else {
            close = true;
            Framing::UntilClose
        };
        self.status = status;
        self.headers = ranges;
        self.keepalive = !close && status != 101;
        self.head = self.buf.split_to(len).freeze();
        Ok(Some(true))
    }

    pub fn status(&self) -> u16 {
        self.status
    }

    /// The first header of that name (ASCII case-insensitive), when it is text.
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(n, _)| self.head[n.clone()].eq_ignore_ascii_case(name.as_bytes()))
            .and_then(|(_, v)| std::str::from_utf8(&self.head[v.clone()]).ok())
    }

    /// Reads more of the connection into the buffer: the number of bytes read, 0 at its end.
    async fn fill(&mut self) -> pingora::Result<usize> {
        if self.buf.capacity() - self.buf.len() < READ_SIZE / 4 {
            // Reclaims the buffer's own allocation when every piece handed out was dropped.
            self.buf.reserve(self.read_size);
        }
        let room = self.buf.capacity() - self.buf.len();
        let read = self.stream.read_buf(&mut self.buf);
        let n = match self.read_timeout {
            Some(t) => match tokio::time::timeout(t, read).await {
                Ok(r) => r,
                Err(_) => Err(std::io::ErrorKind::TimedOut.into()),
            },
            None => read.await,
        };
        let n = n.map_err(|e| io_error("while reading the response", e))?;
        if n == room {
            self.read_size = (self.read_size * 2).min(MAX_READ_SIZE);
        }
        Ok(n)
    }

    /// The whole body, refused once it would pass `limit` bytes (nothing more is read then):
    /// a JSON reply read to be rewritten, not relayed as it arrives.
    pub async fn read_to_end(&mut self, limit: usize) -> Result<BytesMut, BodyError> {
        let mut whole = BytesMut::new();
        while let Some(piece) = self.read_body().await.map_err(BodyError::Read)? {
            if whole.len() + piece.len() > limit {
                return Err(BodyError::TooLarge);
            }
            whole.extend_from_slice(&piece);
        }
        Ok(whole)
    }

    /// The next piece of the body as it arrives, `None` at its end. An upstream that closes
    /// the connection before a framed body ends is an error.
    pub async fn read_body(&mut self) -> pingora::Result<Option<Bytes>> {
        loop {
            match self.body {
                Framing::Done => return Ok(None),
                Framing::Length(n) => {
                    if !self.buf.is_empty() {
                        let take = n.min(self.buf.len() as u64);
                        self.body = match n - take {
                            0 => Framing::Done,
                            rest => Framing::Length(rest),
                        };
                        return Ok(Some(self.buf.split_to(take as usize).freeze()));
                    }
                }
                Framing::UntilClose => {
                    if !self.buf.is_empty() {
                        return Ok(Some(self.buf.split().freeze()));
                    }
                    if self.fill().await? == 0 {
                        self.body = Framing::Done;
                        return Ok(None);
                    }
                    continue;
                }
                Framing::Chunked(_) => {
                    if let Some(piece) = self.chunked()? {
                        return Ok(piece);
                    }
                }
            }
            if self.fill().await? == 0 {
                return Err(Error::explain(
                    ErrorType::ConnectionClosed,
                    "the upstream closed the connection before the body ended",
                ));
            }
        }
    }

    /// Chunked decoding over the buffer: `Some` with what to return (a piece, or `None` at the
    /// body's end), or `None` when more bytes are needed.
    #[allow(clippy::option_option)]
    fn chunked(&mut self) -> pingora::Result<Option<Option<Bytes>>> {
        loop {
            let Framing::Chunked(state) = self.body else {
                return Ok(Some(None));
            };
            match state_step(&mut self.buf, state)? {
                Step::More => return Ok(None),
                Step::Next(s) => self.body = Framing::Chunked(s),
                Step::Data(bytes, s) => {
                    self.body = Framing::Chunked(s);
                    return Ok(Some(Some(bytes)));
                }
                Step::End => {
                    self.body = Framing::Done;
                    return Ok(Some(None));
                }
            }
        }
    }

    /// Keeps the connection for the next exchange with `peer` when its response was read to
    /// the end and it may be kept alive; otherwise it is closed.
    pub fn release(self, connections: &Connections, peer: &HttpPeer, idle: Option<Duration>) {
        if self.keepalive && matches!(self.body, Framing::Done) && self.buf.is_empty() {
            connections.park(self.stream, peer, idle);
        }
    }
}
