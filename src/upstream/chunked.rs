//! Chunked transfer coding (RFC 9112 section 7.1), one state at a time over the read buffer,
//! so that a body cut anywhere by the network resumes where it stopped.

use bytes::{Buf, Bytes, BytesMut};

use pingora::{Error, ErrorType};

/// A response head (status line and headers) larger than this is refused, and so are trailers.
pub(super) const MAX_HEAD: usize = 64 * 1024;
/// A chunk-size line (size, extensions, CRLF) longer than this is refused.
pub(super) const MAX_CHUNK_LINE: usize = 1024;
/// Trailer fields read at most (they are read and dropped; the head's own bound).
pub(super) const MAX_TRAILERS: usize = 96;

pub fn bad_reply(what: &'static str) -> Box<Error> {
    Error::explain(ErrorType::InvalidHTTPHeader, what)
}

#[derive(Clone, Copy)]
pub enum Chunk {
    Size,
    Data(u64),
    /// The CRLF after a chunk's data.
    DataEnd,
    Trailers,
}

pub enum Step {
    More,
    Next(Chunk),
    Data(Bytes, Chunk),
    End,
}

/// Advances chunked decoding by one state over `buf`.
pub fn state_step(buf: &mut BytesMut, state: Chunk) -> pingora::Result<Step> {
    Ok(match state {
        // httparse reads a line without a digit (`\r\n`, `;x\r\n`) as size 0, the last chunk: a
        // stray line break would end a body early. RFC 9112's chunk-size is 1*HEXDIG.
        Chunk::Size if buf.first().is_some_and(|b| !b.is_ascii_hexdigit()) => {
            return Err(bad_reply("invalid chunk size"))
        }
        // The limits hold for a line that came whole as for one cut before its end, so what is
        // refused does not depend on how the network cut the body.
        Chunk::Size => match httparse::parse_chunk_size(buf) {
            Ok(httparse::Status::Complete((used, _))) if used > MAX_CHUNK_LINE => {
                return Err(bad_reply("chunk size line too long"))
            }
            Ok(httparse::Status::Complete((used, size))) => {
                buf.advance(used);
                Step::Next(if size == 0 {
                    Chunk::Trailers
                } else {
                    Chunk::Data(size)
                })
            }
            Ok(httparse::Status::Partial) if buf.len() < MAX_CHUNK_LINE => Step::More,
            _ => return Err(bad_reply("invalid chunk size")),
        },
        Chunk::Data(n) => {
            if buf.is_empty() {
                return Ok(Step::More);
            }
            let take = n.min(buf.len() as u64);
            let data = buf.split_to(take as usize).freeze();
            let next = match n - take {
                0 => Chunk::DataEnd,
                rest => Chunk::Data(rest),
            };
            Step::Data(data, next)
        }
        Chunk::DataEnd => match buf.get(..2) {
            None => Step::More,
            Some(b"\r\n") => {
                buf.advance(2);
                Step::Next(Chunk::Size)
            }
            Some(_) => return Err(bad_reply("chunk not followed by CRLF")),
        },
        Chunk::Trailers => match trailers(buf)? {
            Some(used) => {
                buf.advance(used);
                Step::End
            }
            None => Step::More,
        },
    })
}

/// The length of the trailer section (fields and the empty line) at the start of `buf`, parsed
/// as the head is: `None` until it is complete. Trailers that are not fields are the body's
/// framing gone wrong, and the connection is not trusted with another exchange.
#[inline(never)]
fn trailers(buf: &[u8]) -> pingora::Result<Option<usize>> {
    let mut fields = [httparse::EMPTY_HEADER; MAX_TRAILERS];
    match httparse::parse_headers(buf, &mut fields) {
        Ok(httparse::Status::Complete((used, _))) if used <= MAX_HEAD => Ok(Some(used)),
        Ok(httparse::Status::Partial) if buf.len() < MAX_HEAD => Ok(None),
        Ok(_) => Err(bad_reply("trailers too large")),
        Err(_) => Err(bad_reply("invalid trailers")),
    }
}
