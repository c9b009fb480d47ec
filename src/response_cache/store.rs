//! Where entries are kept: Redis when the gateway has one (shared by its instances), else the
//! ledger's `response_cache` table. An entry is the upstream's reply as it came (a JSON body,
//! or a stream's SSE bytes) after one line saying who served it and what it used.
//!
//! Expiry is read from the entry against the gateway's one clock (`crate::clock`), so it is
//! the same on both stores; Redis also drops it by itself (`PX`). The total cap on Redis is
//! kept with a sorted set of entries by age and a counter of their bytes: a write past the cap
//! evicts the oldest in the same script. An entry Redis already expired is counted until it is
//! the oldest, which it soon is (every entry lives the same `ttl_secs`).

use std::time::Duration;

use redis::aio::ConnectionManager;
use serde::{Deserialize, Serialize};
use tollgate_filters::Usage;

use crate::ledger::Ledger;

/// One cached reply.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Entry {
    pub provider: String,
    /// The id of the model that served it.
    pub model: String,
    pub usage: Usage,
    /// When it was stored (ms), for `Age`.
    pub stored_at: i64,
    pub expires_at: i64,
    /// The upstream's reply as it came.
    pub raw: Vec<u8>,
}

/// The entry's first line.
#[derive(Serialize, Deserialize)]
struct Head {
    provider: String,
    model: String,
    /// prompt, completion, cache read, cache write, one-hour cache write, reasoning.
    usage: [u64; 6],
    stored_at: i64,
    expires_at: i64,
}

impl Entry {
    pub fn encode(&self) -> Vec<u8> {
        let u = &self.usage;
        let head = Head {
            provider: self.provider.clone(),
            model: self.model.clone(),
            usage: [
                u.prompt_tokens,
                u.completion_tokens,
                u.cache_read_tokens,
                u.cache_write_tokens,
                u.cache_write_1h_tokens,
                u.reasoning_tokens,
            ],
            stored_at: self.stored_at,
            expires_at: self.expires_at,
        };
        // A struct of strings and numbers always serializes.
        let mut out = serde_json::to_vec(&head).unwrap_or_default();
        out.push(b'\n');
        out.extend_from_slice(&self.raw);
        out
    }

    pub fn decode(bytes: &[u8]) -> Option<Entry> {
        let nl = bytes.iter().position(|b| *b == b'\n')?;
        let head: Head = serde_json::from_slice(&bytes[..nl]).ok()?;
        let [p, c, r, w, w1, reasoning] = head.usage;
        Some(Entry {
            provider: head.provider,
            model: head.model,
            usage: Usage {
                prompt_tokens: p,
                completion_tokens: c,
                cache_read_tokens: r,
                cache_write_tokens: w,
                cache_write_1h_tokens: w1,
                reasoning_tokens: reasoning,
            },
            stored_at: head.stored_at,
            expires_at: head.expires_at,
            raw: bytes[nl + 1..].to_vec(),
        })
    }
}

/// The store of this gateway (handles, cheap to clone: a write goes on after its request).
#[derive(Clone)]
pub enum Store {
    Redis {
        conn: ConnectionManager,
        /// `storage.redis_prefix`.
        prefix: String,
        /// `storage.redis_timeout_ms`.
        timeout: Duration,
    },
    Ledger(Ledger),
}

/// Evicts the oldest entries past the total: KEYS entry, index, sizes, bytes; ARGV value, ttl
/// ms, stored at, member, total cap, the entries' key prefix.
const PUT: &str = r#"
local old = redis.call('HGET', KEYS[3], ARGV[4])
if old then redis.call('DECRBY', KEYS[4], old) end
redis.call('SET', KEYS[1], ARGV[1], 'PX', ARGV[2])
redis.call('ZADD', KEYS[2], ARGV[3], ARGV[4])
redis.call('HSET', KEYS[3], ARGV[4], string.len(ARGV[1]))
local total = redis.call('INCRBY', KEYS[4], string.len(ARGV[1]))
while total > tonumber(ARGV[5]) do
  local oldest = redis.call('ZPOPMIN', KEYS[2])
  if #oldest == 0 then break end
  local m = oldest[1]
  local size = redis.call('HGET', KEYS[3], m)
  redis.call('HDEL', KEYS[3], m)
  redis.call('DEL', ARGV[6] .. m)
  if size then total = redis.call('DECRBY', KEYS[4], size) end
