//! The log: one line per event on stderr, as text or JSON (`[server] log_format`), with ANSI
//! colours only when stderr is a terminal (a log collector would store the escape codes).
//!
//! Lines are written off the request path: formatting happens on the thread that logs, and the
//! finished line goes through a bounded channel to one writer thread, so a slow stderr (a full
//! pipe, a stalled collector) never blocks a proxy thread. When the channel is full the line is
//! dropped and counted; the writer reports the count once it catches up.

use std::io::{IsTerminal, Write};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::mpsc::{sync_channel, Receiver, SyncSender, TryRecvError, TrySendError};
use std::sync::Arc;

use tracing_subscriber::fmt::MakeWriter;
use tracing_subscriber::EnvFilter;

use crate::config::server::LogFormat;

/// Lines that may wait for the writer: a burst of a few seconds at full request rate.
const QUEUE_LINES: usize = 16 * 1024;
/// While lines keep coming, the writer collects them this often instead of being woken per line.
const GATHER_EVERY: std::time::Duration = std::time::Duration::from_millis(10);

/// Where formatted lines go: the writer thread's queue.
#[derive(Clone)]
pub struct Sink {
    tx: SyncSender<Vec<u8>>,
    dropped: Arc<AtomicU64>,
}

/// One event's line, handed to the queue when the formatter is done with it (on drop).
pub struct Line {
    buf: Vec<u8>,
    sink: Sink,
}

impl Write for Line {
    fn write(&mut self, b: &[u8]) -> std::io::Result<usize> {
        self.buf.extend_from_slice(b);
        Ok(b.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

impl Drop for Line {
    fn drop(&mut self) {
        if self.buf.is_empty() {
            return;
        }
        let line = std::mem::take(&mut self.buf);
        if let Err(TrySendError::Full(_)) = self.sink.tx.try_send(line) {
            self.sink.dropped.fetch_add(1, Ordering::Relaxed);
        }
    }
}

impl<'a> MakeWriter<'a> for Sink {
    type Writer = Line;

    fn make_writer(&'a self) -> Line {
        Line {
            buf: Vec::with_capacity(256),
            sink: self.clone(),
        }
    }
}

/// Starts the writer thread and returns the sink that feeds it.
pub fn sink() -> Sink {
    let (tx, rx) = sync_channel(QUEUE_LINES);
    let dropped = Arc::new(AtomicU64::new(0));
    let counter = dropped.clone();
    let spawned = std::thread::Builder::new()
        .name("tollgate-log".into())
        .spawn(move || write_lines(rx, counter));
    if let Err(e) = spawned {
        eprintln!("tollgate: cannot start the log writer ({e}); log lines will be dropped");
    }
    Sink { tx, dropped }
}

fn write_lines(rx: Receiver<Vec<u8>>, dropped: Arc<AtomicU64>) {
    let mut out = std::io::BufWriter::with_capacity(64 * 1024, std::io::stderr());
    let poll = GATHER_EVERY;
    // Idle: blocked in `recv`, and the first line wakes the writer. Busy: the writer sleeps
    // `poll` between rounds, so a logging thread only queues its line (no futex wake per line;
    // a sender wakes the receiver only when it is blocked in `recv`).
    while let Ok(line) = rx.recv() {
        let _ = out.write_all(&line);
        loop {
            // Whatever else is queued goes out in the same write.
            while let Ok(more) = rx.try_recv() {
                let _ = out.write_all(&more);
            }
            let lost = dropped.swap(0, Ordering::Relaxed);
            if lost > 0 {
                let _ = writeln!(
                    out,
                    "tollgate: {lost} log line(s) dropped: stderr could not keep up"
                );
            }
            let _ = out.flush();
            std::thread::sleep(poll);
            match rx.try_recv() {
                Ok(more) => {
                    let _ = out.write_all(&more);
                }
                Err(TryRecvError::Empty) => break,
                Err(TryRecvError::Disconnected) => return,
            }
        }
    }
}

/// Installs the global subscriber: `TOLLGATE_LOG` filters (default `info`), `format` shapes.
pub fn init(format: LogFormat) {
    let filter = EnvFilter::try_from_env("TOLLGATE_LOG").unwrap_or_else(|_| EnvFilter::new("info"));
    let builder = tracing_subscriber::fmt()
        .with_writer(sink())
        .with_env_filter(filter);
    match format {
        LogFormat::Json => builder.json().flatten_event(true).init(),
        LogFormat::Text => builder.with_ansi(std::io::stderr().is_terminal()).init(),
    }
}
