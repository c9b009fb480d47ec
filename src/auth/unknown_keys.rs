//! What makes a flood of invalid keys cheap to refuse: the keys the ledger did not know, kept
//! in bounded memory so each is looked up at most once per [`UNKNOWN_FOR`], and per client
//! address a count of refused keys past which no new key from it is looked up until the
//! minute ends ([`Refusals`]).
//!
//! Both are this instance's, in fixed memory whatever the flood: [`UNKNOWN_CAP`] keys of 16
//! bytes in two generations, [`ADDRESSES_CAP`] addresses. A key the ledger does not know cannot
//! become one later (keys are made by the gateway, and a revoked key stays revoked), so
//! remembering a miss for a while changes no answer.

use std::collections::{HashMap, HashSet};
use std::net::IpAddr;
use std::sync::Mutex;
use std::time::{Duration, Instant};

/// How long a miss is remembered at least (it may be kept up to twice as long).
pub const UNKNOWN_FOR: Duration = Duration::from_secs(60);
/// Misses remembered at most, over both generations.
pub const UNKNOWN_CAP: usize = 65_536;
/// Client addresses counted at most in one minute.
pub const ADDRESSES_CAP: usize = 16_384;

/// Keys the ledger did not know, by the first 16 bytes of their hash, in two generations: a
/// new one starts when the current is half the cap or [`UNKNOWN_FOR`] old, and the one before
/// it is forgotten.
pub struct UnknownKeys {
    gens: Mutex<Generations>,
}

struct Generations {
    current: HashSet<u128>,
    previous: HashSet<u128>,
    started: Instant,
}

impl Default for UnknownKeys {
    fn default() -> Self {
        UnknownKeys {
            gens: Mutex::new(Generations {
                current: HashSet::new(),
                previous: HashSet::new(),
                started: Instant::now(),
            }),
        }
    }
}

/// The part of a key's hash (64 hex digits) the set keeps.
fn short(hash: &str) -> Option<u128> {
    u128::from_str_radix(hash.get(..32)?, 16).ok()
}

impl UnknownKeys {
    pub fn contains(&self, hash: &str) -> bool {
        let (Some(h), Ok(g)) = (short(hash), self.gens.lock()) else {
            return false;
        };
        g.current.contains(&h) || g.previous.contains(&h)
    }

    pub fn insert(&self, hash: &str, now: Instant) {
        let (Some(h), Ok(mut g)) = (short(hash), self.gens.lock()) else {
            return;
        };
        if g.current.len() >= UNKNOWN_CAP / 2 || now.duration_since(g.started) >= UNKNOWN_FOR {
            g.previous = std::mem::take(&mut g.current);
            g.started = now;
        }
        g.current.insert(h);
    }

    /// Misses remembered now.
    #[cfg(test)]
    fn len(&self) -> usize {
        self.gens
            .lock()
            .map_or(0, |g| g.current.len() + g.previous.len())
    }
}

/// Refused keys per client address (IPv4, or IPv6 /64) in the current minute.
#[derive(Default)]
pub struct Refusals {
    counts: Mutex<HashMap<u128, (u64, u32)>>,
}

/// The address as counted: IPv4 whole, IPv6 by its /64 (one host's share of addresses).
fn address(ip: IpAddr) -> u128 {
    match ip {
        IpAddr::V4(v4) => u128::from(u32::from(v4)) | (0xffff << 32),
        IpAddr::V6(v6) => u128::from(v6) & !((1u128 << 64) - 1),
    }
}

impl Refusals {
    /// Counts a refused key from `ip` at `now_ms`.
    pub fn count(&self, ip: Option<IpAddr>, now_ms: i64) {
        let (Some(ip), Ok(mut map)) = (ip, self.counts.lock()) else {
            return;
        };
        let minute = now_ms.div_euclid(60_000) as u64;
        if map.len() >= ADDRESSES_CAP && !map.contains_key(&address(ip)) {
            map.retain(|_, (m, _)| *m == minute);
            if map.len() >= ADDRESSES_CAP {
                // A flood from more addresses than the cap: counting starts over.
                map.clear();
            }
        }
        let entry = map.entry(address(ip)).or_insert((minute, 0));
        if entry.0 != minute {
            *entry = (minute, 0);
        }
        entry.1 = entry.1.saturating_add(1);
    }

    /// Seconds until `ip` may have keys looked up again, when it had `limit` or more refused
    /// this minute.
    pub fn over(&self, ip: Option<IpAddr>, limit: u64, now_ms: i64) -> Option<u64> {
        let ip = ip?;
        let map = self.counts.lock().ok()?;
        let (minute, n) = *map.get(&address(ip))?;
        let now_minute = now_ms.div_euclid(60_000) as u64;
        (minute == now_minute && u64::from(n) >= limit).then(|| {
            let left_ms = 60_000 - now_ms.rem_euclid(60_000);
            (left_ms as u64).div_ceil(1000)
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn hash(i: u64) -> String {
        format!("{i:032x}{:032x}", 7)
    }

    #[test]
    fn misses_are_remembered_in_bounded_memory() {
        let u = UnknownKeys::default();
        let now = Instant::now();
        u.insert(&hash(1), now);
        assert!(u.contains(&hash(1)));
        assert!(!u.contains(&hash(2)));
        assert!(!u.contains("not hex"));
        for i in 0..(3 * UNKNOWN_CAP as u64) {
            u.insert(&hash(i), now);
            assert!(u.len() <= UNKNOWN_CAP);
        }
        // The newest half of the cap is still known.
        assert!(u.contains(&hash(3 * UNKNOWN_CAP as u64 - 1)));
        // A generation older than UNKNOWN_FOR is replaced; the one before it forgotten.
        u.insert(&hash(9), now + UNKNOWN_FOR);
        u.insert(&hash(10), now + UNKNOWN_FOR * 2);
        assert!(u.contains(&hash(9)) && u.contains(&hash(10)));
        assert!(!u.contains(&hash(3 * UNKNOWN_CAP as u64 - 1)));
    }

    #[test]
    fn an_address_over_its_refusals_waits_for_the_next_minute() {
        let r = Refusals::default();
        let a: IpAddr = "192.0.2.7".parse().unwrap();
        let b: IpAddr = "2001:db8::1".parse().unwrap();
        let b_same_64: IpAddr = "2001:db8::ffff".parse().unwrap();
        let t = 120_000 + 15_500;
        for _ in 0..3 {
            r.count(Some(a), t);
            r.count(Some(b), t);
        }
        assert_eq!(r.over(Some(a), 4, t), None);
        r.count(Some(a), t);
        assert_eq!(r.over(Some(a), 4, t), Some(45));
        assert_eq!(r.over(Some(b_same_64), 3, t), Some(45));
        assert_eq!(r.over(Some("192.0.2.8".parse().unwrap()), 1, t), None);
        assert_eq!(r.over(Some(a), 4, t + 45_000), None, "a new minute");
        assert_eq!(r.over(None, 0, t), None);
        // More addresses than the cap: memory stays bounded.
        for i in 0..(2 * ADDRESSES_CAP as u32) {
            r.count(Some(IpAddr::V4(i.into())), t);
        }
        assert!(r.counts.lock().unwrap().len() <= ADDRESSES_CAP);
    }
}
