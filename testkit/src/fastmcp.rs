//! A tool server built with the official `mcp` Python SDK's FastMCP (`python/fastmcp_tools.py`),
//! stateful with SSE replies or stateless with JSON ones: a server nobody here wrote, for the
//! interoperability tests. Needs a Python with `mcp` (1.x); the process dies with the value.

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
        let port = free_port();
        let script = concat!(env!("CARGO_MANIFEST_DIR"), "/python/fastmcp_tools.py");
        let mode = if stateless { "stateless" } else { "stateful" };
        let child = Command::new(python)
            .arg(script)
            .arg(port.to_string())
            .arg(mode)
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
