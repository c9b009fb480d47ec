//! The upstream connection the properties feed the exchange from: it answers a request with
//! scripted bytes, handed over in the pieces the cuts make, then ends as told ([`End`]).

use std::collections::VecDeque;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};

use async_trait::async_trait;
use pingora::protocols::raw_connect::ProxyDigest;
use pingora::protocols::{
    GetProxyDigest, GetSocketDigest, GetTimingDigest, Peek, Shutdown, SocketDigest, Ssl,
    TimingDigest, UniqueID, UniqueIDType,
};
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};

/// How the connection ends once its scripted bytes are read.
#[derive(Clone, Copy, Debug, PartialEq)]
pub(super) enum End {
    /// The peer closes it (a read of 0 bytes).
    Close,
    /// The peer resets it (a read error).
    Reset,
    /// The peer keeps it open and sends nothing more.
    Hang,
}

/// An upstream connection that answers a request with scripted bytes, one piece per read
/// (a piece longer than the reader's room is cut again there). Until a request is written it
/// has nothing to read, as an idle keep-alive connection, so it can be parked and taken.
#[derive(Debug)]
pub(super) struct Scripted {
    reads: VecDeque<Vec<u8>>,
    end: End,
    asked: bool,
}

impl Scripted {
    /// `bytes`, cut after each of `cuts`, answered once a request is written; then `end`.
    pub(super) fn new(bytes: &[u8], cuts: &[usize], end: End) -> Scripted {
        Scripted {
            reads: pieces(bytes, cuts).into(),
            end,
            asked: false,
        }
    }
}

impl AsyncRead for Scripted {
    fn poll_read(
        mut self: Pin<&mut Self>,
        _cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<std::io::Result<()>> {
        // No waker is kept: nothing here becomes ready later, and the peer's read timeout ends
        // a read that would wait on it.
        if !self.asked {
            return Poll::Pending;
        }
        let Some(front) = self.reads.front_mut() else {
            return match self.end {
                End::Close => Poll::Ready(Ok(())),
                End::Reset => Poll::Ready(Err(std::io::ErrorKind::ConnectionReset.into())),
                End::Hang => Poll::Pending,
            };
        };
        let n = front.len().min(buf.remaining());
        buf.put_slice(&front[..n]);
        front.drain(..n);
        if front.is_empty() {
            self.reads.pop_front();
        }
        Poll::Ready(Ok(()))
    }
}

impl AsyncWrite for Scripted {
    fn poll_write(
        mut self: Pin<&mut Self>,
        _cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<std::io::Result<usize>> {
        self.asked = true;
        Poll::Ready(Ok(buf.len()))
    }

    fn poll_flush(self: Pin<&mut Self>, _cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        Poll::Ready(Ok(()))
    }

    fn poll_shutdown(self: Pin<&mut Self>, _cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        Poll::Ready(Ok(()))
    }
}

#[async_trait]
impl Shutdown for Scripted {
    async fn shutdown(&mut self) {}
}

impl UniqueID for Scripted {
    fn id(&self) -> UniqueIDType {
        0
    }
}

impl Ssl for Scripted {}

impl GetTimingDigest for Scripted {
    fn get_timing_digest(&self) -> Vec<Option<TimingDigest>> {
        Vec::new()
    }
}

impl GetProxyDigest for Scripted {
    fn get_proxy_digest(&self) -> Option<Arc<ProxyDigest>> {
        None
    }
}

impl GetSocketDigest for Scripted {
    fn get_socket_digest(&self) -> Option<Arc<SocketDigest>> {
        None
    }
}

#[async_trait]
impl Peek for Scripted {}

fn pieces(bytes: &[u8], cuts: &[usize]) -> Vec<Vec<u8>> {
    let mut out = Vec::new();
    let mut at = 0;
    for &c in cuts.iter().chain([&bytes.len()]) {
        if c > at && c <= bytes.len() {
            out.push(bytes[at..c].to_vec());
            at = c;
        }
    }
    out
}
