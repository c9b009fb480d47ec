//! `[storage]`: the ledger database, the counter store (Redis) and the lease settings. Read at
//! start only: a reload does not reconnect the stores.

use std::time::Duration;

use serde::Deserialize;

use super::error::{err, secs, ConfigError};

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct StorageSection {
    pub database_url: String,
    pub redis_url: String,
    /// A credit hold left by a crashed instance is refunded after this long. Longer than any
    /// request may run.
    pub hold_ttl_secs: f64,
    /// How often each instance looks for expired holds.
    pub hold_reap_interval_secs: f64,
    /// `fail_open` (serve and count in-process when Redis fails) or `fail_closed` (503).
    pub redis_failure_mode: String,
    /// How long a rate-limit check may wait for Redis before the failure mode applies.
    pub redis_timeout_ms: u64,
    /// Prefix of every Redis key, so several deployments can share one Redis.
    pub redis_prefix: String,
    /// Credit leases (src/metering/leases/): an instance reserves this many requests' worth of
    /// an account's holds at once and meters against it in memory. 0 turns leases off (every
    /// request holds and settles in the database).
    pub lease_holds: u64,
    /// How often an instance writes its leased settlements (usage rows) to the ledger.
    pub lease_sync_ms: u64,
    /// A lease unused for this long is returned to the account's balance.
    pub lease_idle_secs: f64,
    /// Reserved admissions with Redis (src/limits/in_redis.rs): admissions reserved per Redis
    /// round trip while an account is far from its limits. 0: every request is checked in
    /// Redis. Named `rate_limit_lease` until the credit leases made "lease" ambiguous; the old
    /// name is still read.
    #[serde(alias = "rate_limit_lease")]
    pub rate_limit_reserve: u64,
    /// How long a request waits for a ledger connection (and SQLite for its write lock) before
    /// it is answered 503: a store that cannot answer fails fast instead of holding requests.
    pub acquire_timeout_ms: u64,
    /// Settlements that failed after serving wait in memory and are retried until they commit;
    /// past this many waiting, new metered requests are refused (503) until they drain.
    pub max_unsettled: usize,
    /// A request's slot under a `concurrent_requests` limit expires in Redis this long after
    /// its instance last renewed it (every third of it): how long a killed instance's
    /// requests keep counting.
    pub in_flight_ttl_secs: f64,
    /// `none` (default; also `session`: a session-mode pooler is a direct connection to the
    /// ledger) or `transaction`: Postgres is reached through a transaction-mode pooler
    /// (PgBouncer, a managed Postgres's pooler), and every statement is kept on one server
    /// connection (`ledger::pinned`).
    pub postgres_pooler: String,
}

impl Default for StorageSection {
    fn default() -> Self {
        StorageSection {
            database_url: "sqlite://data/tollgate.db".into(),
            redis_url: String::new(),
            hold_ttl_secs: 900.0,
            hold_reap_interval_secs: 30.0,
            redis_failure_mode: "fail_open".into(),
            redis_timeout_ms: 250,
            redis_prefix: "tg".into(),
            lease_holds: 256,
            lease_sync_ms: 20,
            lease_idle_secs: 2.0,
            rate_limit_reserve: 64,
            acquire_timeout_ms: 2_000,
            max_unsettled: 100_000,
            in_flight_ttl_secs: 30.0,
            postgres_pooler: "none".into(),
        }
    }
}

/// The largest reservation of admissions (`rate_limit_reserve`).
pub const MAX_RATE_LIMIT_RESERVE: u64 = 1_000;

/// What the rate limiter does when Redis does not answer.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FailureMode {
    /// Serve, counting in-process (per instance) until Redis is back.
    FailOpen,
    /// Answer 503.
    FailClosed,
}

impl FailureMode {
    pub fn parse(s: &str) -> Option<FailureMode> {
        match s {
            "fail_open" => Some(FailureMode::FailOpen),
            "fail_closed" => Some(FailureMode::FailClosed),
            _ => None,
        }
    }

    pub fn as_str(self) -> &'static str {
        match self {
            FailureMode::FailOpen => "fail_open",
            FailureMode::FailClosed => "fail_closed",
        }
    }
}

