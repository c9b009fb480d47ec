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
//! 60-second keep-alive; no new connection accepted, and idle ones closed, once the server is
//! stopping. Tollgate serves no TLS and no HTTP/2 on this listener (neither did it before).

use std::net::SocketAddr;
use std::pin::Pin;
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
use tokio::net::{TcpListener, TcpSocket, TcpStream};

use super::capacity::Gate;

/// How long a connection may wait for its next request (Pingora's default keep-alive).
const KEEPALIVE: Duration = Duration::from_secs(60);
/// The listen backlog (Pingora's).
const BACKLOG: u32 = 65_535;
/// The write buffer in front of each client socket: a response's head and a short body leave
/// in one `sendto` (Pingora's default L4 write buffer).
const WRITE_BUFFER: usize = 1460;

/// One proxy service: `threads` threads serving `app` on `addr`, its own socket (joined to the
/// address's other proxy services with `SO_REUSEPORT` when `reuse_port`).
pub struct ProxyService<A> {
    pub name: String,
    pub addr: SocketAddr,
    pub reuse_port: bool,
    pub threads: usize,
    pub app: Option<A>,
    /// The connection bound this listener's accept loops share.
    pub gate: Gate,
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
        let listener = match bind(self.addr, self.reuse_port) {
            Ok(l) => l,
            Err(e) => {
                // Nothing can be served: stop the process as a failed start would. Straight to
                // stderr: the log's writer thread would not get to write it before the exit.
                eprintln!("tollgate: cannot listen on {}: {e}", self.addr);
                std::process::exit(1);
            }
        };
        accept_loop(Arc::new(app), listener, self.gate.clone(), shutdown).await;
    }

    fn name(&self) -> &str {
        &self.name
    }

    fn threads(&self) -> Option<usize> {
        Some(self.threads)
    }
}

fn bind(addr: SocketAddr, reuse_port: bool) -> std::io::Result<TcpListener> {
    let socket = match addr {
        SocketAddr::V4(_) => TcpSocket::new_v4()?,
        SocketAddr::V6(_) => TcpSocket::new_v6()?,
    };
    socket.set_reuseaddr(true)?;
    if reuse_port {
        socket.set_reuseport(true)?;
    }
    socket.bind(addr)?;
    socket.listen(BACKLOG)
}

/// How long the accept loop pauses when the process is out of file descriptors: accept would
/// fail again at once, so it lets some connections close (no spin, no error storm).
const OUT_OF_FDS_PAUSE: Duration = Duration::from_millis(250);

async fn accept_loop<A: HttpServerApp + Send + Sync + 'static>(
    app: Arc<A>,
    listener: TcpListener,
    gate: Gate,
    shutdown: ShutdownWatch,
) {
    let mut stopping = shutdown.clone();
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
                tokio::spawn(connection(
                    app.clone(),
                    tcp,
                    peer,
                    shutdown.clone(),
                    gate.clone(),
                ));
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
    shutdown: ShutdownWatch,
    gate: Gate,
) {
    // Its place among the connections held, kept until it closes (taken at once but for a
    // race between two accept loops at the bound).
    let Some(_place) = gate.admit().await else {
        return;
    };
    if tcp.set_nodelay(true).is_err() {
        return;
    }
    let mut stream: Stream = Box::new(Conn::new(tcp, peer));
    let mut settings: Option<HttpPersistentSettings> = None;
    loop {
        if !request_arrives(&stream, &shutdown).await {
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
        let Some(reused) = app.process_new_http(session, &shutdown).await else {
            return;
        };
        (stream, settings) = reused.consume();
    }
}

/// Waits until the connection has bytes to read: false when its peer closed it, it stays silent
/// through the keep-alive or the server is stopping (the connection is then closed).
async fn request_arrives(stream: &Stream, shutdown: &ShutdownWatch) -> bool {
    // Every stream here is a `Conn`; another (none today) goes straight to its session.
    let Some(conn) = stream.as_any().downcast_ref::<Conn>() else {
        return true;
    };
    let mut stopping = shutdown.clone();
    // A peek, not `readable()`: tokio may report a fresh socket readable before any byte has
    // come (observed here for most new connections), and the session would then hold its head
    // buffer through the wait. 0 bytes: the peer closed.
    // The peek first: a request already there when the stop begins is still answered (with
    // `Connection: close`), as Pingora's server did; a silent connection is closed.
    let mut first = [0u8; 1];
    tokio::select! {
        biased;
        peeked = tokio::time::timeout(KEEPALIVE, conn.io.get_ref().peek(&mut first)) => {
            matches!(peeked, Ok(Ok(n)) if n > 0)
        }
        _ = stopping.wait_for(|stop| *stop) => false,
    }
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
