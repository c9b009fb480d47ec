//! A round-robin TCP front for two or more gateway instances: each new connection goes to the
//! next instance in turn, as a load balancer without stickiness sends it. Bound first, so that
//! the instances' configuration can name its address (`[mcp] allowed_hosts`).

use std::net::SocketAddr;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

use tokio::net::{TcpListener, TcpStream};

pub struct RoundRobin {
    pub addr: SocketAddr,
    listener: Option<TcpListener>,
    /// Connections sent to each backend.
    counts: Arc<Vec<AtomicUsize>>,
}

impl RoundRobin {
    pub async fn bind() -> RoundRobin {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        RoundRobin {
            addr: listener.local_addr().unwrap(),
            listener: Some(listener),
            counts: Arc::new(Vec::new()),
        }
    }

    /// Starts sending connections to `backends`, in turn.
    pub fn serve(&mut self, backends: Vec<SocketAddr>) {
        let listener = self.listener.take().expect("serve once");
        self.counts = Arc::new(backends.iter().map(|_| AtomicUsize::new(0)).collect());
        let counts = self.counts.clone();
        tokio::spawn(async move {
            let mut next = 0usize;
            while let Ok((mut inbound, _)) = listener.accept().await {
                let i = next % backends.len();
                next += 1;
                counts[i].fetch_add(1, Ordering::SeqCst);
                let to = backends[i];
                tokio::spawn(async move {
                    if let Ok(mut outbound) = TcpStream::connect(to).await {
                        let _ = tokio::io::copy_bidirectional(&mut inbound, &mut outbound).await;
                    }
                });
            }
        });
    }

    /// Connections sent to each backend so far.
    pub fn counts(&self) -> Vec<usize> {
        self.counts
            .iter()
            .map(|c| c.load(Ordering::SeqCst))
            .collect()
    }
}
