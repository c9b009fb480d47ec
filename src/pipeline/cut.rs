//! How a committed stream breaks ([`Broke`]) and the I/O of the relay that notices it:
//! reading the upstream with its silence limit and keep-alive comments, writing to the client
//! within its write limit. Shared by the stream's first leg (`stream.rs`) and a resumed
//! stream's continuations (`resume.rs`).

use std::time::Duration;

use crate::request::Session;
use bytes::Bytes;

use crate::upstream::wire::Response;

/// How an upstream stream broke. [`Broke::words`] is what the client is told; the `Display`
/// form, with what the upstream said, goes to the log.
pub enum Broke {
    Silent(Duration),
    Closed,
    ErrorEvent(String),
    Invalid(String),
    Read(String),
}

impl Broke {
    pub fn words(&self) -> String {
        match self {
            Broke::Silent(d) => format!("went silent for {}s", d.as_secs_f64()),
            Broke::Closed => "closed the stream before it finished".into(),
            Broke::ErrorEvent(_) => "sent an error event".into(),
            Broke::Invalid(_) => "sent an event that is not valid".into(),
            Broke::Read(_) => "dropped the connection".into(),
        }
    }
}

impl std::fmt::Display for Broke {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Broke::Silent(d) => write!(f, "upstream silent for {d:?}"),
            Broke::Closed => f.write_str("upstream closed the stream before it finished"),
            Broke::ErrorEvent(e) => write!(f, "upstream error event: {e}"),
            Broke::Invalid(e) => write!(f, "upstream sent an invalid event: {e}"),
            Broke::Read(e) => write!(f, "reading the upstream failed: {e}"),
        }
    }
}

impl Broke {
    /// The metrics label of why a stream broke.
    pub fn label(&self) -> &'static str {
        match self {
            Broke::Silent(_) => "stall",
            Broke::Closed => "closed",
            Broke::ErrorEvent(_) => "error_event",
            Broke::Invalid(_) => "invalid_event",
            Broke::Read(_) => "read",
        }
    }
}

/// Writes a piece of the stream to the client within `limit`; false when the client is gone or
/// stopped reading (its socket buffers full for that long). A client that never reads must not
/// pin the upstream connection and the credit hold forever.
pub async fn send(session: &mut Session, bytes: Bytes, end: bool, limit: Duration) -> bool {
    matches!(
        tokio::time::timeout(limit, session.write_response_body(bytes, end)).await,
        Ok(Ok(()))
    )
}

/// Reads the next upstream body piece, sending SSE comments to the client while the upstream
/// is quiet so that the client never sees `client_idle` of silence. `Ok(None)` is the end of
/// the upstream body; `Err` a read failure or `stream_chunk` of upstream silence.
pub async fn next_piece(
    up: &mut Response,
    session: Option<&mut Session>,
    silence: Duration,
    keepalive: Duration,
    client_gone: &mut bool,
) -> Result<Option<Bytes>, Broke> {
    let read = up.read_body();
    tokio::pin!(read);
    let limit = tokio::time::sleep(silence);
    tokio::pin!(limit);
    let Some(session) = session else {
        return tokio::select! {
            r = &mut read => r.map_err(|e| Broke::Read(e.to_string())),
            _ = &mut limit => Err(Broke::Silent(silence)),
        };
    };
    loop {
        let tick = tokio::time::sleep(keepalive);
        tokio::pin!(tick);
        tokio::select! {
            r = &mut read => return r.map_err(|e| Broke::Read(e.to_string())),
            _ = &mut limit => return Err(Broke::Silent(silence)),
            _ = &mut tick => {
                let comment = Bytes::from_static(b": keep-alive\n\n");
                if !*client_gone && !send(session, comment, false, keepalive).await {
                    *client_gone = true;
                }
            }
        }
    }
}
