//! What a stored payload must never hold, taken out before it is written: every Tollgate API
//! key (`tg_` and its base62 characters, a key cut short too) and every configured provider
//! key's value, each replaced by [`REDACTED`]; then the text capped at a number of bytes.

/// What a secret is replaced by.
pub const REDACTED: &str = "[redacted]";

/// A provider key shorter than this is not looked for: every occurrence of a short word would
/// be taken out of the text, and no real key is that short.
pub const MIN_SECRET_LEN: usize = 8;

/// The fewest base62 characters after `tg_` taken for a key (a whole one has 40): fewer would
/// take out words like `tg_id`; more would leave a key's first characters in a prompt that
/// quoted only part of it.
const MIN_KEY_TAIL: usize = 6;

/// `text` with every API key and every `secrets` value (those at least [`MIN_SECRET_LEN`]
/// long) replaced by [`REDACTED`].
pub fn redact(text: &str, secrets: &[&str]) -> String {
    let mut out = redact_keys(text);
    for s in secrets.iter().filter(|s| s.len() >= MIN_SECRET_LEN) {
        if out.contains(s) {
            out = out.replace(s, REDACTED);
        }
    }
    out
}

/// `tg_` followed by at least [`MIN_KEY_TAIL`] base62 characters, wherever it stands (a key
/// glued to the text before it too: a word that happens to end in `tg_…` loses its tail, a
/// harmless mistake); the run taken includes `_`, so that keys written one after another go
/// as one.
fn redact_keys(text: &str) -> String {
    let b = text.as_bytes();
    let mut out = String::with_capacity(text.len());
    let mut copied = 0;
    let mut i = 0;
    while let Some(at) = text[i..].find("tg_").map(|p| p + i) {
        let tail = b[at + 3..]
            .iter()
            .take_while(|c| c.is_ascii_alphanumeric() || **c == b'_')
            .count();
        if tail >= MIN_KEY_TAIL {
            out.push_str(&text[copied..at]);
            out.push_str(REDACTED);
            copied = at + 3 + tail;
            i = copied;
        } else {
            i = at + 3;
        }
    }
    out.push_str(&text[copied..]);
    out
}

/// `text` cut to at most `max` bytes on a character boundary; `true` when it was cut.
pub fn cap(mut text: String, max: usize) -> (String, bool) {
    if text.len() <= max {
        return (text, false);
    }
    let mut end = max;
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    text.truncate(end);
    (text, true)
}

#[cfg(test)]
mod tests {
    use super::*;

    const KEY: &str = "tg_AbCdEfGhIjKlMnOpQrStUvWxYz0123456789abcd";

    #[test]
    fn a_whole_key_anywhere_is_taken_out() {
        let text = format!("{{\"content\":\"my key is {KEY}, use it\"}}");
        let r = redact(&text, &[]);
        assert_eq!(r, "{\"content\":\"my key is [redacted], use it\"}");
        assert_eq!(redact(KEY, &[]), REDACTED);
        assert_eq!(
            redact(&format!("{KEY}{KEY}"), &[]),
            REDACTED,
            "one run of base62"
        );
        assert_eq!(
            redact(&format!("{KEY} {KEY}"), &[]),
            "[redacted] [redacted]"
        );
    }

    #[test]
    fn a_key_cut_short_or_glued_to_a_word_is_taken_out_but_short_words_are_not() {
        assert_eq!(redact("key tg_AbCdEf", &[]), "key [redacted]");
        assert_eq!(redact("the tg_id field", &[]), "the tg_id field");
        assert_eq!(redact("my_tg_AbCdEfGh", &[]), "my_[redacted]");
        assert_eq!(redact("keytg_AbCdEfGh!", &[]), "key[redacted]!");
        assert_eq!(redact("tg_", &[]), "tg_");
        assert_eq!(redact("ütg_ÄbCdEfGhIj tg_", &[]), "ütg_ÄbCdEfGhIj tg_");
    }

    #[test]
    fn provider_keys_are_taken_out_and_short_ones_ignored() {
        let r = redact(
            "a sk-live-secret-123 and sk-live-secret-123.",
            &["sk-live-secret-123", "ab"],
        );
        assert_eq!(r, "a [redacted] and [redacted].");
        assert_eq!(redact("ab cd", &["ab"]), "ab cd");
    }

    #[test]
    fn capping_cuts_on_a_character_boundary() {
        assert_eq!(cap("hello".into(), 10), ("hello".into(), false));
        assert_eq!(cap("hello".into(), 5), ("hello".into(), false));
        assert_eq!(cap("hello".into(), 3), ("hel".into(), true));
        // "é" is two bytes: a cut inside it keeps neither half.
        assert_eq!(cap("aé".into(), 2), ("a".into(), true));
        assert_eq!(cap(String::new(), 0), (String::new(), false));
    }
}
