//! Key budgets (DESIGN.md, Rules: Keys): what a key has spent in its period and what its
//! requests in flight hold against it, so that a hold counts against the key's remaining
//! budget like against the balance and concurrent requests cannot overrun it.
//!
//! With Redis the counters are one hash per key and period (`spent`, `held`, one field per
//! hold) and a sorted set of the holds by expiry, changed only by Lua scripts: exact across
//! instances. A hold left by a crashed instance expires with the request's credit hold
//! (`storage.hold_ttl_secs`) and is dropped by the next reservation. Without Redis they are
//! in-process (one instance). Either store is seeded from the ledger's usage rows the first
//! time a period is touched (after a restart, or when Redis lost the hash), so a restart
//! does not forget what was spent. A budget is money: when Redis does not answer, a key with
//! a budget is refused (503) whatever `redis_failure_mode` says.

use std::collections::HashMap;
use std::sync::Mutex;

use tollgate_filters::budget::Period;

use super::store::{Counters, Unavailable};
use crate::ledger::keys::OrgMember;
use crate::ledger::{KeyAuth, Ledger};

/// Reserves up to ARGV[2] (at least ARGV[3]) under the cap ARGV[4] for hold ARGV[5], which
/// expires at ARGV[6]; ARGV[8] seeds `spent` of a new hash (-1: ask the caller for it).
const RESERVE: &str = r#"
local now = tonumber(ARGV[1])
if redis.call('EXISTS', KEYS[1]) == 0 then
  if tonumber(ARGV[8]) < 0 then return {-2, 0} end
  redis.call('HSET', KEYS[1], 'spent', ARGV[8], 'held', 0)
end
local gone = redis.call('ZRANGEBYSCORE', KEYS[2], '-inf', now)
for _, id in ipairs(gone) do
  local a = tonumber(redis.call('HGET', KEYS[1], 'h:' .. id) or '0')
  redis.call('HDEL', KEYS[1], 'h:' .. id)
  redis.call('HINCRBY', KEYS[1], 'held', -a)
end
if #gone > 0 then redis.call('ZREMRANGEBYSCORE', KEYS[2], '-inf', now) end
local left = tonumber(ARGV[4]) - tonumber(redis.call('HGET', KEYS[1], 'spent')) - tonumber(redis.call('HGET', KEYS[1], 'held'))
if left < tonumber(ARGV[3]) then return {0, left} end
local grant = math.min(tonumber(ARGV[2]), left)
redis.call('HSET', KEYS[1], 'h:' .. ARGV[5], grant)
redis.call('HINCRBY', KEYS[1], 'held', grant)
redis.call('ZADD', KEYS[2], ARGV[6], ARGV[5])
redis.call('PEXPIRE', KEYS[1], ARGV[7])
redis.call('PEXPIRE', KEYS[2], ARGV[7])
return {1, grant}
"#;

/// Sets hold ARGV[1] to ARGV[2]; growing it only within the cap ARGV[3]. 1 when done.
const RESIZE: &str = r#"
local cur = redis.call('HGET', KEYS[1], 'h:' .. ARGV[1])
if not cur then return 0 end
cur = tonumber(cur)
local new = tonumber(ARGV[2])
if new > cur then
  local left = tonumber(ARGV[3]) - tonumber(redis.call('HGET', KEYS[1], 'spent')) - tonumber(redis.call('HGET', KEYS[1], 'held'))
  if new - cur > left then return 0 end
end
redis.call('HSET', KEYS[1], 'h:' .. ARGV[1], new)
redis.call('HINCRBY', KEYS[1], 'held', new - cur)
return 1
"#;

