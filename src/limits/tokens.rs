//! Tokens per minute (a key's `tokens_per_minute`, a plan's `tokens_per_minute`): a request is
//! admitted with an estimate of its tokens (the prompt, plus `max_tokens` for each completion
//! when the client set one) and the count is corrected with the actual usage when it is
//! settled. One counter per ident and UTC minute, in Redis (exact across instances) or
//! in-process. A minute that has counted nothing admits any one request, so a prompt larger
//! than the limit is served once per minute rather than never.

use std::collections::HashMap;
use std::sync::Mutex;

use super::store::{Counters, Unavailable};

const MINUTE_MS: i64 = 60_000;

/// Admits when every counter has room for ARGV[1] tokens (or counted nothing yet), counting
/// them in all; else the index of the first full one.
const ADMIT: &str = r#"
local est = tonumber(ARGV[1])
for i = 1, #KEYS do
  local used = tonumber(redis.call('GET', KEYS[i]) or '0')
  if used > 0 and used + est > tonumber(ARGV[i + 1]) then return i end
end
for i = 1, #KEYS do
  redis.call('INCRBY', KEYS[i], est)
  redis.call('PEXPIRE', KEYS[i], 120000)
end
return 0
"#;

/// Adds ARGV[1] to each counter still there (a minute long gone is not created again).
const CORRECT: &str = r#"
for i = 1, #KEYS do
  if redis.call('EXISTS', KEYS[i]) == 1 then redis.call('INCRBY', KEYS[i], ARGV[1]) end
end
return 0
"#;

/// A request's tokens counted in its minute, corrected when it settles.
#[derive(Debug)]
pub struct Counted {
    keys: Vec<String>,
    estimate: i64,
    in_redis: bool,
}

/// Refused: which ident was full and how long until its minute ends.
pub struct Full {
    pub index: usize,
    pub retry_after_secs: u64,
}

pub struct Tokens {
    local: Mutex<HashMap<String, i64>>,
    admit: redis::Script,
    correct: redis::Script,
}

impl Default for Tokens {
    fn default() -> Self {
        Tokens {
            local: Mutex::default(),
            admit: redis::Script::new(ADMIT),
            correct: redis::Script::new(CORRECT),
        }
    }
}

impl Tokens {
    /// Counts `estimate` tokens against each `(ident, limit)` when all have room.
    pub async fn admit(
        &self,
        c: &Counters<'_>,
        limits: &[(&str, i64)],
        estimate: i64,
    ) -> Result<Result<Counted, Full>, Unavailable> {
        let now = crate::clock::now_ms();
        let minute = now.div_euclid(MINUTE_MS);
        let retry_after_secs = (((minute + 1) * MINUTE_MS - now + 999) / 1000).max(1) as u64;
        let redis = c.redis()?;
        let prefix = redis.as_ref().map_or("", |r| r.1.as_str());
        let keys: Vec<String> = limits
            .iter()
            .map(|(ident, _)| format!("{prefix}:tpm:{{{ident}}}:{minute}"))
            .collect();
        let Some((mut conn, _)) = redis else {
            let Ok(mut map) = self.local.lock() else {
                return Err(Unavailable("token counters poisoned".into()));
            };
            // Minutes gone by are dropped as the map is touched: it holds this minute only.
            let suffix = format!(":{minute}");
            map.retain(|k, _| k.ends_with(&suffix));
            for (i, (k, (_, limit))) in keys.iter().zip(limits).enumerate() {
                let used = map.get(k).copied().unwrap_or(0);
                if used > 0 && used + estimate > *limit {
                    return Ok(Err(Full {
                        index: i,
                        retry_after_secs,
                    }));
                }
            }
            for k in &keys {
                *map.entry(k.clone()).or_insert(0) += estimate;
            }
            return Ok(Ok(Counted {
                keys,
                estimate,
                in_redis: false,
            }));
        };
        let mut inv = self.admit.prepare_invoke();
        for k in &keys {
            inv.key(k);
        }
        inv.arg(estimate);
        for (_, limit) in limits {
            inv.arg(*limit);
        }
        let full: i64 = c.timed(inv.invoke_async(&mut conn)).await?;
        if full > 0 {
            return Ok(Err(Full {
                index: full as usize - 1,
                retry_after_secs,
            }));
        }
        Ok(Ok(Counted {
            keys,
            estimate,
            in_redis: true,
        }))
    }

    /// Replaces the estimate with the tokens the request used, in the minute it was admitted.
    pub async fn settle(&self, c: &Counters<'_>, counted: Counted, used: i64) {
        let delta = used - counted.estimate;
        if delta == 0 {
            return;
        }
        if !counted.in_redis {
            if let Ok(mut map) = self.local.lock() {
                for k in &counted.keys {
                    if let Some(n) = map.get_mut(k) {
                        *n += delta;
                    }
                }
            }
            return;
        }
        let Ok(Some((mut conn, _))) = c.redis() else {
            return;
        };
        let mut inv = self.correct.prepare_invoke();
        for k in &counted.keys {
            inv.key(k);
        }
        inv.arg(delta);
        if let Err(Unavailable(e)) = c.timed::<i64>(inv.invoke_async(&mut conn)).await {
            tracing::warn!("could not correct a tokens-per-minute count: {e}");
        }
    }
}
