//! The Redis counter store: one Lua script checks and counts a request in every window in one
//! round trip, scored by Redis's own clock, so the limit holds exactly across instances. While
//! an ident is far from its limits the same call reserves *reserved admissions*: admissions
//! counted in Redis at once (every instance sees them) that this instance hands out without a
//! round trip for up to a second; unused ones are removed again. A reservation is granted only while
//! every window keeps at least four times its size free, so near a limit every request is
//! checked in Redis; the limit is never exceeded. While reserved,
//! `X-RateLimit-Remaining-Requests` counts down from Redis's figure at the reservation.
//!
//! Every admission counted here for this instance (reserved ones when used) is also recorded in
//! its [`Shadow`], with its member and score, for the fallback and the recovery after an outage
//! ([`shadow`](super::shadow), [`recovery`](super::recovery)).

use std::collections::{HashMap, HashSet};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use redis::aio::ConnectionManager;
use tollgate_filters::ratelimit::{Decision, Window};

use super::shadow::{Entry, Member, Shadow};

/// The same algorithm as `tollgate_filters::ratelimit::check_and_count`, on sorted sets scored
/// by Redis's own clock (instances' clocks may disagree; Redis has one). It can also reserve
/// admissions for a reservation (see [`Limiter`]).
const SCRIPT: &str = r#"
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local member = now .. ':' .. ARGV[1]
-- ARGV[#ARGV]: admissions this instance asks to reserve beyond this request (a reservation),
-- granted only while every window keeps at least RESERVE_SHARE times that much room.
local want = tonumber(ARGV[#ARGV])
local share = tonumber(ARGV[#ARGV - 1])
local retry = 0
local rep_limit, rep_rem, rep_reset = -1, -1, 0
for i = 1, #KEYS do
  local win = tonumber(ARGV[2 * i])
  local limit = tonumber(ARGV[2 * i + 1])
  redis.call('ZREMRANGEBYSCORE', KEYS[i], '-inf', now - win)
  local count = redis.call('ZCARD', KEYS[i])
  local reset = win
  local first = redis.call('ZRANGE', KEYS[i], 0, 0, 'WITHSCORES')
  if #first > 0 then reset = tonumber(first[2]) + win - now end
  if limit - count < share * (want + 1) then want = 0 end
  if count >= limit then
    local nth = redis.call('ZRANGE', KEYS[i], count - limit, count - limit, 'WITHSCORES')
    local at = now
    if #nth > 0 then at = tonumber(nth[2]) end
    if at + win - now > retry then retry = at + win - now end
    if rep_rem ~= 0 then rep_limit, rep_rem, rep_reset = limit, 0, reset end
  else
    local rem = limit - count - 1
    if rep_rem < 0 or rem < rep_rem then rep_limit, rep_rem, rep_reset = limit, rem, reset end
  end
end
if retry ~= 0 then want = 0 end
if retry == 0 then
  local args = {now, member}
  -- Reserved admissions are scored at the end of the reservation's lifetime (ARGV[#ARGV - 2] ms), the
  -- latest moment one can be used: each leaves its window no earlier than the request it admits
  -- would, so reserving can only admit fewer, never more.
  local reserved_at = now + tonumber(ARGV[#ARGV - 2])
  for j = 1, want do
    args[#args + 1] = reserved_at
    args[#args + 1] = member .. ':' .. j
  end
  for i = 1, #KEYS do
    redis.call('ZADD', KEYS[i], unpack(args))
    redis.call('PEXPIRE', KEYS[i], tonumber(ARGV[2 * i]))
  end
  if rep_rem > 0 then rep_rem = math.max(rep_rem - want, 0) end
end
return {retry == 0 and 1 or 0, rep_limit, rep_rem, rep_reset, retry, want, member, now}
"#;

/// A reservation takes at most this share of a window's remaining room (the rest is admitted one
/// request at a time, exactly).
const RESERVE_SHARE: u64 = 4;
/// Reserved admissions are used within this time of being counted, or given back. They are scored
/// at the end of it, so they leave their window no earlier than the requests they admit.
const RESERVE_LIFETIME: Duration = Duration::from_secs(1);

/// Admissions reserved in Redis for one ident on this instance.
struct Reservation {
    windows: Vec<Window>,
    /// Reserved, unused sorted-set members with their scores, one per admission.
    members: Vec<Entry>,
    limit: u64,
    remaining: u64,
    reset_ms: i64,
    granted: Instant,
}

/// An ident's reservation request in flight, until dropped (also on the Redis call's timeout).
struct ReserveRequest {
    set: Arc<Mutex<HashSet<String>>>,
    ident: String,
}

impl ReserveRequest {
    fn begin(set: &Arc<Mutex<HashSet<String>>>, ident: &str) -> Option<ReserveRequest> {
        let mut s = set.lock().ok()?;
        s.insert(ident.to_owned()).then(|| ReserveRequest {
            set: set.clone(),
            ident: ident.to_owned(),
        })
    }
}

impl Drop for ReserveRequest {
    fn drop(&mut self) {
        if let Ok(mut s) = self.set.lock() {
            s.remove(&self.ident);
        }
    }
}

/// The Redis side of the limiter, with this instance's reservations.
pub struct RedisCounter {
    /// Set by the counter service once Redis answers.
    conn: tokio::sync::OnceCell<ConnectionManager>,
    reservations: Mutex<HashMap<String, Reservation>>,
    /// Idents with a reservation request in flight: concurrent misses are checked one by one instead
    /// of each reserving a reservation of their own (a burst would otherwise reserve many).
    reserving: Arc<Mutex<HashSet<String>>>,
    reserve_size: u64,
    prefix: String,
    script: redis::Script,
    /// This instance's admissions, for the fallback and the recovery after an outage.
    pub shadow: Shadow,
    pub(super) recovery: Recovery,
}

impl RedisCounter {
    pub fn new(prefix: String, reserve_size: u64) -> RedisCounter {
        RedisCounter {
            conn: tokio::sync::OnceCell::new(),
            reservations: Mutex::new(HashMap::new()),
            reserving: Default::default(),
            reserve_size,
            prefix,
            script: redis::Script::new(SCRIPT),
            shadow: Shadow::default(),
            recovery: Recovery::default(),
        }
    }

    /// Publishes the connection (once; the manager reconnects by itself afterwards).
    pub fn connected(&self, conn: ConnectionManager) {
        let _ = self.conn.set(conn);
    }

    /// The prefix of every key this instance writes (`storage.redis_prefix`).
    pub fn prefix(&self) -> &str {
        &self.prefix
    }

    /// The connection, once the counter service has made it.
    pub fn conn(&self) -> Option<ConnectionManager> {
        self.conn.get().cloned()
    }

    /// One admission from this instance's live reservation for the ident and these windows.
    pub fn take_reserved(&self, ident: &str, windows: &[Window]) -> Option<Decision> {
        if self.reserve_size == 0 {
            return None;
        }
        let mut map = self.reservations.lock().ok()?;
        let l = map.get_mut(ident)?;
        if l.windows != windows || l.granted.elapsed() >= RESERVE_LIFETIME {
            return None;
        }
        let (at, member) = l.members.pop()?;
        l.remaining = l.remaining.saturating_sub(1);
        let elapsed = l.granted.elapsed().as_millis() as i64;
        let d = Decision {
            admitted: true,
            limit: l.limit,
            remaining: l.remaining,
            reset_ms: (l.reset_ms - elapsed).max(0),
            retry_ms: 0,
        };
        // Under the reservations' lock: a recovery that drops the reservations then copies the shadow
        // cannot miss it.
        self.shadow.record(ident, windows, at, member);
        Some(d)
    }

    /// Forgets every reservation: their unused admissions went with a Redis that lost its data.
    pub(super) fn drop_reservations(&self) {
        if let Ok(mut map) = self.reservations.lock() {
            map.clear();
        }
    }

    /// Removes the unused admissions of expired (or superseded) reservations from Redis. `only`:
    /// just this ident's reservation, if it is no longer usable for `windows`.
    async fn return_reservations(
        &self,
        conn: &mut ConnectionManager,
        only: Option<(&str, &[Window])>,
    ) {
        let stale: Vec<(String, Reservation)> = {
            let Ok(mut map) = self.reservations.lock() else {
                return;
            };
            let dead =
                |l: &Reservation| l.granted.elapsed() >= RESERVE_LIFETIME || l.members.is_empty();
            let keys: Vec<String> = match only {
                Some((ident, windows)) => map
                    .get(ident)
                    .filter(|l| dead(l) || l.windows != windows)
                    .map(|_| vec![ident.to_owned()])
                    .unwrap_or_default(),
                None => map
                    .iter()
                    .filter(|(_, l)| dead(l))
                    .map(|(k, _)| k.clone())
                    .collect(),
            };
            keys.into_iter()
                .filter_map(|k| map.remove(&k).map(|l| (k, l)))
                .collect()
        };
        for (ident, l) in stale {
            if l.members.is_empty() {
                continue;
            }
            let members: Vec<&Member> = l.members.iter().map(|e| &e.1).collect();
            let mut pipe = redis::pipe();
            for w in &l.windows {
                pipe.zrem(self.key(&ident, w), &members).ignore();
            }
            if let Err(e) = pipe.query_async::<()>(conn).await {
                // They stay counted until they age out of the window: this instance admits
                // fewer, never more.
                tracing::warn!(ident = %ident, "could not return reserved admissions: {e}");
            }
        }
    }

    /// Background: brings the counts back after an outage (see [`recovery`](super::recovery)),
    /// and returns expired reservations' unused admissions (an instance that goes quiet must not keep
    /// them counted).
    pub async fn sweep(&self) {
        if let Some(mut conn) = self.conn() {
            self.recover(&mut conn).await;
            self.return_reservations(&mut conn, None).await;
        }
    }

    fn key(&self, ident: &str, w: &Window) -> String {
        self.key_ms(ident, w.window_ms)
    }

    pub(super) fn key_ms(&self, ident: &str, window_ms: i64) -> String {
        // One log per window length: a changed limit (plan change, override) applies to the
        // requests already counted. The hash tag keeps an ident's keys in one slot on Redis
        // Cluster.
        format!("{}:rl:{{{ident}}}:{window_ms}", self.prefix)
    }

    /// Deletes the ident's logs of these windows.
    pub async fn forget(
        &self,
        mut conn: ConnectionManager,
        ident: &str,
        windows: &[Window],
    ) -> redis::RedisResult<()> {
        let keys: Vec<String> = windows.iter().map(|w| self.key(ident, w)).collect();
        redis::cmd("DEL").arg(keys).query_async(&mut conn).await
    }

    /// Requests counted in each window at `now_ms` (reservations count as used).
    pub async fn used(
        &self,
        mut conn: ConnectionManager,
        ident: &str,
        windows: &[Window],
        now_ms: i64,
    ) -> redis::RedisResult<Vec<u64>> {
        let mut pipe = redis::pipe();
        for w in windows {
            pipe.cmd("ZCOUNT")
                .arg(self.key(ident, w))
                .arg(format!("({}", now_ms - w.window_ms))
                .arg("+inf");
        }
        pipe.query_async(&mut conn).await
    }

    pub async fn check(
        &self,
        mut conn: ConnectionManager,
        ident: &str,
        windows: &[Window],
        member: &str,
        reservation: bool,
    ) -> redis::RedisResult<Decision> {
        let reservation = reservation && self.reserve_size > 0;
        if reservation {
            self.return_reservations(&mut conn, Some((ident, windows)))
                .await;
        }
        let mut inv = self.script.prepare_invoke();
        for w in windows {
            inv.key(self.key(ident, w));
        }
        inv.arg(member);
        for w in windows {
            inv.arg(w.window_ms).arg(w.limit);
        }
        // No live reservation could admit this request: ask for a new one along with it, unless
        // another request of this ident is already asking.
        let asking = reservation
            .then(|| ReserveRequest::begin(&self.reserving, ident))
            .flatten();
        let want = if asking.is_some() {
            self.reserve_size
        } else {
            0
        };
        inv.arg(RESERVE_LIFETIME.as_millis() as u64)
            .arg(RESERVE_SHARE)
            .arg(want);
        type Reply = (i64, i64, i64, i64, i64, u64, String, i64);
        let (admitted, limit, remaining, reset_ms, retry_ms, reserved, base, now): Reply =
            inv.invoke_async(&mut conn).await?;
        let base: Arc<str> = base.into();
        if reserved > 0 {
            let reserved_at = now + RESERVE_LIFETIME.as_millis() as i64;
            // At most `rate_limit_reserve` (validated ≤ 1,000), so `j` fits a u32.
            let members = (1..=reserved as u32).map(|j| (reserved_at, Member::reserved(&base, j)));
            if let Ok(mut map) = self.reservations.lock() {
                match map.get_mut(ident).filter(|l| l.windows == windows) {
                    // Two requests reserved at once: keep both sets under the older lifetime
                    // (the newer ones are returned early, never kept late).
                    Some(l) => l.members.extend(members),
                    None => {
                        map.insert(
                            ident.to_owned(),
                            Reservation {
                                windows: windows.to_vec(),
                                members: members.collect(),
                                limit: limit.max(0) as u64,
                                remaining: remaining.max(0) as u64,
                                reset_ms,
                                granted: Instant::now(),
                            },
                        );
                    }
                }
            }
        }
        if admitted == 1 {
            self.shadow.record(ident, windows, now, Member::new(base));
        }
        Ok(Decision {
            admitted: admitted == 1,
            limit: limit.max(0) as u64,
            remaining: remaining.max(0) as u64,
            reset_ms,
            retry_ms,
        })
    }
}

/// How often a healthy instance asks Redis whether it is still the same server.
const PROBE_EVERY: Duration = Duration::from_secs(1);
/// Which Redis holds this instance's counts, for the recovery after an outage
/// (`recovery.rs`, which also holds its logic).
#[derive(Default)]
pub struct Recovery {
    /// `run_id` of the Redis that holds this instance's counts.
    run_id: Mutex<Option<String>>,
    probed: Mutex<Option<Instant>>,
}

impl Recovery {
    pub(super) fn probe_due(&self) -> bool {
        let Ok(mut p) = self.probed.lock() else {
            return false;
        };
        if p.is_some_and(|t| t.elapsed() < PROBE_EVERY) {
            return false;
        }
        *p = Some(Instant::now());
        true
    }

    pub(super) fn known(&self) -> Option<String> {
        self.run_id.lock().ok().and_then(|r| r.clone())
    }

    pub(super) fn set_known(&self, run: String) {
        if let Ok(mut r) = self.run_id.lock() {
            *r = Some(run);
        }
    }
}