/// Ends hold ARGV[1], adding ARGV[2] to `spent`; returns what is spent now. A hash that is gone (Redis lost it) is left
/// for the next reservation to seed from the ledger, which then holds this charge.
const SETTLE: &str = r#"
if redis.call('EXISTS', KEYS[1]) == 0 then return 0 end
local cur = tonumber(redis.call('HGET', KEYS[1], 'h:' .. ARGV[1]) or '0')
redis.call('HDEL', KEYS[1], 'h:' .. ARGV[1])
redis.call('ZREM', KEYS[2], ARGV[1])
redis.call('HINCRBY', KEYS[1], 'held', -cur)
return redis.call('HINCRBY', KEYS[1], 'spent', ARGV[2])
"#;

/// A period's hash outlives the period by a day, and an idle lifetime one is seeded again.
const KEEP_MS: i64 = 30 * 86_400_000;

/// What one request holds against its key's budget, until settled.
#[derive(Debug)]
pub struct Reserved {
    /// `{key id}:{period start}`.
    ident: String,
    request_id: String,
    pub amount: i64,
    cap: i64,
    period: Period,
    in_redis: bool,
}

impl Reserved {
    /// Whose budget it holds (the counters' name, `{key}:{period start}` or
    /// `member:{org}:{account}:{period start}`), its cap and period: what a threshold event
    /// tells.
    pub fn subject(&self) -> (&str, i64, Period) {
        (&self.ident, self.cap, self.period)
    }
}

/// What a reservation decided.
pub enum Reservation {
    Granted(Reserved),
    /// Not even the minimum fits: what is left of the budget.
    Refused {
        left: i64,
    },
}

#[derive(Default)]
struct Local {
    spent: i64,
    held: i64,
    holds: HashMap<String, i64>,
}

pub struct Budgets {
    local: Mutex<HashMap<String, Local>>,
    /// One seeding from the ledger at a time: a burst of a key's first requests (500 streams
    /// at once) reads its spend once, not once each (which ran the ledger out of connections).
    seeding: tokio::sync::Mutex<()>,
    reserve: redis::Script,
    resize: redis::Script,
    settle: redis::Script,
}

impl Default for Budgets {
    fn default() -> Self {
        Budgets {
            local: Mutex::default(),
            seeding: tokio::sync::Mutex::new(()),
            reserve: redis::Script::new(RESERVE),
            resize: redis::Script::new(RESIZE),
            settle: redis::Script::new(SETTLE),
        }
    }
}

/// What a keyed request's money is capped by besides the balance: its key's budget (µcr per
/// period) and, on an organization key, its member's cap.
#[derive(Debug, Clone, Copy, Default)]
pub struct Caps<'a> {
    pub key: Option<(i64, Period)>,
    /// The member of an organization key, when it has a cap.
    pub member: Option<&'a OrgMember>,
}

/// Which cap refused a request.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Which {
    Key,
    Member,
}

/// Whose spending a budget counts.
#[derive(Debug, Clone, Copy)]
pub enum Of<'a> {
    Key(&'a str),
    Member(&'a OrgMember),
}

impl Of<'_> {
    /// The counters' name for the period starting at `start` (a key's as it always was).
    fn ident(&self, start: i64) -> String {
        match self {
            Of::Key(k) => format!("{k}:{start}"),
            Of::Member(m) => format!("member:{}:{}:{start}", m.org, m.account),
        }
    }

    /// What was spent since `start`, from the ledger's usage rows.
    async fn spent_since(&self, ledger: &Ledger, start: i64) -> Result<i64, Unavailable> {
        let spent = match self {
            Of::Key(k) => ledger.key_spent(k, start).await,
            Of::Member(m) => ledger.member_spent(&m.org, &m.account, start).await,
        };
        spent.map_err(|e| Unavailable(e.to_string()))
    }
}

