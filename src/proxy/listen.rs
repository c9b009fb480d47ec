//! Where the proxy's connections are accepted and kept: one accept loop per proxy service, one
//! small task per client connection, each request handed to Pingora's HTTP/1 server session
//! and the application ([`HttpServerApp::process_new_http`]) as Pingora's own listening service
//! would.
//!
//! Why not Pingora's listening service: memory per idle connection (README, Performance). Its
//! connection task holds the TLS handshake's state inline even on plain TCP (8.7 KB), its
//! `process_new` the HTTP/2 handshake's (3.8 KB boxed), and a session allocates its 4 KiB head
//! buffer as soon as it starts waiting. Here an idle connection is this module's task, waiting
//! for the socket to become readable, and [`Conn`] (the socket and its 1,460-byte write
//! buffer); the session and its buffer exist only once a request's bytes are there. What is
//! the same: `SO_REUSEPORT` sockets of one address, one per proxy thread; `TCP_NODELAY`; a
//! 60-second keep-alive; no new connection accepted once the server is stopping. What differs
//! at a stop: a connection that has not sent its next request is given a drain period to send
//! it (answered with `Connection: close`) before it is closed, since a client sending as the
//! server closes would get no answer (an upgrade hands the listening sockets to the new process
//! meanwhile: `proxy::handover`). Tollgate serves no TLS and no HTTP/2 on this listener
//! (neither did it before). The sockets are bound, or inherited, before the server starts.

use std::net::SocketAddr;
use std::pin::Pin;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Duration;

use async_trait::async_trait;
use pingora::apps::{HttpPersistentSettings, HttpServerApp};
use pingora::protocols::http::ServerSession;
use pingora::protocols::l4::socket::SocketAddr as PeerAddr;
use pingora::protocols::raw_connect::ProxyDigest;
use pingora::protocols::{
    GetProxyDigest, GetSocketDigest, GetTimingDigest, Peek, Shutdown, SocketDigest, Ssl, Stream,
    TimingDigest, UniqueID, UniqueIDType,
};
use pingora::server::{ListenFds, ShutdownWatch};
use tokio::io::{AsyncRead, AsyncWrite, AsyncWriteExt, BufWriter, ReadBuf};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::Notify;

use super::capacity::Gate;

/// How long a connection may wait for its next request (Pingora's default keep-alive).
const KEEPALIVE: Duration = Duration::from_secs(60);
/// The write buffer in front of each client socket: a response's head and a short body leave
/// in one `sendto` (Pingora's default L4 write buffer).
const WRITE_BUFFER: usize = 1460;

/// One proxy service: `threads` threads serving `app` on its listening sockets (usually one,
/// joined to the address's other proxy services with `SO_REUSEPORT`; more when an old process
/// with more threads handed its sockets over).
pub struct ProxyService<A> {
    pub name: String,
    pub sockets: Vec<std::net::TcpListener>,
    pub threads: usize,
    pub app: Option<A>,
    /// The connection bound this listener's accept loops share.
    pub gate: Gate,
    /// How long, once the server stops, a connection may still send its next request.
    pub drain: Duration,
    /// Counts accept loops running, for a handover to wait on.
    pub listening: Listening,
}

/// When the accept loops may start, and how many run: an instance taking the sockets over from
/// another accepts only once it is ready (its ledger connected), since from then on it takes
/// connections from the old one's queues; the old one is told to stop once every socket is
/// accepted from here.
#[derive(Clone)]
pub struct Listening(Arc<(AtomicUsize, Notify, tokio::sync::watch::Sender<bool>)>);

impl Default for Listening {
    /// Open at once: a first start accepts as soon as it runs.
    fn default() -> Self {
        Listening::new(true)
    }
}

impl Listening {
    pub fn new(open: bool) -> Listening {
        let (open, _) = tokio::sync::watch::channel(open);
        Listening(Arc::new((AtomicUsize::new(0), Notify::new(), open)))
    }

    /// Lets the accept loops start.
    pub fn open(&self) {
        self.0 .2.send_replace(true);
    }

    async fn opened(&self) {
        let mut open = self.0 .2.subscribe();
        let _ = open.wait_for(|o| *o).await;
    }

    fn started(&self) {
        self.0 .0.fetch_add(1, Ordering::SeqCst);
        self.0 .1.notify_waiters();
    }

    /// Waits until `n` accept loops run.
    pub async fn wait_for(&self, n: usize) {
        loop {
            let notified = self.0 .1.notified();
            if self.0 .0.load(Ordering::SeqCst) >= n {
                return;
            }
            notified.await;
        }
    }
}

