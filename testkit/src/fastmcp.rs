//! A tool server built with the official `mcp` Python SDK's FastMCP (`python/fastmcp_tools.py`),
//! stateful with SSE replies or stateless with JSON ones, or with the 2.x SDK's MCPServer
//! (`python/mcp2_tools.py`, both protocol eras): a server nobody here wrote, for the
//! interoperability tests. Needs a Python with `mcp` (1.x, or 2.x for [`FastMcpServer::sdk2`]);
//! the process dies with the value.

use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use crate::gateway::free_port;

pub struct FastMcpServer {
    child: Child,
    pub port: u16,
}

impl FastMcpServer {
    /// Starts the server and waits until it accepts connections.
    pub async fn start(python: &str, stateless: bool) -> FastMcpServer {
        let mode = if stateless { "stateless" } else { "stateful" };
        Self::run(python, "fastmcp_tools.py", &[mode]).await
    }

    /// The 2.x SDK's server (`python` must have `mcp` 2.x): tool `echo`, both protocol eras.
    pub async fn sdk2(python: &str) -> FastMcpServer {
        Self::run(python, "mcp2_tools.py", &[]).await
    }

    async fn run(python: &str, script: &str, args: &[&str]) -> FastMcpServer {
        let port = free_port();
        let script = format!("{}/python/{script}", env!("CARGO_MANIFEST_DIR"));
        let child = Command::new(python)
            .arg(script)
            .arg(port.to_string())
            .args(args)
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("start the FastMCP tool server");
        let start = Instant::now();
        while tokio::net::TcpStream::connect(("127.0.0.1", port))
            .await
            .is_err()
        {
            assert!(
                start.elapsed() < Duration::from_secs(30),
                "FastMCP server did not start"
            );
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        FastMcpServer { child, port }
    }

    pub fn url(&self) -> String {
        format!("http://127.0.0.1:{}/mcp", self.port)
    }
}

impl Drop for FastMcpServer {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}
