//! Server assembly: the Pingora server with the proxy service, the metrics endpoint and the
//! background services.

use std::path::PathBuf;
use std::sync::Arc;

use async_trait::async_trait;
use http::Response;
use pingora::apps::http_app::ServeHttp;
use pingora::listeners::{L4BufferSettings, ListenerConfig};
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
    let runtime = boot.block_on(Runtime::build(config))?;
    drop(boot);
    let shared = Shared::new(runtime, config_path);

    // Every service gets its own runtime of `threads` workers unless it says otherwise; the
    // background services are light, so one thread each, and the proxy gets `server.threads`.
    // Fewer runtime threads also means fewer malloc arenas, i.e. lower resident memory.
    let conf = ServerConf {
        threads: 1,
        grace_period_seconds: Some(grace),
        graceful_shutdown_timeout_seconds: Some(grace),
        ..ServerConf::default()
    };
    let mut server = Server::new_with_opt_and_conf(Opt::default(), conf);
    server.bootstrap();

    let mut proxy = pingora::proxy::http_proxy_service(
        &server.configuration,
        Gateway {
            shared: shared.clone(),
        },
    );
    // Pingora puts a 64 KiB read buffer in front of every accepted connection; the HTTP/1
    // server reads heads into its own buffer and bodies in large reads anyway, so that buffer
    // only copied bytes a second time and was 64 KiB of every open client connection (the
    // largest part of a stream's memory). Reads go straight to the socket.
    proxy.add_listener(
        ListenerConfig::tcp(listen.to_string()).l4_buffer(L4BufferSettings::default().read(0)),
    );
    proxy.threads = Some(threads);
    server.add_service(proxy);

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