#[async_trait]
impl<A: HttpServerApp + Send + Sync + 'static> pingora::services::Service for ProxyService<A> {
    async fn start_service(
        &mut self,
        _fds: Option<ListenFds>,
        shutdown: ShutdownWatch,
        _listeners_per_fd: usize,
    ) {
        let Some(app) = self.app.take() else {
            return;
        };
        let app = Arc::new(app);
        let mut loops = tokio::task::JoinSet::new();
        for socket in std::mem::take(&mut self.sockets) {
            let listener = match socket
                .set_nonblocking(true)
                .and_then(|()| TcpListener::from_std(socket))
            {
                Ok(l) => l,
                Err(e) => {
                    tracing::error!(service = %self.name, "cannot accept on a listening socket: {e}");
                    continue;
                }
            };
            let place = Place {
                gate: self.gate.clone(),
                drain: self.drain,
                shutdown: shutdown.clone(),
            };
            let listening = self.listening.clone();
            let app = app.clone();
            loops.spawn(async move {
                let mut stopping = place.shutdown.clone();
                tokio::select! {
                    () = listening.opened() => {}
                    _ = stopping.wait_for(|stop| *stop) => return,
                }
                listening.started();
                accept_loop(app, listener, place).await;
            });
        }
        while loops.join_next().await.is_some() {}
    }

    fn name(&self) -> &str {
        &self.name
    }

    fn threads(&self) -> Option<usize> {
        Some(self.threads)
    }
}

/// What every connection of an accept loop shares.
#[derive(Clone)]
struct Place {
    gate: Gate,
    drain: Duration,
    shutdown: ShutdownWatch,
}

/// One proxy service's listener.
#[derive(Debug, PartialEq)]
pub struct ProxyListener {
    pub reuse_port: bool,
    pub threads: usize,
}

/// The proxy's listeners: one single-threaded service per thread, each on its own
/// `SO_REUSEPORT` socket of `listen`, so the kernel spreads connections over the threads as
/// it does over nginx's workers and a connection's socket, its upstream connections
/// (`upstream::idle` keeps idle lists per thread) and its task stay on one thread: no
/// cross-thread wake-ups, no work stealing (README, Performance). Port 0 (any free port) would
/// give each its own port, so it stays one service of `threads` workers.
pub fn layout(listen: SocketAddr, threads: usize) -> Vec<ProxyListener> {
    if threads <= 1 || listen.port() == 0 {
        return vec![ProxyListener {
            reuse_port: false,
            threads: threads.max(1),
        }];
    }
    (0..threads)
        .map(|_| ProxyListener {
            reuse_port: true,
            threads: 1,
        })
        .collect()
}

/// How long the accept loop pauses when the process is out of file descriptors: accept would
/// fail again at once, so it lets some connections close (no spin, no error storm).
const OUT_OF_FDS_PAUSE: Duration = Duration::from_millis(250);

async fn accept_loop<A: HttpServerApp + Send + Sync + 'static>(
    app: Arc<A>,
    listener: TcpListener,
    place: Place,
) {
    let gate = place.gate.clone();
    let mut stopping = place.shutdown.clone();
    loop {
        // At the connection bound nothing is accepted: new clients wait in the backlog until a
        // connection closes, while the open ones (a health check's among them) are served.
        tokio::select! {
            biased;
            _ = stopping.wait_for(|stop| *stop) => return,
            () = gate.room() => {}
        };
        let accepted = tokio::select! {
            biased;
            _ = stopping.wait_for(|stop| *stop) => return,
            accepted = listener.accept() => accepted,
        };
        match accepted {
            Ok((tcp, peer)) => {
                tokio::spawn(connection(app.clone(), tcp, peer, place.clone()));
            }
            Err(e) => {
                let out_of_fds = matches!(
                    e.raw_os_error().map(nix::errno::Errno::from_raw),
                    Some(nix::errno::Errno::EMFILE | nix::errno::Errno::ENFILE)
                );
                if out_of_fds {
                    tracing::warn!("accept: out of file descriptors ({e}); pausing {OUT_OF_FDS_PAUSE:?} for connections to close");
                    tokio::time::sleep(OUT_OF_FDS_PAUSE).await;
                } else {
                    tracing::warn!("accept: {e}");
                }
            }
        }
    }
}

/// One client connection: wait for a request's bytes, serve it, and again while keep-alive
/// holds. Its place under the connection bound goes back when it closes.
async fn connection<A: HttpServerApp + Send + Sync + 'static>(
    app: Arc<A>,
    tcp: TcpStream,
    peer: SocketAddr,
    place: Place,
) {
    // Its place among the connections held, kept until it closes (taken at once but for a
    // race between two accept loops at the bound).
    let Some(_held) = place.gate.admit().await else {
        return;
    };
    let shutdown = &place.shutdown;
    if tcp.set_nodelay(true).is_err() {
        return;
    }
    let mut stream: Stream = Box::new(Conn::new(tcp, peer));
    let mut settings: Option<HttpPersistentSettings> = None;
    loop {
        if !request_arrives(&stream, shutdown, place.drain).await {
            return;
        }
        let mut session = ServerSession::new_http1(stream);
        match settings.take() {
            Some(s) => s.apply_to_session(&mut session),
            None => session.set_keepalive(Some(KEEPALIVE.as_secs())),
        }
        if *shutdown.borrow() {
            session.set_keepalive(None);
        }
        let Some(reused) = app.process_new_http(session, shutdown).await else {
            return;
        };
        (stream, settings) = reused.consume();
    }
}

