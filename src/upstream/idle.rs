//! Upstream connections: made by Pingora's transport connector (TCP, TLS), kept between
//! exchanges in idle lists of our own, one per peer and thread.
//!
//! Why not Pingora's pool: its `release_stream` spawns a task per released connection to
//! watch it while idle, and `reused_stream` wakes that task and waits on a lock until it has
//! gone, then asks the kernel for the socket's peer address; a profile of a tools/call put
//! that at ~6 % of the call's CPU (two pool maps, a task, a timer, a syscall per call). Here an
//! idle connection is a list entry: it is checked for a close (a read that is ready while
//! nothing was asked) when it is taken and when it is put back, and the health loop drops the
//! expired and closed ones every second. A connection that closes between that check and its
//! next request fails before any response byte and is retried once on a new one
//! (`wire::exchange`).
//!
//! The lists are per thread as well as per peer: each proxy thread is its own single-threaded
//! runtime (`proxy::listen::layout`), and a socket stays registered with the runtime that
//! opened it, so a connection taken by another thread would have every read and write woken
//! across threads.

use std::collections::HashMap;
use std::future::Future;
use std::pin::pin;
use std::sync::Mutex;
use std::task::{Context, Poll, Waker};
use std::thread::ThreadId;
use std::time::{Duration, Instant};

use pingora::connectors::TransportConnector;
use pingora::protocols::Stream;
use pingora::upstreams::peer::{HttpPeer, Peer};
use tokio::io::AsyncReadExt;

/// Idle connections kept per peer; past it the oldest is closed (Pingora's default pool size).
const PER_PEER: usize = 128;

/// Connections to upstreams: new ones from Pingora, idle ones kept here.
pub struct Connections {
    connector: TransportConnector,
    idle: Mutex<HashMap<(ThreadId, u64), Vec<Parked>>>,
}

thread_local! {
    static THREAD: ThreadId = std::thread::current().id();
}

/// The idle list of `peer` for this thread.
fn list_key(peer: &HttpPeer) -> (ThreadId, u64) {
    (THREAD.with(|t| *t), peer.reuse_hash())
}

struct Parked {
    stream: Stream,
    /// `None`: kept until closed or pushed out.
    until: Option<Instant>,
}

impl Default for Connections {
    fn default() -> Self {
        Connections {
            // Pingora's rustls connector with the platform's trust roots, loaded once here by
            // rustls-native-certs: `SSL_CERT_FILE` / `SSL_CERT_DIR` when either is set (then
            // only those), else the system bundle OpenSSL would use (Debian's
            // /etc/ssl/certs/ca-certificates.crt). A provider's `ca_file` replaces them for its
            // peers (`Pool::peer` sets the peer's CA list, which the connector verifies alone).
            connector: TransportConnector::new(None),
            idle: Mutex::new(HashMap::new()),
        }
    }
}

impl Connections {
    /// The most recently parked idle connection to `peer` that is still open.
    pub fn take(&self, peer: &HttpPeer) -> Option<Stream> {
        let key = list_key(peer);
        let now = Instant::now();
        loop {
            let parked = {
                let mut idle = self.idle.lock().ok()?;
                idle.get_mut(&key)?.pop()?
            };
            // Checked and closed outside the lock.
            let mut p = parked;
            if p.until.is_none_or(|u| u > now) && still_open(&mut p.stream) {
                return Some(p.stream);
            }
        }
    }

    /// A new connection (TCP, and TLS when the peer has it).
    pub async fn connect(&self, peer: &HttpPeer) -> pingora::Result<Stream> {
        self.connector.new_stream(peer).await
    }

    /// Keeps `stream` (whose last response was read to its end) for the next exchange with
    /// `peer`, for `idle` at most.
    pub fn park(&self, mut stream: Stream, peer: &HttpPeer, idle: Option<Duration>) {
        if !still_open(&mut stream) {
            return;
        }
        let parked = Parked {
            stream,
            until: idle.map(|d| Instant::now() + d),
        };
        let Ok(mut map) = self.idle.lock() else {
            return;
        };
        let list = map.entry(list_key(peer)).or_default();
        list.push(parked);
        if list.len() > PER_PEER {
            // Dropped (closed) after the lock is let go.
            let oldest = list.remove(0);
            drop(map);
            drop(oldest);
        }
    }

    /// Closes the idle connections that expired or that their server closed (the health loop
    /// calls this every second, so an upstream no longer used keeps no sockets open). Checked
    /// under the lock: a check is one poll that finds nothing ready (no system call), so the
    /// lists are never emptied while requests look for a connection.
    pub fn sweep(&self) {
        let now = Instant::now();
        let closed: Vec<Parked> = {
            let Ok(mut map) = self.idle.lock() else {
                return;
            };
            let mut closed = Vec::new();
            for list in map.values_mut() {
                let mut i = 0;
                while i < list.len() {
                    let p = &mut list[i];
                    if p.until.is_none_or(|u| u > now) && still_open(&mut p.stream) {
                        i += 1;
                    } else {
                        closed.push(list.remove(i));
                    }
                }
            }
            map.retain(|_, list| !list.is_empty());
            closed
        };
        // Closed after the lock is let go.
        drop(closed);
    }

    /// Idle connections kept now, over every peer.
    pub fn idle_count(&self) -> usize {
        self.idle
            .lock()
            .map(|m| m.values().map(Vec::len).sum())
            .unwrap_or(0)
    }
}

/// Whether an idle connection is still usable: nothing is readable on it. A read that is ready
/// now is the server's close, an error, or bytes nobody asked for; none of them can carry the
/// next exchange. Polled once, with a waker that does nothing (no task waits on an idle list).
fn still_open(stream: &mut Stream) -> bool {
    let mut byte = [0u8; 1];
    // Unconstrained: tokio's cooperative budget could otherwise answer "not ready" for a
    // connection that has in fact been closed.
    let read = pin!(tokio::task::unconstrained(stream.read(&mut byte)));
    let mut cx = Context::from_waker(Waker::noop());
    matches!(read.poll(&mut cx), Poll::Pending)
}
