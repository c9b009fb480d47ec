//! The ledger handle: one pool of either backend, connected and migrated at start, and the
//! store's error type.

use std::str::FromStr;
use std::sync::atomic::{AtomicI64, Ordering};
use std::time::Duration;

use sqlx::postgres::{PgConnectOptions, PgPool, PgPoolOptions};

use super::pinned::PgLedger;
use sqlx::sqlite::{
    SqliteConnectOptions, SqliteJournalMode, SqlitePool, SqlitePoolOptions, SqliteSynchronous,
};
use sqlx::Row;

#[derive(Debug)]
pub struct StoreError(pub String);

impl std::fmt::Display for StoreError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

impl From<sqlx::Error> for StoreError {
    fn from(e: sqlx::Error) -> Self {
        if super::breaker::unreachable(&e) {
            super::breaker::trip();
        }
        if let sqlx::Error::Database(db) = &e {
            let sqlite = db.try_downcast_ref::<sqlx::sqlite::SqliteError>().is_some();
            if let Some(code) = db.code().and_then(|c| c.parse::<i32>().ok()) {
                if sqlite {
                    sqlite_trouble(code);
                }
            }
        }
        StoreError(e.to_string())
    }
}

/// When (ms) a SQLite statement last failed in a way that may have ended its transaction
/// behind the driver's back. On a full disk (SQLITE_FULL), an I/O error or a busy lock
/// SQLite may roll the whole transaction back by itself; sqlx still counts it open, its
/// `ROLLBACK` then fails, and from then on it opens the connection's transactions with a
/// `SAVEPOINT`, which a later error rolls back *to* without ending: the connection sits in
/// the pool inside a transaction holding SQLite's write lock, and every other connection gets
/// "database is locked" until the process restarts. So connections released shortly after
/// such an error are closed instead of pooled (see [`Ledger::connect`]); new ones are opened
/// as needed, which for SQLite is a file open.
static SQLITE_TROUBLE_MS: AtomicI64 = AtomicI64::new(i64::MIN / 2);

/// How long after such an error released connections are closed: the failing statement's
/// connection goes back to the pool within milliseconds of the error.
const RECYCLE_AFTER_TROUBLE_MS: i64 = 1_000;

fn sqlite_trouble(extended_code: i32) {
    // Primary result codes: BUSY 5, LOCKED 6, NOMEM 7, IOERR 10, CORRUPT 11, FULL 13.
    if matches!(extended_code & 0xff, 5 | 6 | 7 | 10 | 11 | 13) {
        SQLITE_TROUBLE_MS.store(crate::clock::now_ms(), Ordering::Relaxed);
    }
}

fn sqlite_recently_troubled() -> bool {
    crate::clock::now_ms() - SQLITE_TROUBLE_MS.load(Ordering::Relaxed) < RECYCLE_AFTER_TROUBLE_MS
}

impl From<super::breaker::CircuitOpen> for StoreError {
    fn from(e: super::breaker::CircuitOpen) -> Self {
        StoreError(e.to_string())
    }
}

impl From<sqlx::migrate::MigrateError> for StoreError {
    fn from(e: sqlx::migrate::MigrateError) -> Self {
        StoreError(e.to_string())
    }
}

impl From<StoreError> for tollgate_filters::GatewayError {
    /// A store that cannot answer (down, out of disk, its pool exhausted) is a 503 with
    /// `Retry-After`, never a 500: the request can be retried as it was, and nothing of it
    /// was half-written (DESIGN.md, Rules: Faults).
    fn from(e: StoreError) -> Self {
        tracing::error!("store error: {e}");
        tollgate_filters::GatewayError::new(
            tollgate_filters::ErrorKind::ServiceUnavailable,
            "the ledger store is unavailable; retry shortly",
        )
    }
}

pub type Result<T> = std::result::Result<T, StoreError>;

