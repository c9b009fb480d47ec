//! Stored responses (`store: true` on `POST /v1/responses`), per account: the response object
//! and its input items as JSON text, kept for the configured retention, then emptied (the row
//! stays as long again, so an expired link of a chain is told apart from one that never was),
//! then deleted.

use std::sync::Mutex;

use sqlx::Row;
use tokio::sync::oneshot;

use super::store::{on_pool, Ledger, Result, StoreError};

/// A stored response as read back for its account.
#[derive(Debug, Clone)]
pub struct StoredResponse {
    pub previous_response_id: Option<String>,
    /// `None` once retention has removed the content.
    pub content: Option<(String, String)>,
}

impl StoredResponse {
    /// The response object, while it is kept.
    pub fn body(&self) -> Option<&str> {
        self.content.as_ref().map(|(_, b)| b.as_str())
    }
    /// The input items, while they are kept.
    pub fn input_items(&self) -> Option<&str> {
        self.content.as_ref().map(|(i, _)| i.as_str())
    }
}

/// One response to store.
#[derive(Debug, Clone)]
pub struct NewResponse {
    pub id: String,
    pub account_id: String,
    pub created_at: i64,
    pub expires_at: i64,
    pub previous_response_id: Option<String>,
    pub input_items: String,
    pub body: String,
}

/// Rows per insert statement (7 binds each, well under both backends' bind limits).
const ROWS_PER_INSERT: usize = 64;

impl Ledger {
    /// Stores responses in one transaction (see [`ResponseQueue`]).
    pub async fn store_responses(&self, rows: &[NewResponse]) -> Result<()> {
        on_pool!(self, p => {
            let mut tx = p.begin().await?;
            for chunk in rows.chunks(ROWS_PER_INSERT) {
                let mut q = sqlx::QueryBuilder::new(
                    "INSERT INTO responses (id, account_id, created_at, expires_at, previous_response_id, input_items, body) ",
                );
                q.push_values(chunk, |mut b, r| {
                    b.push_bind(&r.id).push_bind(&r.account_id).push_bind(r.created_at)
                        .push_bind(r.expires_at).push_bind(&r.previous_response_id)
                        .push_bind(&r.input_items).push_bind(&r.body);
                });
                q.build().execute(&mut *tx).await?;
            }
            tx.commit().await?;
            Ok(())
        })
    }

    /// The account's response `id`; its content only while it is unexpired at `now`. Another
    /// account's response is `None`, as one that does not exist.
    pub async fn response(
        &self,
        account_id: &str,
        id: &str,
        now: i64,
    ) -> Result<Option<StoredResponse>> {
        on_pool!(self, p => {
            let row = sqlx::query(
                "SELECT previous_response_id, input_items, body, expires_at FROM responses \
                 WHERE id = $1 AND account_id = $2",
            )
            .bind(id).bind(account_id).fetch_optional(p).await?;
            let Some(r) = row else { return Ok(None) };
            let expires_at: i64 = r.try_get("expires_at")?;
            let items: Option<String> = r.try_get("input_items")?;
            let body: Option<String> = r.try_get("body")?;
            let content = match (items, body) {
                (Some(i), Some(b)) if expires_at > now => Some((i, b)),
                _ => None,
            };
            Ok(Some(StoredResponse {
                previous_response_id: r.try_get("previous_response_id")?,
                content,
            }))
        })
    }

    /// Deletes the account's response `id`; false when it has none by that id.
    pub async fn delete_response(&self, account_id: &str, id: &str) -> Result<bool> {
        on_pool!(self, p => {
            let r = sqlx::query("DELETE FROM responses WHERE id = $1 AND account_id = $2")
                .bind(id).bind(account_id).execute(p).await?;
            Ok(r.rows_affected() > 0)
        })
    }

    /// The reaper's round: empties responses past their expiry, and deletes those that expired
    /// more than `keep_marker` seconds ago; returns how many rows changed.
    pub async fn expire_responses(&self, now: i64, keep_marker: i64) -> Result<u64> {
        on_pool!(self, p => {
            let emptied = sqlx::query(
                "UPDATE responses SET input_items = NULL, body = NULL \
                 WHERE expires_at <= $1 AND body IS NOT NULL",
            )
            .bind(now).execute(p).await?;
            let deleted = sqlx::query("DELETE FROM responses WHERE expires_at <= $1")
                .bind(now - keep_marker).execute(p).await?;
            Ok(emptied.rows_affected() + deleted.rows_affected())
        })
    }
}

type Waiting = (
    NewResponse,
    oneshot::Sender<std::result::Result<(), String>>,
);

/// Stored responses written in groups: a response must be committed before its answer goes
/// out (the client may name it in `previous_response_id` on another instance at once), and one
/// commit per response cost a write transaction each (on SQLite about 200 µs of CPU and the
/// writer's lock per response). Each request queues its row and waits; one writer task at a
/// time takes everything queued and commits it in one transaction, so under load many
/// responses share a commit and a lone request waits for no one.
#[derive(Default)]
pub struct ResponseQueue {
    /// The rows waiting, and whether a writer task is running.
    state: Mutex<(Vec<Waiting>, bool)>,
}

impl ResponseQueue {
    /// Stores `row`, returning once its transaction committed (or failed).
    pub async fn store(
        self: &std::sync::Arc<Self>,
        ledger: &Ledger,
        row: NewResponse,
    ) -> Result<()> {
        let (tx, rx) = oneshot::channel();
        let start = {
            let mut s = self.state.lock().unwrap_or_else(|e| e.into_inner());
            s.0.push((row, tx));
            !std::mem::replace(&mut s.1, true)
        };
        if start {
            let (queue, ledger) = (self.clone(), ledger.clone());
            tokio::spawn(async move { queue.write_all(&ledger).await });
        }
        match rx.await {
            Ok(r) => r.map_err(StoreError),
            Err(_) => Err(StoreError("the response writer stopped".into())),
        }
    }

    async fn write_all(&self, ledger: &Ledger) {
        loop {
            let batch = {
                let mut s = self.state.lock().unwrap_or_else(|e| e.into_inner());
                if s.0.is_empty() {
                    s.1 = false;
                    return;
                }
                std::mem::take(&mut s.0)
            };
            let (rows, waiting): (Vec<NewResponse>, Vec<_>) = batch.into_iter().unzip();
            let result = ledger
                .store_responses(&rows)
                .await
                .map_err(|e| e.to_string());
            for w in waiting {
                let _ = w.send(result.clone());
            }
        }
    }
}
