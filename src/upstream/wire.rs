//! One write per upstream request. Pingora 0.9's HTTP/1 client flushes a request's head on its
//! own, so head and body leave in two `sendto` calls (and the upstream may wake twice). For a
//! body that is whole before the request starts (every request the gateway makes upstream),
//! this writes head and body with one `write_all` on the pooled connection's stream, then hands
//! the stream back to Pingora's client to read the response: Pingora stays the connection pool,
//! the TLS layer and the response parser.

use pingora::protocols::http::client::HttpSession;
use pingora::protocols::http::v1::client::{http_req_header_to_wire, HttpSession as Http1};
use pingora::upstreams::peer::HttpPeer;
use pingora::{Error, ErrorType};
use tokio::io::AsyncWriteExt;

use pingora::http::RequestHeader;

/// Sends `header` and `body` on `up` and reads the response head; the session to read the
/// body from. HTTP/2 sessions (none today) go through Pingora's own calls.
pub async fn exchange(
    up: HttpSession,
    peer: &HttpPeer,
    header: Box<RequestHeader>,
    body: &[u8],
) -> pingora::Result<HttpSession> {
    let h1 = match up {
        HttpSession::H1(h1) => h1,
        mut other => {
            other.write_request_header(header).await?;
            other
                .write_request_body(bytes::Bytes::copy_from_slice(body), true)
                .await?;
            other.finish_request_body().await?;
            other.read_response_header().await?;
            return Ok(other);
        }
    };
    let mut wire = http_req_header_to_wire(&header)
        .ok_or_else(|| Error::explain(ErrorType::InvalidHTTPHeader, "unwritable request head"))?;
    wire.extend_from_slice(body);
    let mut stream = h1.into_inner();
    let write = async {
        stream.write_all(&wire).await?;
        stream.flush().await
    };
    let written = match peer.options.write_timeout {
        Some(t) => tokio::time::timeout(t, write)
            .await
            .unwrap_or_else(|_| Err(std::io::ErrorKind::TimedOut.into())),
        None => write.await,
    };
    written.map_err(|e| Error::because(ErrorType::WriteError, "while writing the request", e))?;
    // A fresh client session over the same stream, with the peer's read timeouts; it parses
    // the response as Pingora always does (keep-alive from the response's own headers).
    let mut h1 = Http1::new_with_options(stream, peer);
    h1.read_response().await?;
    Ok(HttpSession::H1(h1))
}
