//! Where a case runs: the scripted connection parked as an idle connection of a peer that
//! refuses new ones, taken by `wire::exchange`, and what came of it compared with the reader of
//! whole bytes.

use std::time::Duration;

use pingora::upstreams::peer::HttpPeer;

use super::oracle::{expect, Seen};
use super::scripted::{End, Scripted};
use crate::upstream::idle::Connections;
use crate::upstream::wire::{exchange, Failure};

/// Where the exchanges run: a peer whose address refuses connections, so that a retry on a
/// new connection shows as a connect failure.
pub(super) struct Bench {
    connections: Connections,
    peer: HttpPeer,
    // Bound and not listening: connections to it are refused while it is held.
    _port: tokio::net::TcpSocket,
}

impl Bench {
    pub(super) fn new() -> Bench {
        let port = tokio::net::TcpSocket::new_v4().unwrap();
        port.bind("127.0.0.1:0".parse().unwrap()).unwrap();
        let mut peer = HttpPeer::new(port.local_addr().unwrap(), false, String::new());
        // A reader that waits where it should not fails the case instead of hanging it.
        peer.options.read_timeout = Some(Duration::from_secs(2));
        Bench {
            connections: Connections::default(),
            peer,
            _port: port,
        }
    }

    /// `bytes` answered on an idle connection, cut after each of `cuts`, then `end`.
    pub(super) async fn run(
        &self,
        bytes: &[u8],
        cuts: &[usize],
        end: End,
        names: &[String],
    ) -> Seen {
        let (c, peer) = (&self.connections, &self.peer);
        let stream = Scripted::new(bytes, cuts, end);
        c.park(Box::new(stream), peer, None);
        assert_eq!(c.idle_count(), 1, "the scripted connection was not parked");
        let request = b"POST /v1/x HTTP/1.1\r\nHost: p\r\nContent-Length: 2\r\n\r\nhi";
        let mut r = match exchange(c, peer, request).await {
            Ok(r) => r,
            Err(Failure::Connect(_)) => return Seen::Failed { retried: true },
            Err(Failure::Exchange(_)) => return Seen::Failed { retried: false },
        };
        let headers = names
            .iter()
            .map(|n| (n.clone(), r.header(n).map(str::to_owned)))
            .collect();
        let mut body = Some(Vec::new());
        loop {
            match r.read_body().await {
                Ok(Some(piece)) => body.as_mut().unwrap().extend_from_slice(&piece),
                Ok(None) => break,
                Err(_) => {
                    body = None;
                    break;
                }
            }
        }
        let status = r.status();
        r.release(c, peer, None);
        let reused = c.take(peer).is_some();
        assert_eq!(c.idle_count(), 0);
        Seen::Answer {
            status,
            headers,
            body,
            reused,
        }
    }

    /// Compares the exchange with the reader of whole bytes; `Ok(false)` when the case would
    /// wait for bytes that never come (`End::Hang` on an unfinished response: not run).
    pub(super) async fn check(
        &self,
        bytes: &[u8],
        cuts: &[usize],
        end: End,
    ) -> Result<bool, String> {
        let Some((want, names)) = expect(bytes, end) else {
            return Ok(false);
        };
        let seen = self.run(bytes, cuts, end, &names).await;
        if seen == want {
            return Ok(true);
        }
        Err(format!(
            "response {}\n({} bytes) cut at {}, then {end:?}\nexpected {}\nseen     {}",
            shown(&String::from_utf8_lossy(bytes)),
            bytes.len(),
            shown(&format!("{cuts:?}")),
            shown(&format!("{want:?}")),
            shown(&format!("{seen:?}")),
        ))
    }
}

/// At most a screenful of a failing case: the oversize ones are 64 KiB.
fn shown(text: &str) -> String {
    let escaped = format!("{text:?}");
    match escaped.char_indices().nth(600) {
        Some((i, _)) => format!("{}...", &escaped[..i]),
        None => escaped,
    }
}
