//! The fakes' accept loop: every fake binds, then serves each connection in its own task with
//! `TCP_NODELAY` (replies are written in pieces; Nagle would hold them for a delayed ACK).

use std::future::Future;
use std::net::SocketAddr;
use std::sync::Arc;

use tokio::net::{TcpListener, TcpStream};

/// Binds `addr` and serves every connection with `serve(socket, state)` until the test's
/// runtime ends; returns the bound address.
pub async fn serve_fake<S, F, Fut>(addr: &str, state: Arc<S>, serve: F) -> SocketAddr
where
    S: Send + Sync + 'static,
    F: Fn(TcpStream, Arc<S>) -> Fut + Send + Sync + 'static,
    Fut: Future<Output = std::io::Result<()>> + Send + 'static,
{
    let listener = TcpListener::bind(addr).await.expect("bind fake");
    let bound = listener.local_addr().expect("addr");
    tokio::spawn(async move {
        while let Ok((sock, _)) = listener.accept().await {
            let _ = sock.set_nodelay(true);
            // The connection task ends with its connection; its handle is not needed.
            drop(tokio::spawn(serve(sock, state.clone())));
        }
    });
    bound
}
