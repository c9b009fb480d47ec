//! Requests in flight (a key's `concurrent_requests`, a plan's `concurrent_requests`): a slot
//! per request, taken when it is admitted and given back when its context is dropped, which
//! every way a request can end does (answered, failed, the client gone).
//!
//! With Redis a slot is a member of a sorted set per ident, scored by when it expires; this
//! instance renews its slots' expiry every third of `storage.in_flight_ttl_secs`, so a slot
//! of a killed instance is gone within that time and never keeps a counter stuck high.
//! Without Redis the count is in-process.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use super::store::{Counters, Unavailable};

/// Takes a slot in every set (ARGV[2] the request, scored ARGV[3]) when each has fewer than
/// its limit live at ARGV[1]; else the index of the first full one.
const TAKE: &str = r#"
local now = tonumber(ARGV[1])
for i = 1, #KEYS do
  redis.call('ZREMRANGEBYSCORE', KEYS[i], '-inf', now)
  if redis.call('ZCARD', KEYS[i]) >= tonumber(ARGV[i + 4]) then return i end
end
for i = 1, #KEYS do
  redis.call('ZADD', KEYS[i], ARGV[3], ARGV[2])
  redis.call('PEXPIRE', KEYS[i], ARGV[4])
end
return 0
"#;

/// This instance's live slots in Redis: request id → the sets it holds a slot in.
type Live = Arc<Mutex<HashMap<String, Vec<String>>>>;

pub struct InFlight {
    local: Arc<Mutex<HashMap<String, i64>>>,
    live: Live,
    take: redis::Script,
    ttl: Duration,
}

impl InFlight {
    pub fn new(ttl: Duration) -> InFlight {
        InFlight {
            local: Arc::default(),
            live: Arc::default(),
            take: redis::Script::new(TAKE),
            ttl,
        }
    }

    pub fn ttl(&self) -> Duration {
        self.ttl
    }

    /// Takes a slot for `request_id` under each `(ident, limit)`; `Ok(Err(i))`: the `i`th is
    /// full.
    pub async fn take(
        &self,
        c: &Counters<'_>,
        limits: &[(&str, i64)],
        request_id: &str,
    ) -> Result<Result<Slot, usize>, Unavailable> {
        let redis = c.redis()?;
        let prefix = redis.as_ref().map_or("", |r| r.1.as_str());
        let keys: Vec<String> = limits
            .iter()
            .map(|(ident, _)| format!("{prefix}:inf:{{{ident}}}"))
            .collect();
        let Some((mut conn, _)) = redis else {
            let Ok(mut map) = self.local.lock() else {
                return Err(Unavailable("in-flight counters poisoned".into()));
            };
            for (i, (k, (_, limit))) in keys.iter().zip(limits).enumerate() {
                if map.get(k).copied().unwrap_or(0) >= *limit {
                    return Ok(Err(i));
                }
            }
            for k in &keys {
                *map.entry(k.clone()).or_insert(0) += 1;
            }
            return Ok(Ok(Slot {
                keys,
                request_id: request_id.to_owned(),
                home: Home::Local(self.local.clone()),
            }));
        };
        let now = crate::clock::now_ms();
        let ttl = self.ttl.as_millis() as i64;
        let mut inv = self.take.prepare_invoke();
        for k in &keys {
            inv.key(k);
        }
        inv.arg(now).arg(request_id).arg(now + ttl).arg(2 * ttl);
        for (_, limit) in limits {
            inv.arg(*limit);
        }
        let full: i64 = c.timed(inv.invoke_async(&mut conn)).await?;
        if full > 0 {
            return Ok(Err(full as usize - 1));
        }
        if let Ok(mut live) = self.live.lock() {
            live.insert(request_id.to_owned(), keys.clone());
        }
        Ok(Ok(Slot {
            keys,
            request_id: request_id.to_owned(),
            home: Home::Redis(self.live.clone(), conn),
        }))
    }

    /// Background, every third of the TTL: pushes the expiry of this instance's live slots
    /// forward (only of members still there: a slot given back is not taken again).
    pub async fn renew(&self, c: &Counters<'_>) {
        let slots: Vec<(String, Vec<String>)> = match self.live.lock() {
            Ok(live) => live.iter().map(|(r, k)| (r.clone(), k.clone())).collect(),
            Err(_) => return,
        };
        if slots.is_empty() {
            return;
        }
        let Ok(Some((mut conn, _))) = c.redis() else {
            return;
        };
        let until = crate::clock::now_ms() + self.ttl.as_millis() as i64;
        let mut pipe = redis::pipe();
        for (request_id, keys) in &slots {
            for k in keys {
                pipe.cmd("ZADD")
                    .arg(k)
                    .arg("XX")
                    .arg(until)
                    .arg(request_id)
                    .ignore();
            }
        }
        if let Err(Unavailable(e)) = c.timed::<()>(pipe.query_async(&mut conn)).await {
            tracing::warn!("could not renew the in-flight slots: {e}");
        }
    }
}

enum Home {
    Local(Arc<Mutex<HashMap<String, i64>>>),
    Redis(Live, redis::aio::ConnectionManager),
}

/// A request's slots, given back when dropped.
pub struct Slot {
    keys: Vec<String>,
    request_id: String,
    home: Home,
}

impl std::fmt::Debug for Slot {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Slot").field("keys", &self.keys).finish()
    }
}

impl Drop for Slot {
    fn drop(&mut self) {
        match &self.home {
            Home::Local(map) => {
                if let Ok(mut map) = map.lock() {
                    for k in &self.keys {
                        if let Some(n) = map.get_mut(k) {
                            *n -= 1;
                            if *n <= 0 {
                                map.remove(k);
                            }
                        }
                    }
                }
            }
            Home::Redis(live, conn) => {
                if let Ok(mut live) = live.lock() {
                    live.remove(&self.request_id);
                }
                let (keys, id, mut conn) = (
                    std::mem::take(&mut self.keys),
                    self.request_id.clone(),
                    conn.clone(),
                );
                // Dropped on a runtime thread (the request's context); a slot not given back
                // (no runtime, Redis down) expires with its TTL.
                if let Ok(rt) = tokio::runtime::Handle::try_current() {
                    rt.spawn(async move {
                        let mut pipe = redis::pipe();
                        for k in &keys {
                            pipe.cmd("ZREM").arg(k).arg(&id).ignore();
                        }
                        let give_back = pipe.query_async::<()>(&mut conn);
                        if tokio::time::timeout(Duration::from_secs(2), give_back).await.is_err() {
                            tracing::warn!(request_id = %id, "an in-flight slot was not given back in time; it expires");
                        }
                    });
                }
            }
        }
    }
}