impl<'a> Caps<'a> {
    /// What a key's requests are capped by besides the balance.
    pub fn of(key: &'a KeyAuth) -> Caps<'a> {
        Caps {
            key: key.limits.budget,
            member: key.org_member.as_deref().filter(|m| m.cap.is_some()),
        }
    }

    /// The budgets a request of key `key_id` reserves, in order.
    pub fn asks(&self, key_id: &'a str) -> Vec<(Which, Of<'a>, i64, Period)> {
        let mut out = Vec::new();
        if let Some((cap, period)) = self.key {
            out.push((Which::Key, Of::Key(key_id), cap, period));
        }
        if let Some((m, (cap, period))) = self.member.and_then(|m| Some((m, m.cap?))) {
            out.push((Which::Member, Of::Member(m), cap, period));
        }
        out
    }
}

/// The request at hand: whose budget, its cap and period, and the hold it wants.
pub struct Ask<'a> {
    pub of: Of<'a>,
    pub cap: i64,
    pub period: Period,
    pub request_id: &'a str,
    pub want: i64,
    pub minimum: i64,
    /// When an unsettled hold is dropped (ms).
    pub expires_at: i64,
}

impl Budgets {
    /// Reserves up to `ask.want`, at least `ask.minimum`, of the key's budget left.
    pub async fn reserve(
        &self,
        c: &Counters<'_>,
        ledger: &Ledger,
        ask: &Ask<'_>,
    ) -> Result<Reservation, Unavailable> {
        let now = crate::clock::now_ms();
        let start = ask.period.start(now);
        let ident = ask.of.ident(start);
        let reserved = |amount: i64, in_redis: bool| {
            Reservation::Granted(Reserved {
                ident: ident.clone(),
                request_id: ask.request_id.to_owned(),
                amount,
                cap: ask.cap,
                period: ask.period,
                in_redis,
            })
        };
        let Some((conn, prefix)) = c.redis()? else {
            self.seed_local(ledger, &ident, ask.of, start).await?;
            let Ok(mut map) = self.local.lock() else {
                return Err(Unavailable("budget counters poisoned".into()));
            };
            let l = map.entry(ident.clone()).or_default();
            let left = ask.cap - l.spent - l.held;
            if left < ask.minimum {
                return Ok(Reservation::Refused { left });
            }
            let grant = ask.want.min(left);
            l.held += grant;
            l.holds.insert(ask.request_id.to_owned(), grant);
            return Ok(reserved(grant, false));
        };
        let (h, z) = keys(&prefix, &ident);
        let keep = ask
            .period
            .next(now)
            .map_or(KEEP_MS, |n| n - now + 86_400_000);
        let mut seed = -1i64;
        let mut seeding = None;
        for _ in 0..3 {
            let mut inv = self.reserve.prepare_invoke();
            inv.key(&h)
                .key(&z)
                .arg(now)
                .arg(ask.want)
                .arg(ask.minimum)
                .arg(ask.cap);
            inv.arg(ask.request_id)
                .arg(ask.expires_at)
                .arg(keep)
                .arg(seed);
            let reply: Vec<i64> = c.timed(inv.invoke_async(&mut conn.clone())).await?;
            match reply.as_slice() {
                // Not seeded: by whoever seeds first (then asked again), else by this request.
                [-2, ..] if seeding.is_none() => seeding = Some(self.seeding.lock().await),
                [-2, ..] => seed = ask.of.spent_since(ledger, start).await?,
                [1, grant, ..] => return Ok(reserved(*grant, true)),
                [_, left, ..] => return Ok(Reservation::Refused { left: *left }),
                _ => return Err(Unavailable("unexpected budget reply".into())),
            }
        }
        Err(Unavailable("the budget hash could not be seeded".into()))
    }

    /// Seeds the in-process store's period from the ledger when it has not seen it yet, one
    /// seeding at a time.
    async fn seed_local(
        &self,
        ledger: &Ledger,
        ident: &str,
        of: Of<'_>,
        start: i64,
    ) -> Result<(), Unavailable> {
        let known = || {
            self.local
                .lock()
                .map(|m| m.contains_key(ident))
                .unwrap_or(false)
        };
        if known() {
            return Ok(());
        }
        let _one = self.seeding.lock().await;
        if known() {
            return Ok(());
        }
        let spent = of.spent_since(ledger, start).await?;
        if let Ok(mut map) = self.local.lock() {
            map.entry(ident.to_owned()).or_insert(Local {
                spent,
                ..Local::default()
            });
        }
        Ok(())
    }

