//! A request's payloads as captured for its request-log record, only where payload logging is
//! on for its key or wallet: the bytes the client sent and the reply it got (a stream's
//! delivered text), each copied up to the cap and a margin, so that a key that crosses the cap
//! is still whole when it is redacted (off the request path, by the log's writer).

use bytes::Bytes;

/// Bytes kept beyond the cap: more than any key is long, so a key that begins before the
/// cap ends inside what was kept, and is redacted before the cut.
pub const MARGIN: usize = 1024;

/// What was captured of one request.
#[derive(Debug, Default)]
pub struct Payloads {
    /// `max_payload_bytes` as it was when the request began.
    pub max: usize,
    pub request: Option<Bytes>,
    /// The request body's whole length.
    pub request_len: usize,
    pub response: Option<Bytes>,
    pub response_len: usize,
}

impl Payloads {
    pub fn new(max: usize) -> Payloads {
        Payloads {
            max,
            ..Payloads::default()
        }
    }

    /// At most the cap and its margin of `bytes`, and its length.
    pub fn keep(&self, bytes: &[u8]) -> (Option<Bytes>, usize) {
        let end = bytes.len().min(self.max.saturating_add(MARGIN));
        (Some(Bytes::copy_from_slice(&bytes[..end])), bytes.len())
    }
}