#[derive(Debug, Clone)]
pub struct Storage {
    pub database_url: String,
    /// `None`: in-process counters (one instance only).
    pub redis_url: Option<String>,
    pub hold_ttl: Duration,
    pub hold_reap_interval: Duration,
    pub redis_failure_mode: FailureMode,
    pub redis_timeout: Duration,
    pub redis_prefix: String,
    pub lease_holds: u64,
    pub lease_sync: Duration,
    pub lease_idle: Duration,
    pub rate_limit_reserve: u64,
    pub acquire_timeout: Duration,
    pub max_unsettled: usize,
    pub in_flight_ttl: Duration,
    /// Postgres behind a transaction-mode pooler.
    pub transaction_pooler: bool,
}

impl StorageSection {
    pub(super) fn validate(&self, errs: &mut Vec<ConfigError>) -> Storage {
        let hold_ttl = secs("storage.hold_ttl_secs", self.hold_ttl_secs, errs);
        let hold_reap_interval = secs(
            "storage.hold_reap_interval_secs",
            self.hold_reap_interval_secs,
            errs,
        );
        let redis_failure_mode =
            FailureMode::parse(&self.redis_failure_mode).unwrap_or_else(|| {
                errs.push(err(
                    "storage.redis_failure_mode",
                    "must be fail_open or fail_closed",
                ));
                FailureMode::FailOpen
            });
        let lease_idle = secs("storage.lease_idle_secs", self.lease_idle_secs, errs);
        let in_flight_ttl = secs("storage.in_flight_ttl_secs", self.in_flight_ttl_secs, errs);
        if in_flight_ttl < Duration::from_secs(1) {
            errs.push(err("storage.in_flight_ttl_secs", "must be at least 1"));
        }
        if !(1..=10_000).contains(&self.lease_sync_ms) {
            errs.push(err("storage.lease_sync_ms", "must be 1 to 10000"));
        }
        // Each leased admission is two arguments of the Lua script, which Redis's Lua unpacks
        // onto a stack of about 8,000 slots: far below that.
        if self.rate_limit_reserve > MAX_RATE_LIMIT_RESERVE {
            errs.push(err("storage.rate_limit_reserve", "must be 0 (off) to 1000"));
        }
        if self.lease_holds > 1_000_000 {
            errs.push(err("storage.lease_holds", "must be 0 (off) to 1000000"));
        }
        if !(100..=60_000).contains(&self.acquire_timeout_ms) {
            errs.push(err("storage.acquire_timeout_ms", "must be 100 to 60000"));
        }
        if !(1..=10_000_000).contains(&self.max_unsettled) {
            errs.push(err("storage.max_unsettled", "must be 1 to 10000000"));
        }
        if self.redis_timeout_ms == 0 {
            errs.push(err("storage.redis_timeout_ms", "must be above 0"));
        }
        let r = &self.redis_url;
        if !(r.is_empty() || r.starts_with("redis://") || r.starts_with("rediss://")) {
            errs.push(err(
                "storage.redis_url",
                "must be empty or start with redis://",
            ));
        }
        let db = &self.database_url;
        if !(db.starts_with("sqlite:")
            || db.starts_with("postgres://")
            || db.starts_with("postgresql://"))
        {
            errs.push(err(
                "storage.database_url",
                "must start with sqlite:, postgres:// or postgresql://",
            ));
        }
        let transaction_pooler = match self.postgres_pooler.as_str() {
            "none" | "session" => false,
            "transaction" => true,
            _ => {
                errs.push(err(
                    "storage.postgres_pooler",
                    "must be \"none\", \"session\" or \"transaction\"",
                ));
                false
            }
        };
        Storage {
            transaction_pooler,
            database_url: self.database_url.clone(),
            redis_url: (!r.is_empty()).then(|| r.clone()),
            hold_ttl,
            hold_reap_interval,
            redis_failure_mode,
            redis_timeout: Duration::from_millis(self.redis_timeout_ms),
            redis_prefix: self.redis_prefix.clone(),
            lease_holds: self.lease_holds,
            lease_sync: Duration::from_millis(self.lease_sync_ms.max(1)),
            lease_idle,
            rate_limit_reserve: self.rate_limit_reserve,
            acquire_timeout: Duration::from_millis(self.acquire_timeout_ms),
            max_unsettled: self.max_unsettled,
            in_flight_ttl,
        }
    }
}
