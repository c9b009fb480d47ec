//! One round of a credit lease (src/metering/leases.rs) in one transaction.

use std::borrow::Cow;
use std::collections::{BTreeMap, HashSet};
use std::sync::OnceLock;

use sqlx::Row;

use super::credits::Settlement;
use super::store::{on_pool, Ledger, Result, StoreError};

/// One round of a credit lease: see [`Ledger::lease_sync`].
#[derive(Debug)]
pub struct LeaseRound<'a> {
    pub lease_id: &'a str,
    pub account_id: &'a str,
    /// Settlements metered against the lease (cost = the amount charged), each with the
    /// balance its response reported.
    pub rows: &'a [(Settlement, i64)],
    pub topup: i64,
    pub topup_min_balance: i64,
    pub release: bool,
    /// Without `release`: return this much of the lease to the balance and keep the rest.
    pub give_back: i64,
    pub expires_at: i64,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LeaseSynced {
    /// The lease's row was gone (refunded by the reaper); the batch was charged directly.
    pub lost: bool,
    /// What the rows written in this round charged.
    pub charged: i64,
    pub topped_up: i64,
    pub released: bool,
    /// The account's balance in the database (outside every lease) after the round.
    pub balance: i64,
    /// What the account's other leases (other instances) have not spent, as their last rounds
    /// recorded it: added to the balance shown, never to what this lease may move.
    pub others: i64,
}

/// What the account's ($1) leases other than $2 have not spent: every lease is a hold row whose
/// id starts with `lease_` (request holds start with `req_`), its amount reduced by each round
/// by what it charged.
const LEASED_ELSEWHERE: &str = "CAST(COALESCE((SELECT SUM(amount) FROM holds WHERE account_id = $1 AND id LIKE 'lease%' AND id <> $2), 0) AS BIGINT)";

/// The sizes a round's rows are inserted in, largest first.
const BATCH_SIZES: [usize; 4] = [64, 16, 4, 1];

/// `rows` cut into batches of `BATCH_SIZES` only (260 rows: 64, 64, 64, 64, 4).
fn batches<T>(mut rows: &[T]) -> impl Iterator<Item = &[T]> {
    std::iter::from_fn(move || {
        let size = BATCH_SIZES.into_iter().find(|n| *n <= rows.len())?;
        let (batch, rest) = rows.split_at(size);
        rows = rest;
        Some(batch)
    })
}

/// The columns of a lease round's usage row, in the order [`Ledger::lease_sync`] binds them.
const ROW_COLUMNS: &str = "request_id, account_id, key_id, model_requested, model_used, provider, prompt_tokens, completion_tokens, credits, status, latency_ms, created_at, balance_after, lease_id, hold_note, kind, tool_slug, tool_name, developer_id, developer_credits, cache_hit, saved_credits";
const ROW_BINDS: usize = 22;

/// The statement inserting `n` usage rows: built once per backend for each of `BATCH_SIZES`,
/// and for a careful round's other sizes when needed.
fn insert_rows(postgres: bool, n: usize) -> Cow<'static, str> {
    static BUILT: [OnceLock<String>; 2 * BATCH_SIZES.len()] =
        [const { OnceLock::new() }; 2 * BATCH_SIZES.len()];
    match BATCH_SIZES.iter().position(|size| *size == n) {
        Some(i) => {
            let slot = &BUILT[usize::from(postgres) * BATCH_SIZES.len() + i];
            Cow::Borrowed(slot.get_or_init(|| insert_text(postgres, n)).as_str())
        }
        None => Cow::Owned(insert_text(postgres, n)),
    }
}

fn insert_text(postgres: bool, n: usize) -> String {
    let mut sql = format!("INSERT INTO usage ({ROW_COLUMNS}) VALUES ");
    for row in 0..n {
        sql.push_str(if row == 0 { "(" } else { ", (" });
        for col in 0..ROW_BINDS {
            if col > 0 {
                sql.push_str(", ");
            }
            if postgres {
                sql.push('$');
                sql.push_str(&(row * ROW_BINDS + col + 1).to_string());
            } else {
                sql.push('?');
            }
        }
        sql.push(')');
    }
    sql.push_str(" ON CONFLICT (request_id) DO NOTHING");
    sql
}

