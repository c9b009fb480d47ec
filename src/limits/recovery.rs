//! Bringing Redis's windows up to date after an outage (DESIGN.md, Rules: Faults: "After Redis
//! returns, the requests admitted in-process during the outage are counted into its windows").
//!
//! Runs in the counter service's background loop, never on a request: while the limiter is
//! degraded (a Redis call failed), every sweep asks Redis for its `run_id`. Once it answers,
//! the admissions this instance made in-process are written into the sorted sets with their
//! own members and scores; when the `run_id` changed (a restart or failover that may have lost
//! the counts), every admission of this instance still in a window is written instead. Then a
//! short handoff writes what was admitted meanwhile while checks wait, so the first check
//! decided in Redis again already sees every admission. A healthy instance asks for the
//! `run_id` once a second, so a restart between two of its requests is noticed as well.

use redis::aio::ConnectionManager;

use super::in_redis::RedisCounter;
use super::shadow::{Entry, Health, Item, Member};

/// Sorted-set members per pipeline when writing admissions back.
const PIPELINE_MEMBERS: usize = 4096;

impl RedisCounter {
    /// Background, every sweep: notices a Redis that restarted, and brings a degraded limiter
    /// back to Redis once it answers (see the module's comment).
    pub(super) async fn recover(&self, conn: &mut ConnectionManager) {
        let shadow = &self.shadow;
        let degraded = shadow.health() != Health::Healthy;
        if !degraded && !self.recovery.probe_due() {
            return;
        }
        let failures = shadow.failures();
        let run = match run_id(conn).await {
            Ok(r) => r,
            Err(e) => {
                if !degraded {
                    shadow.failed();
                    tracing::warn!("rate-limit store unavailable: {e}");
                }
                return;
            }
        };
        // Looked at again: a check may have failed while INFO waited for the connection, and
        // a run_id read then must not become the baseline of a Redis that lost our counts.
        let degraded = shadow.health() != Health::Healthy || shadow.failures() != failures;
        let known = self.recovery.known();
        // A Redis never seen before a failure may hold nothing of ours: write everything.
        let lost = known.as_ref().map_or(degraded, |k| *k != run);
        if !degraded && !lost {
            if known.is_none() {
                self.recovery.set_known(run);
            }
            return;
        }
        let failures = if shadow.health() == Health::Healthy {
            tracing::warn!("rate-limit store restarted: writing this instance's counts back");
            shadow.failed();
            shadow.failures()
        } else {
            failures
        };
        if lost {
            // Their unused admissions went with the old server; the used ones are recorded.
            self.drop_reservations();
        }
        let now = crate::clock::now_ms();
        let bulk = shadow.take(lost, now);
        let mut written = match self.write_back(conn, &bulk, now, None).await {
            Ok(n) => n,
            Err(e) => {
                if !lost {
                    shadow.put_back(bulk);
                }
                tracing::warn!("rate-limit store: could not write counts back yet: {e}");
                return;
            }
        };
        self.recovery.set_known(run.clone());
        // Checks wait from here until the last in-process admissions are in Redis.
        let Some(last) = shadow.begin_handoff(failures, now) else {
            return;
        };
        // Checked in the same pipeline: every write went to the server whose run_id decided
        // what to write (the connection may have been replaced meanwhile).
        let server = (!run.is_empty()).then_some(run.as_str());
        let failed = match self.write_back(conn, &last, now, server).await {
            Ok(n) => {
                written += n;
                None
            }
            Err(e) => {
                tracing::warn!("rate-limit store: could not write counts back yet: {e}");
                Some(last)
            }
        };
        if shadow.end_handoff(failures, failed) {
            tracing::info!(
                written,
                restarted = lost,
                "rate-limit counters back on redis, with this instance's admissions"
            );
        }
    }

    /// ZADDs the admissions into each of their ident's windows that still counts them, and
    /// with `server`, fails unless the last pipeline ran on the server of that run_id; returns
    /// how many admissions were written.
    async fn write_back(
        &self,
        conn: &mut ConnectionManager,
        items: &[Item],
        now: i64,
        server: Option<&str>,
    ) -> redis::RedisResult<usize> {
        let mut pipe = redis::pipe();
        let mut members = 0;
        for it in items {
            for &window_ms in &it.windows {
                let live: Vec<&Entry> = it
                    .entries
                    .iter()
                    .filter(|e| e.0 > now - window_ms)
                    .collect();
                if live.is_empty() {
                    continue;
                }
                let key = self.key_ms(&it.ident, window_ms);
                pipe.cmd("ZADD").arg(&key);
                for (at, member) in &live {
                    pipe.arg(*at).arg(member);
                }
                pipe.ignore();
                // A full window from now: never shorter than what the last ZADD of any
                // instance set.
                pipe.cmd("PEXPIRE").arg(&key).arg(window_ms).ignore();
                members += live.len();
                if members >= PIPELINE_MEMBERS {
                    pipe.query_async::<()>(conn).await?;
                    pipe.clear();
                    members = 0;
                }
            }
        }
        if let Some(run) = server {
            pipe.cmd("INFO").arg("server");
            let (info,): (String,) = pipe.query_async(conn).await?;
            if parse_run_id(&info) != Some(run) {
                return Err((
                    redis::ErrorKind::ResponseError,
                    "another redis server answered while counts were written back",
                )
                    .into());
            }
        } else if members > 0 {
            pipe.query_async::<()>(conn).await?;
        }
        Ok(items.iter().map(|it| it.entries.len()).sum())
    }
}

/// The server's `run_id`: another one is another server (or the same one restarted). Empty
/// where `INFO` is refused (a managed Redis may rename or forbid it): then a restart is not
/// told from a partition, and only the unsent admissions are written back.
async fn run_id(conn: &mut ConnectionManager) -> redis::RedisResult<String> {
    match redis::cmd("INFO")
        .arg("server")
        .query_async::<String>(conn)
        .await
    {
        Ok(info) => Ok(parse_run_id(&info).unwrap_or_default().to_owned()),
        Err(e)
            if matches!(
                e.kind(),
                redis::ErrorKind::ResponseError | redis::ErrorKind::ExtensionError
            ) =>
        {
            Ok(String::new())
        }
        Err(e) => Err(e),
    }
}

fn parse_run_id(info: &str) -> Option<&str> {
    info.lines()
        .find_map(|l| l.strip_prefix("run_id:"))
        .map(str::trim)
}

/// A member goes to Redis as its text (`base` or `base:j`), written straight into the command.
impl redis::ToRedisArgs for Member {
    fn write_redis_args<W>(&self, out: &mut W)
    where
        W: ?Sized + redis::RedisWrite,
    {
        out.write_arg_fmt(self);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_run_id_is_read_from_info_server() {
        let info = "# Server\r\nredis_version:7.0.15\r\nrun_id:3f1c2b\r\ntcp_port:6379\r\n";
        assert_eq!(parse_run_id(info), Some("3f1c2b"));
        assert_eq!(parse_run_id("# Server\r\n"), None);
    }
}
