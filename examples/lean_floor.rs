//! The lean floor for the benchmarks: a Pingora service that does what Tollgate's request path
//! does with Pingora and nothing else. It is served as Tollgate is (Pingora's HTTP server
//! application, one single-threaded service per thread accepting its own connections:
//! `tollgate::proxy::next_request`, `hand_back`, `tollgate::server::add_proxy_services` and
//! `tollgate::proxy::listen`) and answers every request after one
//! exchange with its one upstream
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

use std::sync::Arc;

use async_trait::async_trait;
use bytes::Bytes;
use pingora::apps::{HttpServerApp, ReusedHttpStream};
use pingora::http::ResponseHeader;
use pingora::prelude::*;
use pingora::protocols::http::ServerSession;
use pingora::server::configuration::{Opt, ServerConf};
use pingora::server::ShutdownWatch;
use tollgate::proxy::{hand_back, next_request};
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
impl HttpServerApp for Lean {
    async fn process_new_http(
        self: &Arc<Self>,
        mut session: ServerSession,
        shutdown: &ShutdownWatch,
    ) -> Option<ReusedHttpStream> {
        if !next_request(&mut session, shutdown).await {
            return None;
        }
        // As Tollgate: the request's future boxed once a request is there.
        Box::pin(self.answer(&mut session)).await.ok()?;
        hand_back(session).await
    }
}

impl Lean {
    async fn answer(&self, session: &mut ServerSession) -> Result<()> {
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
        session.write_response_header(Box::new(head)).await?;
        while let Some(piece) = reply.read_body().await? {
            session.write_response_body(piece, false).await?;
        }
        session.write_response_body(Bytes::new(), true).await?;
        reply.release(&self.connections, &self.peer, None);
        Ok(())
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
    let upstream_peer = HttpPeer::new(upstream.as_str(), false, String::new());
    let Ok(listen) = listen.parse() else {
        eprintln!("--listen: not an address: {listen}");
        std::process::exit(2);
    };
    // One Lean per service, each with its idle lists (they are per thread within one anyway).
    // The open-file limit raised and the connection bound derived from it, as Tollgate does.
    let max_connections = tollgate::proxy::capacity::default_max_connections(
        tollgate::proxy::capacity::raise_fd_limit(),
    );
    let layout = tollgate::proxy::listen::layout(listen, threads);
    let sockets = match tollgate::proxy::handover::open(listen, layout.len(), None, None) {
        Ok((s, _)) => s.proxy,
        Err(e) => {
            eprintln!("{e}");
            std::process::exit(1);
        }
    };
    let proxy = tollgate::server::ProxySockets {
        sockets,
        layout,
        max_connections,
        drain: std::time::Duration::ZERO,
        listening: Default::default(),
    };
    tollgate::server::add_proxy_services(&mut server, proxy, || Lean {
        peer: upstream_peer.clone(),
        host: upstream.clone(),
        connections: Connections::default(),
    });
    server.run_forever()
}