/// Waits until the connection has bytes to read: false when its peer closed it or it stays
/// silent through the keep-alive, or, once the server is stopping, through `drain` (the
/// connection is then closed).
async fn request_arrives(stream: &Stream, shutdown: &ShutdownWatch, drain: Duration) -> bool {
    // Every stream here is a `Conn`; another (none today) goes straight to its session.
    let Some(conn) = stream.as_any().downcast_ref::<Conn>() else {
        return true;
    };
    let mut stopping = shutdown.clone();
    // A peek, not `readable()`: tokio may report a fresh socket readable before any byte has
    // come (observed here for most new connections), and the session would then hold its head
    // buffer through the wait. 0 bytes: the peer closed.
    // The peek first: a request already there when the stop begins is still answered (with
    // `Connection: close`), as Pingora's server did; one that comes within the drain period
    // too, so that a client sending while the server stops is answered rather than cut.
    let mut first = [0u8; 1];
    let socket = conn.io.get_ref();
    let arrived = |peeked: Result<std::io::Result<usize>, _>| matches!(peeked, Ok(Ok(n)) if n > 0);
    let stopped = tokio::select! {
        biased;
        peeked = tokio::time::timeout(KEEPALIVE, socket.peek(&mut first)) => return arrived(peeked),
        stopped = stopping.wait_for(|stop| *stop) => stopped.is_ok(),
    };
    stopped && arrived(tokio::time::timeout(drain, socket.peek(&mut first)).await)
}

/// A client connection as Pingora's HTTP/1 session uses it: the socket behind a small write
/// buffer, reads straight from the socket (the session reads heads into its own buffer).
#[derive(Debug)]
pub struct Conn {
    io: BufWriter<TcpStream>,
    digest: Arc<SocketDigest>,
}

impl Conn {
    fn new(tcp: TcpStream, peer: SocketAddr) -> Conn {
        use std::os::fd::AsRawFd;
        let digest = SocketDigest::from_raw_fd(tcp.as_raw_fd());
        // Known from accept: no getpeername when the request asks who is calling.
        let _ = digest.peer_addr.set(Some(PeerAddr::Inet(peer)));
        Conn {
            io: BufWriter::with_capacity(WRITE_BUFFER, tcp),
            digest: Arc::new(digest),
        }
    }
}

impl AsyncRead for Conn {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<std::io::Result<()>> {
        Pin::new(&mut self.io).poll_read(cx, buf)
    }
}

impl AsyncWrite for Conn {
    fn poll_write(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<std::io::Result<usize>> {
        Pin::new(&mut self.io).poll_write(cx, buf)
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        Pin::new(&mut self.io).poll_flush(cx)
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        Pin::new(&mut self.io).poll_shutdown(cx)
    }
}

#[async_trait]
impl Shutdown for Conn {
    async fn shutdown(&mut self) {
        let _ = AsyncWriteExt::shutdown(&mut self.io).await;
    }
}

impl UniqueID for Conn {
    fn id(&self) -> UniqueIDType {
        use std::os::fd::AsRawFd;
        self.io.get_ref().as_raw_fd()
    }
}

impl Ssl for Conn {}

impl GetTimingDigest for Conn {
    fn get_timing_digest(&self) -> Vec<Option<TimingDigest>> {
        // Nothing reads it; empty costs no allocation per request.
        Vec::new()
    }
}

impl GetProxyDigest for Conn {
    fn get_proxy_digest(&self) -> Option<Arc<ProxyDigest>> {
        None
    }
}

impl GetSocketDigest for Conn {
    fn get_socket_digest(&self) -> Option<Arc<SocketDigest>> {
        Some(self.digest.clone())
    }
}

#[async_trait]
impl Peek for Conn {}

#[cfg(test)]
mod accept_tests;

#[cfg(test)]
mod tests {
    use super::layout;

    #[test]
    fn each_thread_gets_its_own_socket_of_the_address() {
        let l = layout("127.0.0.1:8080".parse().unwrap(), 3);
        assert_eq!(l.len(), 3);
        assert!(l.iter().all(|l| l.reuse_port && l.threads == 1));
    }

    #[test]
    fn one_thread_or_any_port_is_one_service() {
        let one = layout("127.0.0.1:8080".parse().unwrap(), 1);
        assert_eq!(one.len(), 1);
        assert!(!one[0].reuse_port);
        let any = layout("127.0.0.1:0".parse().unwrap(), 4);
        assert_eq!(any.len(), 1);
        assert_eq!((any[0].threads, any[0].reuse_port), (4, false));
    }
}
