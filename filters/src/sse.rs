//! An incremental Server-Sent Events decoder.
//!
//! Upstream bytes arrive in arbitrary pieces: an event, a line, even a `\r\n` pair may be split
//! across reads. The decoder keeps only the unfinished tail, so memory is bounded by
//! `max_event_bytes` however long the stream runs.

/// One dispatched event. Only `data` matters to chat streams; `event` is kept because some
/// providers name error events.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct SseEvent {
    pub event: Option<String>,
    pub data: String,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum SseError {
    /// One event (or one line) grew past the bound: the upstream is not speaking SSE.
    TooLarge {
        limit: usize,
    },
    InvalidUtf8,
}

impl std::fmt::Display for SseError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            SseError::TooLarge { limit } => write!(f, "SSE event larger than {limit} bytes"),
            SseError::InvalidUtf8 => write!(f, "SSE event is not UTF-8"),
        }
    }
}

#[derive(Debug)]
pub struct SseDecoder {
    buf: Vec<u8>,
    /// Bytes of `buf` already scanned for a newline, so a long line is not rescanned per read.
    scanned: usize,
    data: String,
    has_data: bool,
    event: Option<String>,
    max_event_bytes: usize,
    /// A `\r` ended the previous line; a `\n` opening the next read belongs to it.
    skip_lf: bool,
}

impl SseDecoder {
    pub fn new(max_event_bytes: usize) -> Self {
        SseDecoder {
            // Events are a few hundred bytes; grown on demand (one per open stream).
            buf: Vec::with_capacity(512),
            scanned: 0,
            data: String::new(),
            has_data: false,
            event: None,
            max_event_bytes,
            skip_lf: false,
        }
    }

    /// Feeds bytes; appends every event they complete to `out`.
    pub fn push(&mut self, mut input: &[u8], out: &mut Vec<SseEvent>) -> Result<(), SseError> {
        if self.skip_lf && !input.is_empty() {
            if input[0] == b'\n' {
                input = &input[1..];
            }
            self.skip_lf = false;
        }
        self.buf.extend_from_slice(input);
        let mut start = 0;
        let mut i = self.scanned;
        while i < self.buf.len() {
            let b = self.buf[i];
            if b == b'\n' || b == b'\r' {
                let line_end = i;
                let mut next = i + 1;
                if b == b'\r' {
                    if next < self.buf.len() {
                        if self.buf[next] == b'\n' {
                            next += 1;
                        }
                    } else {
                        self.skip_lf = true;
                    }
                }
                let line = std::str::from_utf8(&self.buf[start..line_end])
                    .map_err(|_| SseError::InvalidUtf8)?;
                // Borrow ends before the mutable call below.
                let line = line.to_owned();
                self.line(&line, out)?;
                start = next;
                i = next;
            } else {
                i += 1;
            }
        }
        self.buf.drain(..start);
        self.scanned = self.buf.len();
        if self.buf.len() + self.data.len() > self.max_event_bytes {
            return Err(SseError::TooLarge {
                limit: self.max_event_bytes,
            });
        }
        Ok(())
    }

    fn line(&mut self, line: &str, out: &mut Vec<SseEvent>) -> Result<(), SseError> {
        if line.is_empty() {
            if self.has_data {
                out.push(SseEvent {
                    event: self.event.take(),
                    data: std::mem::take(&mut self.data),
                });
            }
            self.has_data = false;
            self.event = None;
            return Ok(());
        }
        if line.starts_with(':') {
            return Ok(());
        }
        let (field, value) = match line.find(':') {
            Some(p) => {
                let v = &line[p + 1..];
                (&line[..p], v.strip_prefix(' ').unwrap_or(v))
            }
            None => (line, ""),
        };
        match field {
            "data" => {
                if self.has_data {
                    self.data.push('\n');
                }
                self.data.push_str(value);
                self.has_data = true;
                if self.data.len() > self.max_event_bytes {
                    return Err(SseError::TooLarge {
                        limit: self.max_event_bytes,
                    });
                }
            }
            "event" => self.event = Some(value.to_owned()),
            _ => {}
        }
        Ok(())
    }

