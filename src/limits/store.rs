//! What the counters of key budgets, tokens per minute and requests in flight
//! ([`budgets`](super::budgets), [`tokens`](super::tokens), [`in_flight`](super::in_flight))
//! reach their store through: Redis when configured (within the store timeout), else none
//! (in-process maps).

use std::time::Duration;

use redis::aio::ConnectionManager;

use super::in_redis::RedisCounter;

/// The shared store, as one request sees it.
#[derive(Clone, Copy)]
pub struct Counters<'a> {
    /// `None`: no Redis configured, counters in-process.
    pub redis: Option<&'a RedisCounter>,
    /// How long one call to Redis may take.
    pub timeout: Duration,
}

/// The store could not answer.
#[derive(Debug)]
pub struct Unavailable(pub String);

impl Counters<'_> {
    /// The Redis connection and key prefix; `None` without Redis (in-process counters).
    pub fn redis(&self) -> Result<Option<(ConnectionManager, String)>, Unavailable> {
        let Some(r) = self.redis else {
            return Ok(None);
        };
        match r.conn() {
            Some(c) => Ok(Some((c, r.prefix().to_owned()))),
            None => Err(Unavailable("Redis is not connected yet".into())),
        }
    }

    /// A Redis call within the store timeout.
    pub async fn timed<T>(
        &self,
        call: impl std::future::Future<Output = redis::RedisResult<T>>,
    ) -> Result<T, Unavailable> {
        match tokio::time::timeout(self.timeout, call).await {
            Ok(Ok(v)) => Ok(v),
            Ok(Err(e)) => Err(Unavailable(e.to_string())),
            Err(_) => Err(Unavailable(format!("no answer within {:?}", self.timeout))),
        }
    }
}
