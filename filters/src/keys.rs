//! API key format and hashing (DESIGN.md, Keys): `tg_` + 40 base62 characters. Only the
//! SHA-256 of a key is stored; the first 8 characters are kept for display.

use sha2::{Digest, Sha256};

pub const PREFIX: &str = "tg_";
pub const RANDOM_LEN: usize = 40;
pub const DISPLAY_LEN: usize = 8;
const BASE62: &[u8] = b"0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz";

/// Builds a key from random bytes (the caller supplies randomness, keeping this crate pure).
/// Each byte is mapped by rejection so every character is uniform over base62.
pub fn format_key(random: impl IntoIterator<Item = u8>) -> Option<String> {
    let mut s = String::with_capacity(PREFIX.len() + RANDOM_LEN);
    s.push_str(PREFIX);
    for b in random {
        if b < 248 {
            s.push(BASE62[(b % 62) as usize] as char);
            if s.len() == PREFIX.len() + RANDOM_LEN {
                return Some(s);
            }
        }
    }
    None
}

/// A random base62 string of `len` characters from random bytes (session ids, user ids).
pub fn base62(random: impl IntoIterator<Item = u8>, len: usize) -> Option<String> {
    let s: String = random
        .into_iter()
        .filter(|b| *b < 248)
        .take(len)
        .map(|b| BASE62[(b % 62) as usize] as char)
        .collect();
    (s.len() == len).then_some(s)
}

/// True when `key` has the shape of a Tollgate key (checked before any lookup).
pub fn well_formed(key: &str) -> bool {
    key.len() == PREFIX.len() + RANDOM_LEN
        && key.starts_with(PREFIX)
        && key[PREFIX.len()..]
            .bytes()
            .all(|b| b.is_ascii_alphanumeric())
}

pub fn hash(secret: &str) -> String {
    let digest = Sha256::digest(secret.as_bytes());
    // Runs once per request (the key cache is keyed by hash): no allocation per byte.
    const HEX: &[u8; 16] = b"0123456789abcdef";
    let mut out = String::with_capacity(64);
    for b in digest {
        out.push(HEX[(b >> 4) as usize] as char);
        out.push(HEX[(b & 15) as usize] as char);
    }
    out
}

pub fn display_prefix(key: &str) -> String {
    key.chars().take(DISPLAY_LEN).collect()
}

/// Equal-time comparison for secrets (admin token): the time taken does not depend on where
/// the inputs differ.
pub fn constant_time_eq(a: &[u8], b: &[u8]) -> bool {
    let mut diff = (a.len() ^ b.len()) as u8 | ((a.len() ^ b.len()) >> 8) as u8;
    for i in 0..a.len().max(b.len()) {
        let x = a.get(i).copied().unwrap_or(0);
        let y = b.get(i).copied().unwrap_or(0xff);
        diff |= x ^ y;
    }
    diff == 0
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn key_shape_and_hash() {
        let k = format_key((0..=255u8).cycle().take(300)).unwrap();
        assert!(well_formed(&k), "{k}");
        assert_eq!(k.len(), 43);
        assert_eq!(display_prefix(&k).len(), 8);
        assert_eq!(hash(&k).len(), 64);
        assert_ne!(hash(&k), hash("tg_other"));
        // FIPS 180-2 test vector: stored hashes must not change with the implementation.
        assert_eq!(
            hash("abc"),
            "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"
        );
        for bad in [
            "",
            "tg_",
            "sk_0123456789012345678901234567890123456789",
            "tg_012345678901234567890123456789012345678!",
        ] {
            assert!(!well_formed(bad), "{bad}");
        }
        assert!(format_key([1u8; 10]).is_none());
    }

    #[test]
    fn constant_time_equality() {
        assert!(constant_time_eq(b"secret", b"secret"));
        assert!(!constant_time_eq(b"secret", b"secreT"));
        assert!(!constant_time_eq(b"secret", b"secret2"));
        assert!(!constant_time_eq(b"", b"x"));
        assert!(constant_time_eq(b"", b""));
    }
}