    /// True when no partial event is pending (the stream ended on an event boundary).
    pub fn is_idle(&self) -> bool {
        self.buf.is_empty() && !self.has_data
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn decode_all(chunks: &[&[u8]]) -> Vec<SseEvent> {
        let mut d = SseDecoder::new(1 << 20);
        let mut out = Vec::new();
        for c in chunks {
            d.push(c, &mut out).unwrap();
        }
        out
    }

    const STREAM: &str =
        "data: {\"a\":1}\n\n: comment\n\nevent: error\ndata: {\"b\":\ndata: 2}\n\ndata:[DONE]\n\n";

    fn expected() -> Vec<SseEvent> {
        vec![
            SseEvent {
                event: None,
                data: "{\"a\":1}".into(),
            },
            SseEvent {
                event: Some("error".into()),
                data: "{\"b\":\n2}".into(),
            },
            SseEvent {
                event: None,
                data: "[DONE]".into(),
            },
        ]
    }

    #[test]
    fn whole_stream() {
        assert_eq!(decode_all(&[STREAM.as_bytes()]), expected());
    }

    #[test]
    fn crlf_and_cr_line_endings() {
        let crlf = STREAM.replace('\n', "\r\n");
        assert_eq!(decode_all(&[crlf.as_bytes()]), expected());
        let cr = STREAM.replace('\n', "\r");
        assert_eq!(decode_all(&[cr.as_bytes()]), expected());
    }

    #[test]
    fn every_split_point_and_random_splits() {
        for text in [STREAM.to_string(), STREAM.replace('\n', "\r\n")] {
            let bytes = text.as_bytes();
            for i in 0..=bytes.len() {
                assert_eq!(
                    decode_all(&[&bytes[..i], &bytes[i..]]),
                    expected(),
                    "split at {i}"
                );
            }
            // Deterministic pseudo-random multi-way splits (xorshift), many pieces per stream.
            let mut seed = 0x9E3779B97F4A7C15u64;
            for _ in 0..500 {
                let mut pieces = Vec::new();
                let mut at = 0;
                while at < bytes.len() {
                    seed ^= seed << 13;
                    seed ^= seed >> 7;
                    seed ^= seed << 17;
                    let n = 1 + (seed % 9) as usize;
                    let end = (at + n).min(bytes.len());
                    pieces.push(&bytes[at..end]);
                    at = end;
                }
                assert_eq!(decode_all(&pieces), expected());
            }
        }
    }

    #[test]
    fn multibyte_utf8_split_inside_a_character() {
        let text = "data: {\"c\":\"héllo — 世界\"}\n\n".as_bytes();
        for i in 0..=text.len() {
            let ev = decode_all(&[&text[..i], &text[i..]]);
            assert_eq!(ev.len(), 1);
            assert_eq!(ev[0].data, "{\"c\":\"héllo — 世界\"}");
        }
    }

    #[test]
    fn buffer_is_bounded() {
        let mut d = SseDecoder::new(64);
        let mut out = Vec::new();
        let err = d.push(&[b'x'; 100], &mut out).unwrap_err();
        assert_eq!(err, SseError::TooLarge { limit: 64 });
        let mut d = SseDecoder::new(64);
        for _ in 0..10 {
            if d.push(b"data: 0123456789\n", &mut out).is_err() {
                return;
            }
        }
        panic!("data lines without a blank line must hit the bound");
    }

    #[test]
    fn idle_only_on_boundary() {
        let mut d = SseDecoder::new(1024);
        let mut out = Vec::new();
        d.push(b"data: x\n", &mut out).unwrap();
        assert!(!d.is_idle());
        d.push(b"\n", &mut out).unwrap();
        assert!(d.is_idle());
    }
}