/// Empty arguments of the pool's backend with room for `binds` values.
fn reserved_args<'q, 'c, E: sqlx::Executor<'c>>(
    _: E,
    binds: usize,
) -> <E::Database as sqlx::Database>::Arguments<'q> {
    let mut args = <E::Database as sqlx::Database>::Arguments::<'q>::default();
    sqlx::Arguments::reserve(&mut args, binds, binds * 16);
    args
}

/// Adds each value to the arguments, in order.
macro_rules! bind_all {
    ($args:ident; $($value:expr),+ $(,)?) => {
        $(sqlx::Arguments::add(&mut $args, $value)
            .map_err(|e| StoreError(format!("a usage row's value: {e}")))?;)+
    };
}

// The steps of a lease round below are macros, as the ledger's other transaction steps are
// (`settle_on!`, `grant!`): each runs on `on_pool!`'s pool and transaction of either backend,
// which a function could take only under sqlx's per-backend executor bounds.

/// The rows of `$chunk` not yet in the ledger, in `$tx` (a careful round's lookup); the ones
/// found are added to `$skipped`. Evaluates to the rows to insert.
macro_rules! fresh_rows {
    ($tx:ident, $chunk:expr, $skipped:ident) => {{
        let chunk = $chunk;
        let mut q = sqlx::QueryBuilder::new("SELECT request_id FROM usage WHERE request_id IN (");
        let mut ids = q.separated(", ");
        for (s, _) in chunk {
            ids.push_bind(&s.request_id);
        }
        ids.push_unseparated(")");
        let have = q
            .build()
            .persistent(false)
            .fetch_all(&mut *$tx)
            .await?
            .iter()
            .map(|row| row.try_get::<String, _>("request_id"))
            .collect::<std::result::Result<HashSet<String>, _>>()?;
        let fresh: Vec<&(Settlement, i64)> = chunk
            .iter()
            .filter(|(s, _)| !have.contains(&s.request_id))
            .collect();
        $skipped.extend(have);
        fresh
    }};
}

/// Inserts the usage rows `$fresh` of round `$r` in `$tx` in one statement; evaluates to the
/// number of rows inserted (fewer than sent: some were there already).
macro_rules! insert_batch {
    ($p:ident, $tx:ident, $r:expr, $fresh:expr, $postgres:expr, $careful:expr) => {{
        let (r, fresh) = ($r, $fresh);
        // Arguments reserved for the whole batch and the statement's text built once
        // per size: grown value by value, the batch's 1,280 arguments were copied
        // ~10 times over and its text rebuilt each round (the lease thread's
        // QueryBuilder was half of its time).
        let mut args = reserved_args($p, fresh.len() * ROW_BINDS);
        for (s, balance_after) in fresh {
            let tool = s.tool.as_ref();
            bind_all!(args; &s.request_id, &s.account_id, &s.key_id, &s.model_requested,
                &s.model_used, &s.provider, s.prompt_tokens, s.completion_tokens, s.cost,
                s.status, s.latency_ms, s.now_ms, *balance_after, r.lease_id, &s.hold_note,
                if tool.is_some() { "tool" } else { "chat" }, tool.map(|t| t.slug.as_str()),
                tool.map(|t| t.tool.as_str()), tool.map(|t| t.developer_id.as_str()),
                tool.map(|t| t.developer_credits), i64::from(s.saving.cache_hit),
                s.saving.credits);
        }
        let sql = insert_rows($postgres, fresh.len());
        // Batches come in four sizes (`batches`), so four statements per connection
        // are prepared once and kept: a statement for each batch's own size was parsed
        // and planned again every round (on SQLite 2.5 % of a tools/call's CPU), and
        // caching those held ~100 MB per connection. A careful round's sizes are
        // any, and rare: not kept.
        sqlx::query_with(&sql, args).persistent(!$careful).execute(&mut *$tx).await?.rows_affected()
    }};
}

