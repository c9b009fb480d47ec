//! [`Collector`]: an OpenTelemetry collector for the trace tests (`python/otlp_collector.py`),
//! which decodes every OTLP/HTTP export with the official `opentelemetry-proto` package and
//! writes its spans as JSON lines: up, hanging (accepts, never answers), or down (a port
//! nothing listens on). Needs a Python with `opentelemetry-proto`
//! ([`crate::services::python_with`] and [`OTLP_IMPORT`]); the process dies with the value.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::sync::Arc;
use std::time::{Duration, Instant};

use serde_json::Value;
use tokio::io::AsyncWriteExt;
use tokio::net::TcpStream;

use crate::gateway::{free_port, temp_dir};

/// The import a Python needs to run the collector.
pub const OTLP_IMPORT: &str =
    "from opentelemetry.proto.collector.trace.v1 import trace_service_pb2";

/// How the collector behaves.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CollectorMode {
    Up,
    /// Accepts each export and never answers.
    Hanging,
    /// Nothing listens on its port.
    Down,
}

pub struct Collector {
    child: Option<Child>,
    pub port: u16,
    out: PathBuf,
}

impl Collector {
    /// Starts it (for [`CollectorMode::Down`], only picks a port) and waits until it accepts.
    pub async fn start(python: &str, mode: CollectorMode) -> Collector {
        let port = free_port();
        let out = temp_dir().join("spans.jsonl");
        let arg = match mode {
            CollectorMode::Hanging => "hanging",
            _ => "up",
        };
        let child = (mode != CollectorMode::Down).then(|| {
            Command::new(python)
                .arg(format!(
                    "{}/python/otlp_collector.py",
                    env!("CARGO_MANIFEST_DIR")
                ))
                .arg(port.to_string())
                .arg(&out)
                .arg(arg)
                .stdout(Stdio::null())
                .stderr(Stdio::inherit())
                .spawn()
                .expect("start the test collector")
        });
        if child.is_some() {
            let start = Instant::now();
            while tokio::net::TcpStream::connect(("127.0.0.1", port))
                .await
                .is_err()
            {
                assert!(
                    start.elapsed() < Duration::from_secs(20),
                    "the collector did not start"
                );
                tokio::time::sleep(Duration::from_millis(50)).await;
            }
        }
        Collector { child, port, out }
    }

    /// The `[telemetry] otlp_endpoint` that exports to it.
    pub fn endpoint(&self) -> String {
        format!("http://127.0.0.1:{}/v1/traces", self.port)
    }

    /// Every span received so far (and an `{"error": …}` line for an export that did not
    /// decode).
    pub fn spans(&self) -> Vec<Value> {
        std::fs::read_to_string(&self.out)
            .unwrap_or_default()
            .lines()
            .map(|l| serde_json::from_str(l).expect("a JSON line"))
            .collect()
    }

    /// Every export's body as it arrived, one after the other.
    pub fn raw(&self) -> Vec<u8> {
        std::fs::read(self.out.with_extension("jsonl.raw")).unwrap_or_default()
    }

    /// Waits until `pred` holds of the spans received (or `within` passes), and returns them.
    pub async fn wait_for(&self, within: Duration, pred: impl Fn(&[Value]) -> bool) -> Vec<Value> {
        let start = Instant::now();
        loop {
            let spans = self.spans();
            if pred(&spans) || start.elapsed() > within {
                return spans;
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }
}

impl Drop for Collector {
    fn drop(&mut self) {
        if let Some(c) = &mut self.child {
            let _ = c.kill();
            let _ = c.wait();
        }
    }
}

/// A sink for the benchmarks' traces: reads each OTLP/HTTP export and answers 200 with an empty
/// `ExportTraceServiceResponse`, keeping nothing (a collector that costs the run nothing).
pub async fn serve_sink(listen: &str) -> SocketAddr {
    crate::accept::serve_fake(listen, Arc::new(()), sink_conn).await
}

async fn sink_conn(mut sock: TcpStream, _: Arc<()>) -> std::io::Result<()> {
    let mut buf = Vec::new();
    while crate::openai::read_request(&mut sock, &mut buf)
        .await
        .is_some()
    {
        sock.write_all(
            b"HTTP/1.1 200 OK\r\nContent-Type: application/x-protobuf\r\nContent-Length: 0\r\n\r\n",
        )
        .await?;
    }
    Ok(())
}
