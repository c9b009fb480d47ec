//! Chunked transfer coding (RFC 9112 section 7.1), one state at a time over the read buffer,
//! so that a body cut anywhere by the network resumes where it stopped.

use bytes::{Buf, Bytes, BytesMut};

use pingora::{Error, ErrorType};

/// A response head (status line and headers) larger than this is refused.
pub(super) const MAX_HEAD: usize = 64 * 1024;

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
        Chunk::Size => match httparse::parse_chunk_size(buf) {
            Ok(httparse::Status::Complete((used, size))) => {
                buf.advance(used);
                Step::Next(if size == 0 {
                    Chunk::Trailers
                } else {
                    Chunk::Data(size)
                })
            }
            Ok(httparse::Status::Partial) if buf.len() < 1024 => Step::More,
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
        Chunk::Trailers => {
            if buf.starts_with(b"\r\n") {
                buf.advance(2);
                return Ok(Step::End);
            }
            match buf.windows(4).position(|w| w == b"\r\n\r\n") {
                Some(i) => {
                    buf.advance(i + 4);
                    Step::End
                }
                None if buf.len() < MAX_HEAD => Step::More,
                None => return Err(bad_reply("trailers too large")),
            }
        }
    })
}
