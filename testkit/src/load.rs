//! A minimal HTTP/1.1 keep-alive response reader for the benchmarks (Content-Length or chunked
//! bodies), shared by the load generator (`tollgate-bench load`) and the end-to-end bench. It
//! reads just enough to find where a response ends; the tests' client is [`crate::http`].
//! Also the chat request the load generator sends ([`chat_body`]), so `benches/load.sh` can hand
//! the very same bytes to another load generator (`tollgate-bench body`).

use tokio::io::AsyncReadExt;
use tokio::net::TcpStream;

/// Reads one whole response (Content-Length or chunked) off a keep-alive connection; returns
/// its status. `buf` keeps what was read past this response.
pub async fn read_response(s: &mut TcpStream, buf: &mut Vec<u8>) -> std::io::Result<u16> {
    let bad = || std::io::Error::new(std::io::ErrorKind::InvalidData, "bad response");
    let head_end = loop {
        if let Some(p) = buf.windows(4).position(|w| w == b"\r\n\r\n") {
            break p + 4;
        }
        fill(s, buf).await?;
    };
    let head = std::str::from_utf8(&buf[..head_end])
        .map_err(|_| bad())?
        .to_ascii_lowercase();
    let status: u16 = head
        .split(' ')
        .nth(1)
        .and_then(|c| c.parse().ok())
        .ok_or_else(bad)?;
    let chunked = head.contains("transfer-encoding: chunked");
    let len = head
        .lines()
        .find_map(|l| l.strip_prefix("content-length:"))
        .and_then(|v| v.trim().parse::<usize>().ok());
    buf.drain(..head_end);
    if let Some(len) = len {
        while buf.len() < len {
            fill(s, buf).await?;
        }
        buf.drain(..len);
    } else if chunked {
        loop {
            let eol = loop {
                if let Some(p) = buf.windows(2).position(|w| w == b"\r\n") {
                    break p;
                }
                fill(s, buf).await?;
            };
            let size = usize::from_str_radix(
                std::str::from_utf8(&buf[..eol]).map_err(|_| bad())?.trim(),
                16,
            )
            .map_err(|_| bad())?;
            while buf.len() < eol + 2 + size + 2 {
                fill(s, buf).await?;
            }
            buf.drain(..eol + 2 + size + 2);
            if size == 0 {
                break;
            }
        }
    } else {
        return Err(bad());
    }
    Ok(status)
}

async fn fill(s: &mut TcpStream, buf: &mut Vec<u8>) -> std::io::Result<()> {
    buf.reserve(16 * 1024);
    if s.read_buf(buf).await? == 0 {
        return Err(std::io::Error::new(
            std::io::ErrorKind::UnexpectedEof,
            "closed",
        ));
    }
    Ok(())
}

/// Ordinary English for padding: a tokenizer sees words, as in a real long prompt (one run of a
/// single character would be one enormous pre-token, a case no real client sends).
const FILLER: &str = "The quick brown fox jumps over the lazy dog while the gateway counts. ";

/// The load generator's chat request: one user message; with `max_tokens` (the fake answers
/// that many words, so a stream has that many content chunks); padded with words to exactly
/// `pad_to` bytes of body when that is more than the bare request (the body-size rows).
pub fn chat_body(model: &str, stream: bool, max_tokens: Option<u64>, pad_to: usize) -> String {
    let build = |content: &str| {
        let max = max_tokens.map_or(String::new(), |n| format!(",\"max_tokens\":{n}"));
        format!("{{\"model\":\"{model}\",\"messages\":[{{\"role\":\"user\",\"content\":\"{content}\"}}],\"stream\":{stream}{max}}}")
    };
    let base = "Say something short.";
    let bare = build(base);
    if pad_to <= bare.len() {
        return bare;
    }
    let mut content = String::with_capacity(pad_to);
    content.push_str(base);
    content.push(' ');
    while content.len() < base.len() + pad_to - bare.len() {
        content.push_str(FILLER);
    }
    // FILLER is ASCII: any cut is on a character boundary.
    content.truncate(base.len() + pad_to - bare.len());
    build(&content)
}

#[cfg(test)]
mod tests {
    use super::chat_body;

    #[test]
    fn padded_bodies_are_exactly_the_size_asked_and_valid_json() {
        for size in [1024, 100 * 1024, 1024 * 1024] {
            let b = chat_body("bench", false, Some(50), size);
            assert_eq!(b.len(), size);
            let v: serde_json::Value = serde_json::from_str(&b).unwrap();
            assert_eq!(v["max_tokens"], 50);
        }
        let bare = chat_body("m", true, None, 0);
        assert_eq!(
            bare,
            r#"{"model":"m","messages":[{"role":"user","content":"Say something short."}],"stream":true}"#
        );
    }
}
