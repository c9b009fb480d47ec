//! Where the ledger's Postgres statements are kept on one server connection behind a
//! transaction-mode pooler (`[storage] postgres_pooler = "transaction"`: PgBouncer, a managed
//! Postgres's pooler).
//!
//! Why: such a pooler gives a client a server connection for one transaction at a time, and a
//! statement outside a transaction ends at its first `Sync`. sqlx sends a statement it has not
//! cached as Parse + Describe + Sync, then Bind + Execute + Sync, so the two halves could run on
//! two server connections; and a named statement it cached on one server connection is not on
//! the next. Through PgBouncer 1.18 that gave `prepared statement "sqlx_s_2" already exists`,
//! and could bind one client's arguments to another client's statement of the same name.
//!
//! So, in that mode: every statement runs inside a transaction (one sent on the pool is wrapped
//! in its own), sqlx caches no statement (each is prepared again, under a name never used twice
//! on the client connection), and every transaction begins with `DEALLOCATE ALL`, so that no
//! statement another client left on the server connection can be met. Each costs round trips
//! (docs/operations.md, "Connection poolers"); without a pooler none of this runs.

use futures_core::future::BoxFuture;
use futures_core::stream::BoxStream;
use futures_util::{StreamExt, TryStreamExt};
use sqlx::postgres::{PgPool, PgQueryResult, PgRow, PgStatement, PgTypeInfo};
use sqlx::{Describe, Either, Execute, Executor, Postgres, Transaction};

/// The ledger's Postgres pool, and whether it sits behind a transaction-mode pooler.
#[derive(Debug, Clone)]
pub struct PgLedger {
    pub pool: PgPool,
    pinned: bool,
}

impl PgLedger {
    pub fn new(pool: PgPool, pinned: bool) -> PgLedger {
        PgLedger { pool, pinned }
    }

    /// A transaction; behind a pooler, on a server connection cleared of prepared statements.
    /// Boxed: as a plain `async fn` its future (a statement on a borrowed connection) is not
    /// provably `Send` where callers' futures must be.
    pub fn begin(&self) -> BoxFuture<'_, Result<Transaction<'static, Postgres>, sqlx::Error>> {
        Box::pin(async move {
            let mut tx = self.pool.begin().await?;
            if self.pinned {
                // A simple query (no arguments): one message, nothing prepared. Called as the
                // connection's own method: the generic `raw_sql(..).execute(..)` makes this
                // future not provably `Send`.
                (&mut *tx).execute("DEALLOCATE ALL").await?;
            }
            Ok(tx)
        })
    }
}

impl<'c> Executor<'c> for &'c PgLedger {
    type Database = Postgres;

    fn fetch_many<'e, 'q: 'e, E>(
        self,
        query: E,
    ) -> BoxStream<'e, Result<Either<PgQueryResult, PgRow>, sqlx::Error>>
    where
        'c: 'e,
        E: 'q + Execute<'q, Postgres>,
    {
        if !self.pinned {
            return self.pool.fetch_many(query);
        }
        // Collected inside its transaction: the ledger's statements return few rows.
        let all = async move {
            let mut tx = self.begin().await?;
            let steps: Vec<_> = (&mut *tx).fetch_many(query).try_collect().await?;
            tx.commit().await?;
            Ok::<_, sqlx::Error>(futures_util::stream::iter(steps.into_iter().map(Ok)))
        };
        futures_util::stream::once(all).try_flatten().boxed()
    }

    fn fetch_optional<'e, 'q: 'e, E>(
        self,
        query: E,
    ) -> BoxFuture<'e, Result<Option<PgRow>, sqlx::Error>>
    where
        'c: 'e,
        E: 'q + Execute<'q, Postgres>,
    {
        if !self.pinned {
            return self.pool.fetch_optional(query);
        }
        Box::pin(async move {
            let mut tx = self.begin().await?;
            let row = (&mut *tx).fetch_optional(query).await?;
            tx.commit().await?;
            Ok(row)
        })
    }

    fn prepare_with<'e, 'q: 'e>(
        self,
        sql: &'q str,
        parameters: &'e [PgTypeInfo],
    ) -> BoxFuture<'e, Result<PgStatement<'q>, sqlx::Error>>
    where
        'c: 'e,
    {
        self.pool.prepare_with(sql, parameters)
    }

    fn describe<'e, 'q: 'e>(
        self,
        sql: &'q str,
    ) -> BoxFuture<'e, Result<Describe<Postgres>, sqlx::Error>>
    where
        'c: 'e,
    {
        self.pool.describe(sql)
    }
}