end
return total
"#;

impl Store {
    /// The unexpired entry under `key`; a store that fails is a miss (logged).
    pub async fn get(&self, key: &str, now_ms: i64) -> Option<Entry> {
        let got = match self {
            Store::Redis {
                conn,
                prefix,
                timeout,
            } => {
                let (mut conn, mut cmd) = (conn.clone(), redis::cmd("GET"));
                let get = cmd
                    .arg(format!("{prefix}rc:e:{key}"))
                    .query_async::<Option<Vec<u8>>>(&mut conn);
                match tokio::time::timeout(*timeout, get).await {
                    Ok(Ok(v)) => v,
                    Ok(Err(e)) => return failed("read", &e.to_string()),
                    Err(_) => return failed("read", "Redis did not answer in time"),
                }
            }
            Store::Ledger(l) => match l.cached_reply(key, now_ms).await {
                Ok(row) => row.map(|r| r.entry),
                Err(e) => return failed("read", &e.to_string()),
            },
        };
        Entry::decode(&got?).filter(|e| e.expires_at > now_ms)
    }

    /// Stores `entry` under `key` of `wallet`, evicting the oldest past `max_total` bytes.
    pub async fn put(&self, (key, wallet): (&str, &str), entry: &Entry, max_total: u64) {
        let bytes = entry.encode();
        let ttl = (entry.expires_at - entry.stored_at).max(1);
        match self {
            Store::Redis {
                conn,
                prefix,
                timeout,
            } => {
                let script = redis::Script::new(PUT);
                let mut inv = script.prepare_invoke();
                inv.key(format!("{prefix}rc:e:{key}"))
                    .key(format!("{prefix}rc:index"))
                    .key(format!("{prefix}rc:sizes"))
                    .key(format!("{prefix}rc:bytes"))
                    .arg(bytes)
                    .arg(ttl)
                    .arg(entry.stored_at)
                    .arg(key)
                    .arg(max_total)
                    .arg(format!("{prefix}rc:e:"));
                let mut conn = conn.clone();
                let run = inv.invoke_async::<i64>(&mut conn);
                match tokio::time::timeout(*timeout, run).await {
                    Ok(Ok(_)) => {}
                    Ok(Err(e)) => {
                        failed::<()>("write", &e.to_string());
                    }
                    Err(_) => {
                        failed::<()>("write", "Redis did not answer in time");
                    }
                }
            }
            Store::Ledger(l) => {
                let at = (entry.stored_at, entry.expires_at);
                if let Err(e) = l.cache_reply((key, wallet), &bytes, at, max_total).await {
                    failed::<()>("write", &e.to_string());
                }
            }
        }
    }
}

/// A store that failed: the request goes on without the cache.
fn failed<T>(what: &str, why: &str) -> Option<T> {
    tracing::warn!("the response cache could not {what} an entry: {why}");
    None
}

#[cfg(test)]
mod tests {
    use super::Entry;
    use tollgate_filters::Usage;

    #[test]
    fn an_entry_reads_back_as_written() {
        let e = Entry {
            provider: "p".into(),
            model: "m".into(),
            usage: Usage {
                prompt_tokens: 3,
                completion_tokens: 4,
                cache_read_tokens: 1,
                ..Usage::default()
            },
            stored_at: 10,
            expires_at: 20,
            raw: b"data: {\"a\":1}\n\ndata: [DONE]\n\n".to_vec(),
        };
        assert_eq!(Entry::decode(&e.encode()), Some(e));
        assert_eq!(Entry::decode(b"no head"), None);
    }
}
