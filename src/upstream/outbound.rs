//! The gateway's own calls to other services (Stripe's API, an organization's OpenID
//! provider): one request to a URL over Pingora's pooled connector, like every upstream, with
//! a deadline for the whole exchange and a cap on the reply. A failure is said in words, never
//! with the request's secrets.

use std::time::Duration;

use pingora::upstreams::peer::HttpPeer;

use crate::config::EndpointUrl;
use crate::runtime::Shared;
use crate::upstream::head::Request;
use crate::upstream::wire::{self, BodyError};

/// A reply: its status and body.
pub struct Reply {
    pub status: u16,
    pub body: bytes::BytesMut,
}

/// `method url` with `headers` and `body`, answered within `timeout`, its body at most `max`
/// bytes; `who` names the service in the errors.
pub async fn call(
    shared: &Shared,
    who: &str,
    (method, url): (&str, &str),
    headers: &[(&str, &str)],
    body: &[u8],
    (timeout, max): (Duration, usize),
) -> Result<Reply, String> {
    call_at(
        shared,
        who,
        None,
        (method, url),
        headers,
        body,
        (timeout, max),
    )
    .await
}

/// [`call`], connecting to `addr` when given (an address already resolved and checked, as a
/// webhook delivery's is) instead of resolving the URL's host again.
pub async fn call_at(
    shared: &Shared,
    who: &str,
    addr: Option<std::net::SocketAddr>,
    (method, url): (&str, &str),
    headers: &[(&str, &str)],
    body: &[u8],
    (timeout, max): (Duration, usize),
) -> Result<Reply, String> {
    match tokio::time::timeout(
        timeout,
        exchange(shared, who, addr, method, url, headers, body, timeout, max),
    )
    .await
    {
        Ok(r) => r,
        Err(_) => Err(format!("{who} did not answer in time")),
    }
}

#[allow(clippy::too_many_arguments)]
async fn exchange(
    shared: &Shared,
    who: &str,
    addr: Option<std::net::SocketAddr>,
    method: &str,
    url: &str,
    headers: &[(&str, &str)],
    body: &[u8],
    timeout: Duration,
    max: usize,
) -> Result<Reply, String> {
    // The path and query after the authority; `EndpointUrl` keeps a base path only.
    let (base, path) = split(url).ok_or_else(|| format!("{who}: not an http(s) URL"))?;
    let url = EndpointUrl::parse(base).map_err(|e| format!("{who}: {e}"))?;
    let addr = match addr {
        Some(a) => a,
        None => tokio::net::lookup_host((url.host.as_str(), url.port))
            .await
            .ok()
            .and_then(|mut a| a.next())
            .ok_or_else(|| format!("cannot resolve {}", url.host))?,
    };
    let sni = if url.tls {
        url.host.clone()
    } else {
        String::new()
    };
    let mut peer = HttpPeer::new(addr, url.tls, sni);
    peer.options.connection_timeout = Some(timeout);
    peer.options.read_timeout = Some(timeout);
    let request = (|| -> pingora::Result<Vec<u8>> {
        let mut r = Request::new(method, &format!("{}{path}", url.base_path))?
            .header("Host", &url.authority())?;
        for (name, value) in headers {
            r = r.header(name, value)?;
        }
        Ok(r.body(body))
    })()
    .map_err(|e| format!("could not build the request to {who} ({e})"))?;
    let mut up = wire::exchange(&shared.connector, &peer, &request)
        .await
        .map_err(|e| match e {
            wire::Failure::Connect(_) => format!("could not connect to {who}"),
            wire::Failure::Exchange(_) => format!("{who} dropped the connection"),
        })?;
    let status = up.status();
    let body = up.read_to_end(max).await.map_err(|e| match e {
        BodyError::TooLarge => format!("{who}'s reply was too long"),
        BodyError::Read(_) => format!("{who} dropped the connection mid-reply"),
    })?;
    up.release(&shared.connector, &peer, Some(Duration::from_secs(30)));
    Ok(Reply { status, body })
}

/// `http(s)://authority/path?query` as (`http(s)://authority`, `/path?query`).
fn split(url: &str) -> Option<(&str, String)> {
    let rest = url
        .strip_prefix("https://")
        .or_else(|| url.strip_prefix("http://"))?;
    let at = rest
        .find(['/', '?'])
        .map_or(url.len(), |i| url.len() - rest.len() + i);
    let (base, path) = url.split_at(at);
    let path = match path.as_bytes().first() {
        None => "/".to_owned(),
        Some(b'?') => format!("/{path}"),
        Some(_) => path.to_owned(),
    };
    Some((base, path))
}

#[cfg(test)]
mod tests {
    use super::split;

    #[test]
    fn a_url_splits_into_its_origin_and_its_path() {
        let s = |a: &'static str, b: &str| Some((a, b.to_owned()));
        assert_eq!(split("http://a:1/x/y?z=1"), s("http://a:1", "/x/y?z=1"));
        assert_eq!(split("https://a.example"), s("https://a.example", "/"));
        assert_eq!(split("https://a.example?x"), s("https://a.example", "/?x"));
        assert_eq!(split("ftp://a"), None);
    }
}
