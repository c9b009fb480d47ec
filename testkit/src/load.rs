//! A minimal HTTP/1.1 keep-alive response reader for the benchmarks (Content-Length or chunked
//! bodies), shared by the load generator (`tollgate-bench load`) and the end-to-end bench. It
//! reads just enough to find where a response ends; the tests' client is [`crate::http`].

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