/// Writes round `$r`'s usage rows in a new transaction on `$p`; evaluates to the transaction,
/// still open, and the rows found already written (skipped, not charged again).
///
/// The rows are inserted without RETURNING: every returned row was one message from SQLite's
/// worker thread (which blocks once 50 wait), so a round of a few hundred rows cost as many
/// thread switches. A batch that inserted fewer rows than it held is a retry after a lost
/// commit acknowledgement: the round starts again and first asks which rows are there
/// (`careful`).
macro_rules! write_rows {
    ($p:ident, $r:expr, $postgres:expr) => {{
        let r = $r;
        let mut careful = false;
        loop {
            let mut tx = $p.begin().await?;
            let mut short = false;
            // Rows of this round already in the ledger (found only by a careful round).
            let mut skipped: HashSet<String> = Default::default();
            for chunk in batches(r.rows) {
                let fresh: Vec<&(Settlement, i64)> = if careful {
                    fresh_rows!(tx, chunk, skipped)
                } else {
                    chunk.iter().collect()
                };
                if fresh.is_empty() {
                    continue;
                }
                let inserted = insert_batch!($p, tx, r, &fresh, $postgres, careful);
                if inserted != fresh.len() as u64 {
                    short = true;
                    break;
                }
            }
            if !short {
                break (tx, skipped);
            }
            tx.rollback().await?;
            if careful {
                // Rows that were not there a moment ago and are now: another writer of this
                // lease's rows, which a lease never has. The round is retried later.
                return Err(StoreError(
                    "a lease round's usage rows were written by another writer".into(),
                ));
            }
            careful = true;
        }
    }};
}

/// Credits each developer's share of the round, in `$tx`: one credit and one ledger entry per
/// developer and service per round, not per call (a busy tool would otherwise cost two
/// statements per call here).
macro_rules! pay_developers {
    ($tx:ident, $earned:expr) => {
        for ((dev, slug), share) in $earned {
            sqlx::query("UPDATE accounts SET balance = balance + $1 WHERE user_id = $2")
                .bind(share).bind(dev).execute(&mut *$tx).await?;
            sqlx::query("INSERT INTO credit_ledger (account_id, delta, reason, actor, created_at) VALUES ($1, $2, 'mcp_earning', $3, $4)")
                .bind(dev).bind(share).bind(format!("mcp:{slug}")).bind(crate::clock::now_ms())
                .execute(&mut *$tx).await?;
        }
    };
}

/// What round `$r` asks of a lease still held, in `$tx`: return what is left of it to the
/// balance (`release`), or `give_back` of it, or move `topup` more into it where the balance
/// stays at least `topup_min_balance`. Evaluates to `(topped_up, released)`.
macro_rules! move_lease {
    ($tx:ident, $r:expr) => {{
        let r = $r;
        let mut topped_up = 0;
        let mut released = false;
        if r.release {
            let row = sqlx::query("DELETE FROM holds WHERE id = $1 RETURNING amount")
                .bind(r.lease_id)
                .fetch_one(&mut *$tx)
                .await?;
            let amount: i64 = row.try_get("amount")?;
            sqlx::query("UPDATE accounts SET balance = balance + $1 WHERE user_id = $2")
                .bind(amount)
                .bind(r.account_id)
                .execute(&mut *$tx)
                .await?;
            released = true;
        } else if r.give_back > 0 {
            sqlx::query("UPDATE holds SET amount = amount - $1 WHERE id = $2")
                .bind(r.give_back)
                .bind(r.lease_id)
                .execute(&mut *$tx)
                .await?;
            sqlx::query("UPDATE accounts SET balance = balance + $1 WHERE user_id = $2")
                .bind(r.give_back)
                .bind(r.account_id)
                .execute(&mut *$tx)
                .await?;
        } else if r.topup > 0 {
            let moved = sqlx::query(
                "UPDATE accounts SET balance = balance - $1 WHERE user_id = $2 AND balance >= $3",
            )
            .bind(r.topup)
            .bind(r.account_id)
            .bind(r.topup_min_balance)
            .execute(&mut *$tx)
            .await?;
            if moved.rows_affected() == 1 {
                sqlx::query("UPDATE holds SET amount = amount + $1 WHERE id = $2")
                    .bind(r.topup)
                    .bind(r.lease_id)
                    .execute(&mut *$tx)
                    .await?;
                topped_up = r.topup;
            }
        }
        (topped_up, released)
    }};
}

