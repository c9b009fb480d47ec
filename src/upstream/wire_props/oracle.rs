//! The reader of whole bytes the exchange is compared with: what a response means by RFC 9112
//! sections 6 and 7, written out plainly, its heads read by httparse (the parser the exchange
//! uses, here on bytes no network cut), with the exchange's limits.

use super::scripted::End;
use crate::upstream::chunked::{MAX_CHUNK_LINE, MAX_HEAD, MAX_TRAILERS};
use crate::upstream::wire::MAX_HEADERS;

/// What came of one exchange.
#[derive(Debug, PartialEq)]
pub(super) enum Seen {
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

/// What a reader of the whole bytes makes of them (RFC 9112 sections 6 and 7, the heads by
/// httparse), with the exchange's limits; `None` when it would wait for more bytes.
pub(super) fn expect(bytes: &[u8], end: End) -> Option<(Seen, Vec<String>)> {
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