    /// Sets a reservation to `amount` (a hold topped up or placed smaller); growing it only
    /// within the budget. False, and nothing changed, when it cannot grow.
    pub async fn resize(&self, c: &Counters<'_>, r: &mut Reserved, amount: i64) -> bool {
        if !r.in_redis {
            let Ok(mut map) = self.local.lock() else {
                return false;
            };
            let Some(l) = map.get_mut(&r.ident) else {
                return false;
            };
            if amount > r.amount && amount - r.amount > r.cap - l.spent - l.held {
                return false;
            }
            l.held += amount - r.amount;
            l.holds.insert(r.request_id.clone(), amount);
            r.amount = amount;
            return true;
        }
        let Ok(Some((conn, prefix))) = c.redis() else {
            return false;
        };
        let (h, z) = keys(&prefix, &r.ident);
        let mut inv = self.resize.prepare_invoke();
        inv.key(&h)
            .key(&z)
            .arg(&r.request_id)
            .arg(amount)
            .arg(r.cap);
        match c.timed::<i64>(inv.invoke_async(&mut conn.clone())).await {
            Ok(1) => {
                r.amount = amount;
                true
            }
            Ok(_) => false,
            Err(Unavailable(e)) => {
                tracing::warn!(request_id = %r.request_id, "could not resize a budget hold: {e}");
                false
            }
        }
    }

    /// Ends a reservation: `charged` is added to what the key spent, the hold released.
    /// Returns what the key (or member) has spent in the period now, when the counters said.
    pub async fn settle(&self, c: &Counters<'_>, r: Reserved, charged: i64) -> Option<i64> {
        if !r.in_redis {
            let mut map = self.local.lock().ok()?;
            let l = map.get_mut(&r.ident)?;
            let held = l.holds.remove(&r.request_id).unwrap_or(0);
            l.held -= held;
            l.spent += charged;
            return Some(l.spent);
        }
        let Ok(Some((conn, prefix))) = c.redis() else {
            tracing::error!(request_id = %r.request_id, charged, "could not count a charge against the key's budget: Redis is not connected");
            return None;
        };
        let (h, z) = keys(&prefix, &r.ident);
        let mut inv = self.settle.prepare_invoke();
        inv.key(&h).key(&z).arg(&r.request_id).arg(charged);
        match c.timed::<i64>(inv.invoke_async(&mut conn.clone())).await {
            Ok(spent) => Some(spent),
            Err(Unavailable(e)) => {
                // Its hold expires with the credit hold; the charge is in the ledger, which
                // seeds the hash again if Redis lost it.
                tracing::error!(request_id = %r.request_id, charged, "could not count a charge against the key's budget: {e}");
                None
            }
        }
    }

    /// What a key (or member) spent in the period holding `now`: from the counters when they
    /// know the period, else from the ledger.
    pub async fn spent(
        &self,
        c: &Counters<'_>,
        ledger: &Ledger,
        of: Of<'_>,
        period: Period,
        now: i64,
    ) -> Result<i64, Unavailable> {
        let start = period.start(now);
        let ident = of.ident(start);
        if let Some((mut conn, prefix)) = c.redis()? {
            let (h, _) = keys(&prefix, &ident);
            let got: Option<i64> = c
                .timed(
                    redis::cmd("HGET")
                        .arg(&h)
                        .arg("spent")
                        .query_async(&mut conn),
                )
                .await?;
            if let Some(s) = got {
                return Ok(s);
            }
        } else if let Some(s) = self
            .local
            .lock()
            .ok()
            .and_then(|m| m.get(&ident).map(|l| l.spent))
        {
            return Ok(s);
        }
        of.spent_since(ledger, start).await
    }
}

fn keys(prefix: &str, ident: &str) -> (String, String) {
    (
        format!("{prefix}:bud:{{{ident}}}"),
        format!("{prefix}:bud:{{{ident}}}:exp"),
    )
}
