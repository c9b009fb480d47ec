//! Server assembly: the Pingora server with the proxy service, the metrics endpoint and the
//! background services.

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use http::Response;
use pingora::apps::http_app::ServeHttp;
use pingora::apps::HttpServerApp;
use pingora::protocols::http::ServerSession;
use pingora::server::configuration::{Opt, ServerConf};
use pingora::server::Server;
use pingora::services::background::background_service;
use prometheus::{Encoder, TextEncoder};

use crate::background::counters::CounterService;
use crate::background::health::HealthService;
use crate::background::in_flight::InFlightService;
use crate::background::leases::LeaseService;
use crate::background::ledger::LedgerService;
use crate::background::limiter_sweep::LimiterSweepService;
use crate::background::names::NameService;
use crate::background::reaper::ReaperService;
use crate::background::reload::ReloadService;
use crate::background::tool_lists::ToolListService;
use crate::background::traces::TraceService;
use crate::background::unsettled::UnsettledService;
use crate::background::upgrades::UpgradeService;
use crate::background::webhooks::WebhookService;
use crate::config::Config;
use crate::proxy::capacity::Gate;
use crate::proxy::handover;
use crate::proxy::listen::{self, Listening, ProxyService};
use crate::proxy::Gateway;
use crate::runtime::{Runtime, Shared};

/// Builds the Pingora server with the proxy, metrics, health and reload services. `upgrade`:
/// take the listening sockets over from the instance running on `server.upgrade_socket`
/// (`proxy::handover`), which stops once this one accepts.
pub fn build_server(config: Config, config_path: PathBuf, upgrade: bool) -> Result<Server, String> {
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
    let upgrade_socket = config.server.upgrade_socket.clone();
    // The host's limit first: everything after may open files.
    let fd_limit = crate::proxy::capacity::raise_fd_limit();
    let max_connections = config
        .server
        .max_connections
        .unwrap_or_else(|| crate::proxy::capacity::default_max_connections(fd_limit));
    tracing::info!(max_connections, "client connections held at most");
    let runtime = boot.block_on(Runtime::build(config))?;
    drop(boot);
    // The sockets last: a start that fails before this point leaves a running instance alone.
    let layout = listen::layout(listen, threads);
    let from = if upgrade {
        upgrade_socket.as_deref()
    } else {
        None
    };
    if upgrade && from.is_none() {
        return Err("--upgrade needs server.upgrade_socket (it is off in this config)".into());
    }
    let (sockets, old) = handover::open(listen, layout.len(), metrics_listen, from)?;
    let copies = sockets.copies().map_err(|e| e.to_string())?;
    let shared = Shared::new(runtime, config_path);

    // Every service gets its own runtime of `threads` workers unless it says otherwise; the
    // background services are light, so one thread each, and the proxy is `server.threads`
    // services of one thread each (`listen::layout`).
    // Fewer runtime threads also means fewer malloc arenas, i.e. lower resident memory.
    let conf = ServerConf {
        threads: 1,
        grace_period_seconds: Some(grace),
        graceful_shutdown_timeout_seconds: Some(grace),
        ..ServerConf::default()
    };
    let mut server = Server::new_with_opt_and_conf(Opt::default(), conf);
    server.bootstrap();

    // Taking over from a running instance: accepting waits until this one is ready.
    let listening = Listening::new(old.is_none());
    let drain = drain_period(grace);
    let accept_loops = sockets.proxy.len() + usize::from(sockets.metrics.is_some());
    add_proxy_services(
        &mut server,
        ProxySockets {
            sockets: sockets.proxy,
            layout,
            max_connections,
            drain,
            listening: listening.clone(),
        },
        || Gateway {
            shared: shared.clone(),
        },
    );
    if let Some(socket) = sockets.metrics {
        server.add_service(ProxyService {
            name: "metrics".into(),
            sockets: vec![socket],
            threads: 1,
            app: Some(MetricsApp(shared.clone())),
            gate: Gate::new(METRICS_CONNECTIONS),
            drain,
            listening: listening.clone(),
        });
    }
    server.add_service(background_service(
        "upgrades",
        UpgradeService::new(
            shared.clone(),
            upgrade_socket,
            copies,
            old,
            listening,
            accept_loops,
        ),
    ));
    add_background_services(&mut server, shared);
    Ok(server)
}

/// Connections the metrics listener holds at once (scrapers, a health check or two).
const METRICS_CONNECTIONS: usize = 64;

/// How long a stopping instance waits for the next request on an open connection: long enough
/// for a client that sends request after request (its next one is milliseconds away), short
/// enough that idle connections close soon after the stop begins; half the grace period when
/// that is shorter, so that what comes is still served within the grace.
fn drain_period(grace_secs: u64) -> Duration {
    Duration::from_millis(grace_secs.saturating_mul(500)).min(Duration::from_secs(1))
}

fn add_background_services(server: &mut Server, shared: Arc<Shared>) {
    server.add_service(background_service(
        "health checks",
        HealthService(shared.clone()),
    ));
    server.add_service(background_service(
        "provider names",
        NameService(shared.clone()),
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
    server.add_service(background_service(
        "webhooks",
        WebhookService(shared.clone()),
    ));
    server.add_service(background_service(
        "request log",
        crate::request_log::writer::RequestLogService(shared.clone()),
    ));
    if shared.tracer.is_some() {
        server.add_service(background_service(
            "trace export",
            TraceService(shared.clone()),
        ));
    }
    server.add_service(background_service("ledger", LedgerService(shared)));
}

/// The proxy's listening sockets and what its services share.
pub struct ProxySockets {
    /// Bound or inherited (`proxy::handover::open`): at least one per service of `layout`.
    pub sockets: Vec<std::net::TcpListener>,
    pub layout: Vec<listen::ProxyListener>,
    pub max_connections: usize,
    pub drain: Duration,
    pub listening: Listening,
}

/// The proxy: `app` served by the services of `p.layout`, each accepting its own connections
/// (`proxy::listen`) on its socket; sockets beyond one per service (an old process with more
/// threads handed them over) are shared out among them. Shared with the lean floor
/// (`examples/lean_floor.rs`), which serves as Tollgate does.
pub fn add_proxy_services<A: HttpServerApp + Send + Sync + 'static>(
    server: &mut Server,
    p: ProxySockets,
    app: impl Fn() -> A,
) {
    let gate = Gate::new(p.max_connections);
    let n = p.layout.len().max(1);
    let mut shares: Vec<Vec<std::net::TcpListener>> = (0..n).map(|_| Vec::new()).collect();
    for (i, s) in p.sockets.into_iter().enumerate() {
        shares[i % n].push(s);
    }
    for (i, (l, sockets)) in p.layout.into_iter().zip(shares).enumerate() {
        server.add_service(ProxyService {
            name: format!("proxy {i}"),
            sockets,
            threads: l.threads,
            app: Some(app()),
            gate: gate.clone(),
            drain: p.drain,
            listening: p.listening.clone(),
        });
    }
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