/// What the rows written in a round charged, and (a tool call charged its price pays its
/// developer, in the round's transaction and only for rows written now: a retried batch pays
/// nobody twice) what they earned, by developer and service.
#[derive(Debug, Default)]
struct RoundCharges {
    charged: i64,
    earned: BTreeMap<(String, String), i64>,
}

impl RoundCharges {
    /// The charges of `rows` but those in `skipped` (written by an earlier attempt).
    fn of(rows: &[(Settlement, i64)], skipped: &HashSet<String>) -> RoundCharges {
        let mut c = RoundCharges::default();
        for (s, _) in rows
            .iter()
            .filter(|(s, _)| !skipped.contains(&s.request_id))
        {
            c.charged += s.cost;
            if let Some(t) = s
                .tool
                .as_ref()
                .filter(|t| t.developer_credits > 0 && s.cost > 0)
            {
                *c.earned
                    .entry((t.developer_id.clone(), t.slug.clone()))
                    .or_insert(0) += t.developer_credits;
            }
        }
        c
    }
}

impl Ledger {
    /// What the account's credit leases (on every instance) have not spent, as their last
    /// rounds recorded it: the part of the balance that sits in leases (DESIGN.md, Rules: One
    /// balance).
    /// The account's balance and what its leases hold, read by one statement (one snapshot: a
    /// lease top-up moves money between the two, and read apart it could be counted twice).
    pub async fn balance_and_leased(&self, account_id: &str) -> Result<Option<(i64, i64)>> {
        on_pool!(self, p => {
            let row = sqlx::query(&format!(
                "SELECT balance, {LEASED_ELSEWHERE} AS leased FROM accounts WHERE user_id = $1"
            ))
            .bind(account_id).bind("").fetch_optional(p).await?;
            match row {
                Some(r) => Ok(Some((r.try_get("balance")?, r.try_get("leased")?))),
                None => Ok(None),
            }
        })
    }

    pub async fn leased(&self, account_id: &str) -> Result<i64> {
        super::breaker::check()?;
        on_pool!(self, p => {
            let row = sqlx::query(&format!("SELECT {LEASED_ELSEWHERE} AS leased"))
                .bind(account_id).bind("").fetch_one(p).await?;
            Ok(row.try_get("leased")?)
        })
    }

    /// One round of a credit lease (src/metering/leases.rs), in one transaction: write the batch of
    /// usage rows metered against the lease and take their charges out of the lease's row
    /// (the balance paid for them when the lease was taken), renew the lease's expiry, then
    /// either return what is left of it to the balance (`release`) or `give_back` of it, or move `topup` more into
    /// it where the balance stays at least `topup_min_balance`. Rows already written (a retry
    /// after a lost commit acknowledgement) are skipped and not charged again. A lease that the
    /// reaper already refunded (`lost`) has its batch charged to the balance, clamped at zero.
    pub async fn lease_sync(&self, r: &LeaseRound<'_>) -> Result<LeaseSynced> {
        let postgres = matches!(self, Ledger::Postgres(_));
        on_pool!(self, p => {
            let (mut tx, skipped) = write_rows!(p, r, postgres);
            let RoundCharges { charged, earned } = RoundCharges::of(r.rows, &skipped);
            pay_developers!(tx, &earned);
            let kept = sqlx::query("UPDATE holds SET amount = amount - $1, expires_at = $2 WHERE id = $3 RETURNING amount")
                .bind(charged).bind(r.expires_at).bind(r.lease_id)
                .fetch_optional(&mut *tx).await?;
            let lost = kept.is_none();
            let (topped_up, released) = if lost {
                sqlx::query("UPDATE accounts SET balance = CASE WHEN balance >= $1 THEN balance - $1 ELSE 0 END WHERE user_id = $2")
                    .bind(charged).bind(r.account_id).execute(&mut *tx).await?;
                (0, false)
            } else {
                move_lease!(tx, r)
            };
            let row = sqlx::query(&format!("SELECT balance, {LEASED_ELSEWHERE} AS others FROM accounts WHERE user_id = $1"))
                .bind(r.account_id).bind(r.lease_id).fetch_one(&mut *tx).await?;
            let (balance, others): (i64, i64) = (row.try_get("balance")?, row.try_get("others")?);
            tx.commit().await?;
            Ok(LeaseSynced { lost, charged, topped_up, released, balance, others })
        })
    }
}

