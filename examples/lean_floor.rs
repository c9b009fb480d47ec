//! The lean floor for the benchmarks: a Pingora service that does what Tollgate's request path
//! does with Pingora and nothing else. It answers every request from `request_filter` (as
//! Tollgate does; `upstream_peer` is never reached) after one exchange with its one upstream
//! through Tollgate's own upstream code: the request written in one piece
//! (`upstream::head`), sent on an idle connection from Tollgate's idle lists (`upstream::idle`,
//! `upstream::wire`), the reply's head read and its body passed on piece by piece as it
//! arrives (so a stream's chunks go out as they come). The listener is set up as Tollgate's.
//! No key, no limit, no hold, no usage row, no access log: what Tollgate costs above this is its
//! own logic; what this costs above nginx is the framework's (and the upstream code's).
//!
//! `cargo build --release --example lean_floor`, then
//! `lean_floor --listen ADDR --upstream HOST:PORT [--threads N]`.
#![forbid(unsafe_code)]

use async_trait::async_trait;
use bytes::Bytes;
use pingora::http::ResponseHeader;
use pingora::listeners::{L4BufferSettings, ListenerConfig};
use pingora::prelude::*;
use pingora::proxy::{ProxyHttp, Session};
use pingora::server::configuration::{Opt, ServerConf};
use tollgate::upstream::head::Request;
use tollgate::upstream::idle::Connections;
use tollgate::upstream::wire;

struct Lean {
    peer: HttpPeer,
    host: String,
    connections: Connections,
}

fn failed(e: wire::Failure) -> Box<Error> {
    Error::explain(ErrorType::ConnectError, e.to_string())
}

#[async_trait]
impl ProxyHttp for Lean {
    type CTX = ();

    fn new_ctx(&self) {}

    /// As Tollgate: no downstream modules (Pingora's default is a disabled compression module).
    fn init_downstream_modules(&self, _modules: &mut pingora::modules::http::HttpModules) {}

    async fn upstream_peer(&self, _session: &mut Session, _ctx: &mut ()) -> Result<Box<HttpPeer>> {
        Err(Error::explain(
            ErrorType::InternalError,
            "every request is answered in request_filter",
        ))
    }

    async fn request_filter(&self, session: &mut Session, _ctx: &mut ()) -> Result<bool> {
        let mut body = Vec::new();
        while let Some(piece) = session.read_request_body().await? {
            body.extend_from_slice(&piece);
        }
        let req = session.req_header();
        let path = req.uri.path_and_query().map_or("/", |p| p.as_str());
        let content_type = req
            .headers
            .get("content-type")
            .and_then(|v| v.to_str().ok())
            .unwrap_or("application/json");
        let wire_request = Request::new(req.method.as_str(), path)
            .and_then(|r| r.header("Host", &self.host))
            .and_then(|r| r.header("Content-Type", content_type))?
            .body(&body);
        let mut reply = wire::exchange(&self.connections, &self.peer, &wire_request)
            .await
            .map_err(failed)?;
        let mut head = ResponseHeader::build_no_case(reply.status(), Some(3))?;
        if let Some(ct) = reply.header("content-type") {
            head.insert_header("Content-Type", ct.to_owned())?;
        }
        match reply.header("content-length") {
            Some(len) => head.insert_header("Content-Length", len.to_owned())?,
            None => head.insert_header("Transfer-Encoding", "chunked")?,
        }
        session.write_response_header(Box::new(head), false).await?;
        while let Some(piece) = reply.read_body().await? {
            session.write_response_body(Some(piece), false).await?;
        }
        session
            .write_response_body(Some(Bytes::new()), true)
            .await?;
        reply.release(&self.connections, &self.peer, None);
        Ok(true)
    }
}

fn arg(args: &[String], name: &str) -> Option<String> {
    args.iter()
        .position(|a| a == name)
        .and_then(|i| args.get(i + 1).cloned())
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let (Some(listen), Some(upstream)) = (arg(&args, "--listen"), arg(&args, "--upstream")) else {
        eprintln!("usage: lean_floor --listen ADDR --upstream HOST:PORT [--threads N]");
        std::process::exit(2);
    };
    let threads = arg(&args, "--threads")
        .and_then(|t| t.parse().ok())
        .unwrap_or(2);
    let conf = ServerConf {
        threads: 1,
        grace_period_seconds: Some(0),
        graceful_shutdown_timeout_seconds: Some(0),
        ..ServerConf::default()
    };
    let mut server = Server::new_with_opt_and_conf(Opt::default(), conf);
    server.bootstrap();
    let lean = Lean {
        peer: HttpPeer::new(upstream.as_str(), false, String::new()),
        host: upstream.clone(),
        connections: Connections::default(),
    };
    let mut service = pingora::proxy::http_proxy_service(&server.configuration, lean);
    service
        .add_listener(ListenerConfig::tcp(listen).l4_buffer(L4BufferSettings::default().read(0)));
    service.threads = Some(threads);
    server.add_service(service);
    server.run_forever()
}
