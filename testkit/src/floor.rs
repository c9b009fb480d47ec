//! The floor for one hop on the framework the gateway must use: Pingora's own reverse proxy
//! with no logic at all (every request to one upstream, nothing read, checked or written), for
//! the benchmarks' "pingora" rows beside nginx. What Tollgate costs above this row is ours;
//! what this row costs above nginx is the framework's.

use async_trait::async_trait;
use pingora::prelude::*;
use pingora::proxy::{ProxyHttp, Session};
use pingora::server::configuration::{Opt, ServerConf};

struct Floor {
    upstream: String,
}

#[async_trait]
impl ProxyHttp for Floor {
    type CTX = ();

    fn new_ctx(&self) {}

    async fn upstream_peer(&self, _session: &mut Session, _ctx: &mut ()) -> Result<Box<HttpPeer>> {
        Ok(Box::new(HttpPeer::new(
            self.upstream.as_str(),
            false,
            String::new(),
        )))
    }
}

/// Serves `listen` on `threads` worker threads, proxying to `upstream` (host:port) until killed.
pub fn run(listen: &str, upstream: &str, threads: usize) -> ! {
    let conf = ServerConf {
        threads,
        grace_period_seconds: Some(0),
        graceful_shutdown_timeout_seconds: Some(0),
        ..ServerConf::default()
    };
    let mut server = Server::new_with_opt_and_conf(Opt::default(), conf);
    server.bootstrap();
    let mut proxy = pingora::proxy::http_proxy_service(
        &server.configuration,
        Floor {
            upstream: upstream.to_owned(),
        },
    );
    proxy.add_tcp(listen);
    server.add_service(proxy);
    server.run_forever()
}