/// The ledger store on either backend; cheap to clone (a pool handle).
#[derive(Clone)]
pub enum Ledger {
    Sqlite(SqlitePool),
    Postgres(PgLedger),
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

/// The key of the advisory lock that makes instances starting together migrate one at a time.
const MIGRATION_LOCK: i64 = 0x746f_6c6c_6761_7465; // "tollgate"

/// Migrates Postgres in one transaction, under a transaction-scoped advisory lock, on one
/// connection that is closed afterwards. sqlx's own locking takes a session lock
/// (`pg_advisory_lock`) and unlocks it in a later statement: behind a transaction-mode pooler
/// (PgBouncer) the unlock may run on another server connection, and the lock then stays held
/// by a pooled server connection, blocking every later start. Inside one transaction the
/// pooler keeps one server connection throughout, and the lock ends with it. The migrator's
/// named prepared statements are deallocated before the commit, so none is left on a pooled
/// server connection for another client to meet. Each migration runs in a savepoint of this
/// transaction (none of ours needs to run outside one).
///
/// Run on a blocking thread of its own: the migrator's futures over a borrowed connection are
/// not provably `Send` ("implementation of `Executor` is not general enough"), so they cannot
/// be part of the caller's future.
async fn migrate_postgres(pool: &PgPool) -> Result<()> {
    let conn = pool.acquire().await?.detach();
    let runtime = tokio::runtime::Handle::current();
    tokio::task::spawn_blocking(move || runtime.block_on(migrate_on(conn)))
        .await
        .map_err(|e| StoreError(format!("migrations: {e}")))?
}

async fn migrate_on(mut conn: sqlx::PgConnection) -> Result<()> {
    let mut migrator = sqlx::migrate!("./migrations/postgres");
    migrator.set_locking(false);
    let mut tx = sqlx::Connection::begin(&mut conn).await?;
    // Behind a transaction-mode pooler the server connection may hold statements another
    // client prepared (sqlx names them alike: `sqlx_s_1`, …); the migrator's own would collide.
    sqlx::raw_sql("DEALLOCATE ALL").execute(&mut *tx).await?;
    sqlx::query("SELECT pg_advisory_xact_lock($1)")
        .bind(MIGRATION_LOCK)
        .persistent(false)
        .execute(&mut *tx)
        .await?;
    migrator.run_direct(&mut *tx).await?;
    sqlx::raw_sql("DEALLOCATE ALL").execute(&mut *tx).await?;
    tx.commit().await?;
    // Closed, not pooled: its statement cache names the statements deallocated above.
    sqlx::Connection::close(conn).await?;
    Ok(())
}

impl Ledger {
    /// Connects, creating the SQLite file (and its directory) when needed, and migrates.
    /// `acquire` bounds how long a statement waits for a connection (and on SQLite for the
    /// write lock): past it the store answers an error, which the request path turns into 503.
    pub async fn connect(url: &str, acquire: Duration) -> Result<Ledger> {
        Ledger::connect_with(url, acquire, false).await
    }

    /// [`Ledger::connect`]; `pooled`: Postgres sits behind a transaction-mode pooler, and every
    /// statement is kept on one server connection (`ledger::pinned`).
    pub async fn connect_with(url: &str, acquire: Duration, pooled: bool) -> Result<Ledger> {
        if url.starts_with("postgres://") || url.starts_with("postgresql://") {
            let mut opts = PgConnectOptions::from_str(url)?;
            if pooled {
                // No statement kept between uses: the next use may be on another server
                // connection.
                opts = opts.statement_cache_capacity(0);
            }
            let pool = PgPoolOptions::new()
                .max_connections(16)
                .acquire_timeout(acquire)
                .connect_with(opts)
                .await?;
            migrate_postgres(&pool).await?;
            Ok(Ledger::Postgres(PgLedger::new(pool, pooled)))
        } else if url.starts_with("sqlite:") {
            let opts = SqliteConnectOptions::from_str(url)?
                .create_if_missing(true)
                .journal_mode(SqliteJournalMode::Wal)
                .synchronous(SqliteSynchronous::Normal)
                .busy_timeout(acquire)
                // Checkpoints run in the background ([`Ledger::checkpoint`]), not inside a
                // commit: SQLite reports a failed automatic checkpoint (a full disk) as the
                // failure of the commit that ran it, although that commit went through.
                .pragma("wal_autocheckpoint", "0")
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
                .acquire_timeout(acquire)
                // A SQLite connection is a file open in this process: pinging it before each
                // use (sqlx's default) is a round trip to its worker thread that finds nothing.
                .test_before_acquire(false)
                // Not pooled again when it may hold a transaction SQLite ended on its own.
                .after_release(|_conn, _meta| Box::pin(async { Ok(!sqlite_recently_troubled()) }))
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

    /// Copies SQLite's write-ahead log into the database file (what SQLite would otherwise do
    /// inside a commit every 1,000 pages), without waiting for readers or the writer; a no-op on
    /// Postgres. SQLite starts the log over only when a write finds all of it copied, which a
    /// steady stream of commits never lets a checkpoint beside them finish: the log then grew
    /// without end (150 MB in 8 s at 30,000 requests/s). So once it holds more than
    /// `restart_pages` pages, the checkpoint waits its turn behind the writer (as a write does,
    /// up to the busy timeout), copies the rest and truncates the log to nothing.
    pub async fn checkpoint(&self, restart_pages: i64) -> Result<()> {
        if let Ledger::Sqlite(p) = self {
            // One row: (busy, pages in the log, pages copied).
            let row = sqlx::query("PRAGMA wal_checkpoint(PASSIVE)")
                .fetch_one(p)
                .await?;
            let pages: i64 = row.try_get(1)?;
            if pages > restart_pages {
                sqlx::query("PRAGMA wal_checkpoint(TRUNCATE)")
                    .execute(p)
                    .await?;
            }
        }
        Ok(())
    }

    pub async fn ping(&self) -> bool {
        on_pool!(self, p => sqlx::query("SELECT 1").execute(p).await.is_ok())
    }
}
