//! The ledger handle: one pool of either backend, connected and migrated at start, and the
//! store's error type.

use std::str::FromStr;
use std::time::Duration;

use sqlx::postgres::{PgPool, PgPoolOptions};
use sqlx::sqlite::{
    SqliteConnectOptions, SqliteJournalMode, SqlitePool, SqlitePoolOptions, SqliteSynchronous,
};

#[derive(Debug)]
pub struct StoreError(pub String);

impl std::fmt::Display for StoreError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

impl From<sqlx::Error> for StoreError {
    fn from(e: sqlx::Error) -> Self {
        StoreError(e.to_string())
    }
}

impl From<sqlx::migrate::MigrateError> for StoreError {
    fn from(e: sqlx::migrate::MigrateError) -> Self {
        StoreError(e.to_string())
    }
}

impl From<StoreError> for tollgate_filters::GatewayError {
    fn from(e: StoreError) -> Self {
        tracing::error!("store error: {e}");
        tollgate_filters::GatewayError::internal("the ledger store failed; retry with backoff")
    }
}

pub type Result<T> = std::result::Result<T, StoreError>;

/// The ledger store on either backend; cheap to clone (a pool handle).
#[derive(Clone)]
pub enum Ledger {
    Sqlite(SqlitePool),
    Postgres(PgPool),
}

/// Runs the same code against whichever pool this is; the body is compiled once per backend.
macro_rules! on_pool {
    ($self:expr, $p:ident => $body:expr) => {
        match $self {
            $crate::ledger::store::Ledger::Sqlite($p) => $body,
            $crate::ledger::store::Ledger::Postgres($p) => $body,
        }
    };
}
pub(crate) use on_pool;

impl Ledger {
    /// Connects, creating the SQLite file (and its directory) when needed, and migrates.
    pub async fn connect(url: &str) -> Result<Ledger> {
        if url.starts_with("postgres://") || url.starts_with("postgresql://") {
            let pool = PgPoolOptions::new()
                .max_connections(16)
                .acquire_timeout(Duration::from_secs(10))
                .connect(url)
                .await?;
            sqlx::migrate!("./migrations/postgres").run(&pool).await?;
            Ok(Ledger::Postgres(pool))
        } else if url.starts_with("sqlite:") {
            let opts = SqliteConnectOptions::from_str(url)?
                .create_if_missing(true)
                .journal_mode(SqliteJournalMode::Wal)
                .synchronous(SqliteSynchronous::Normal)
                .busy_timeout(Duration::from_secs(30))
                .foreign_keys(true);
            if let Some(parent) = opts.get_filename().parent() {
                if !parent.as_os_str().is_empty() {
                    std::fs::create_dir_all(parent).map_err(|e| {
                        StoreError(format!("cannot create {}: {e}", parent.display()))
                    })?;
                }
            }
            let pool = SqlitePoolOptions::new()
                .max_connections(4)
                .acquire_timeout(Duration::from_secs(30))
                .connect_with(opts)
                .await?;
            sqlx::migrate!("./migrations/sqlite").run(&pool).await?;
            Ok(Ledger::Sqlite(pool))
        } else {
            Err(StoreError(format!(
                "unsupported database_url `{url}`: use sqlite://… or postgres://…"
            )))
        }
    }

    pub fn backend(&self) -> &'static str {
        match self {
            Ledger::Sqlite(_) => "sqlite",
            Ledger::Postgres(_) => "postgres",
        }
    }

    pub async fn ping(&self) -> bool {
        on_pool!(self, p => sqlx::query("SELECT 1").execute(p).await.is_ok())
    }
}
