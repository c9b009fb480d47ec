//! Server assembly: the Pingora server with the proxy service, the metrics endpoint and the
//! background services.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::Arc;

use async_trait::async_trait;
use http::Response;
use pingora::apps::http_app::ServeHttp;
use pingora::apps::HttpServerApp;
use pingora::protocols::http::ServerSession;
use pingora::server::configuration::{Opt, ServerConf};
use pingora::server::Server;
use pingora::services::background::background_service;
use pingora::services::listening::Service;
use prometheus::{Encoder, TextEncoder};

use crate::background::counters::CounterService;
use crate::background::health::HealthService;
use crate::background::in_flight::InFlightService;
use crate::background::leases::LeaseService;
use crate::background::ledger::LedgerService;
use crate::background::limiter_sweep::LimiterSweepService;
use crate::background::reaper::ReaperService;
use crate::background::reload::ReloadService;
use crate::background::tool_lists::ToolListService;
use crate::background::unsettled::UnsettledService;
use crate::config::Config;
use crate::proxy::listen::ProxyService;
use crate::proxy::Gateway;
use crate::runtime::{Runtime, Shared};

/// Builds the Pingora server with the proxy, metrics, health and reload services.
pub fn build_server(config: Config, config_path: PathBuf) -> Result<Server, String> {
    // Name resolution at start needs a runtime; it is thrown away afterwards and holds no
    // pools (those are created lazily inside Pingora's runtimes).
    let boot = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map_err(|e| e.to_string())?;
    let listen = config.server.listen;
    let metrics_listen = config.server.metrics_listen;
    let threads = config.server.threads;
    let grace = config.server.graceful_shutdown_secs;
    // The host's limit first: everything after may open files.
    let fd_limit = crate::proxy::capacity::raise_fd_limit();
    let max_connections = config
        .server
        .max_connections
        .unwrap_or_else(|| crate::proxy::capacity::default_max_connections(fd_limit));
    tracing::info!(max_connections, "client connections held at most");
    let runtime = boot.block_on(Runtime::build(config))?;
    drop(boot);
    let shared = Shared::new(runtime, config_path);

    // Every service gets its own runtime of `threads` workers unless it says otherwise; the
    // background services are light, so one thread each, and the proxy is `server.threads`
    // services of one thread each (`proxy_listeners`).
    // Fewer runtime threads also means fewer malloc arenas, i.e. lower resident memory.
    let conf = ServerConf {
        threads: 1,
        grace_period_seconds: Some(grace),
        graceful_shutdown_timeout_seconds: Some(grace),
        ..ServerConf::default()
    };
    let mut server = Server::new_with_opt_and_conf(Opt::default(), conf);
    server.bootstrap();

    add_proxy_services(&mut server, listen, threads, max_connections, || Gateway {
        shared: shared.clone(),
    });

    if let Some(addr) = metrics_listen {
        let mut metrics = Service::new("metrics".to_string(), MetricsApp(shared.clone()));
        metrics.add_tcp(&addr.to_string());
        metrics.threads = Some(1);
        server.add_service(metrics);
    }
    server.add_service(background_service(
        "health checks",
        HealthService(shared.clone()),
    ));
    server.add_service(background_service(
        "config reload",
        ReloadService(shared.clone()),
    ));
    server.add_service(background_service(
        "counters",
        CounterService(shared.clone()),
    ));
    server.add_service(background_service(
        "credit leases",
        LeaseService(shared.clone()),
    ));
    server.add_service(background_service(
        "rate-limit sweep",
        LimiterSweepService(shared.clone()),
    ));
    server.add_service(background_service(
        "in-flight slots",
        InFlightService(shared.clone()),
    ));
    server.add_service(background_service(
        "tool lists",
        ToolListService(shared.clone()),
    ));
    server.add_service(background_service(
        "settlement retries",
        UnsettledService(shared.clone()),
    ));
    server.add_service(background_service(
        "hold reaper",
        ReaperService(shared.clone()),
    ));
    server.add_service(background_service("ledger", LedgerService(shared)));
    Ok(server)
}

/// The proxy: `app` served on `listen` by `threads` threads, laid out by [`proxy_listeners`],
/// each service accepting its own connections (`proxy::listen`). Shared with the lean floor
/// (`examples/lean_floor.rs`), which serves as Tollgate does.
pub fn add_proxy_services<A: HttpServerApp + Send + Sync + 'static>(
    server: &mut Server,
    listen: SocketAddr,
    threads: usize,
    max_connections: usize,
    app: impl Fn() -> A,
) {
    let gate = crate::proxy::capacity::Gate::new(max_connections);
    for (i, l) in proxy_listeners(listen, threads).into_iter().enumerate() {
        server.add_service(ProxyService {
            name: format!("proxy {i}"),
            addr: listen,
            reuse_port: l.reuse_port,
            threads: l.threads,
            app: Some(app()),
            gate: gate.clone(),
        });
    }
}

/// One proxy service's listener.
#[derive(Debug, PartialEq)]
struct ProxyListener {
    reuse_port: bool,
    threads: usize,
}

/// The proxy's listeners: one single-threaded service per thread, each on its own
/// `SO_REUSEPORT` socket of `listen`, so the kernel spreads connections over the threads as
/// it does over nginx's workers and a connection's socket, its upstream connections
/// (`upstream::idle` keeps idle lists per thread) and its task stay on one thread: no
/// cross-thread wake-ups, no work stealing (README, Performance). Port 0 (any free port) would
/// give each its own port, so it stays one service of `threads` workers.
fn proxy_listeners(listen: SocketAddr, threads: usize) -> Vec<ProxyListener> {
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

/// The `/metrics` endpoint on `server.metrics_listen`.
pub struct MetricsApp(pub Arc<Shared>);

#[async_trait]
impl ServeHttp for MetricsApp {
    async fn response(&self, _session: &mut ServerSession) -> Response<Vec<u8>> {
        let rt = self.0.runtime.load();
        for (name, pool) in &rt.pools {
            for (ep, ok) in pool.endpoint_health() {
                self.0
                    .metrics
                    .upstream_healthy
                    .with_label_values(&[name, &ep])
                    .set(ok as i64);
            }
        }
        let mut buf = Vec::new();
        let encoded = TextEncoder::new().encode(&self.0.metrics.registry.gather(), &mut buf);
        let status = if encoded.is_ok() { 200 } else { 500 };
        Response::builder()
            .status(status)
            .header("Content-Type", "text/plain; version=0.0.4")
            .header("Content-Length", buf.len())
            .body(buf)
            .unwrap_or_default()
    }
}

#[cfg(test)]
mod tests {
    use super::proxy_listeners;

    #[test]
    fn each_thread_gets_its_own_socket_of_the_address() {
        let l = proxy_listeners("127.0.0.1:8080".parse().unwrap(), 3);
        assert_eq!(l.len(), 3);
        assert!(l.iter().all(|l| l.reuse_port && l.threads == 1));
    }

    #[test]
    fn one_thread_or_any_port_is_one_service() {
        let one = proxy_listeners("127.0.0.1:8080".parse().unwrap(), 1);
        assert_eq!(one.len(), 1);
        assert!(!one[0].reuse_port);
        let any = proxy_listeners("127.0.0.1:0".parse().unwrap(), 4);
        assert_eq!(any.len(), 1);
        assert_eq!((any[0].threads, any[0].reuse_port), (4, false));
    }
}