#[cfg(test)]
mod tests {
    use std::collections::HashSet;

    use super::{batches, insert_rows, RoundCharges, ROW_BINDS, ROW_COLUMNS};
    use crate::ledger::credits::{Settlement, ToolCharge};

    fn row(id: &str, cost: i64, tool: Option<(&str, &str, i64)>) -> (Settlement, i64) {
        let s = Settlement {
            hold_id: String::new(),
            request_id: id.into(),
            account_id: "acc".into(),
            key_id: None,
            model_requested: "m".into(),
            model_used: None,
            provider: None,
            prompt_tokens: 0,
            completion_tokens: 0,
            cost,
            status: 200,
            latency_ms: 0,
            now_ms: 0,
            hold_note: None,
            saving: Default::default(),
            tool: tool.map(|(dev, slug, credits)| ToolCharge {
                slug: slug.into(),
                tool: "t".into(),
                developer_id: dev.into(),
                developer_credits: credits,
            }),
        };
        (s, 0)
    }

    #[test]
    fn a_round_charges_and_pays_only_for_rows_written_now() {
        let rows = [
            row("r1", 5, None),
            row("r2", 7, Some(("dev", "svc", 3))),
            row("r3", 7, Some(("dev", "svc", 3))),
            // Already written by an earlier attempt: neither charged nor paid again.
            row("r4", 7, Some(("dev", "svc", 3))),
            // Not charged its price: the developer earns nothing.
            row("r5", 0, Some(("dev", "other", 3))),
        ];
        let skipped: HashSet<String> = ["r4".to_owned()].into();
        let c = RoundCharges::of(&rows, &skipped);
        assert_eq!(c.charged, 19);
        let earned: Vec<_> = c.earned.into_iter().collect();
        assert_eq!(earned, [(("dev".to_owned(), "svc".to_owned()), 6)]);
    }

    #[test]
    fn rows_are_cut_into_the_four_sizes_in_order() {
        let rows: Vec<usize> = (0..260).collect();
        let sizes: Vec<usize> = batches(&rows).map(<[usize]>::len).collect();
        assert_eq!(sizes, [64, 64, 64, 64, 4]);
        let again: Vec<usize> = batches(&rows).flatten().copied().collect();
        assert_eq!(again, rows);
        let sizes: Vec<usize> = batches(&rows[..23]).map(<[usize]>::len).collect();
        assert_eq!(sizes, [16, 4, 1, 1, 1]);
        assert_eq!(batches::<usize>(&[]).count(), 0);
    }

    #[test]
    fn a_batch_statement_has_a_placeholder_for_each_value_of_each_row() {
        let sqlite = insert_rows(false, 4);
        assert_eq!(sqlite.matches('?').count(), 4 * ROW_BINDS);
        assert_eq!(ROW_COLUMNS.split(", ").count(), ROW_BINDS);
        let pg = insert_rows(true, 16);
        assert!(pg.contains("($1, $2, "), "{pg}");
        assert!(pg.contains(", $352)"), "{pg}");
        assert!(!pg.contains("$353"), "{pg}");
        assert!(
            pg.ends_with(") ON CONFLICT (request_id) DO NOTHING"),
            "{pg}"
        );
        // Built once per size: the same text each time.
        assert!(std::ptr::eq(insert_rows(true, 16).as_ref(), pg.as_ref()));
        assert!(matches!(insert_rows(false, 3), std::borrow::Cow::Owned(_)));
        assert_eq!(insert_rows(false, 3).matches('?').count(), 3 * ROW_BINDS);
    }
}
