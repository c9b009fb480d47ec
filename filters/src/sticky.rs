//! Sticky routing's pure parts (README, "Sticky routing"): which conversation a request belongs
//! to, as a key the gateway's instances all compute alike, and how long a provider keeps a
//! prompt cached when the request asked for more than its default.
//!
//! A conversation is named by the client (a session id) or recognised by its beginning: the
//! messages up to and including the first user message, and the tools. Each later turn of a
//! chat sends that beginning again unchanged, so every turn gets the same key without the
//! gateway keeping any state per request. The key hashes the raw JSON slices as the client sent
//! them: nothing is decoded or written again.

use sha2::{Digest, Sha256};

use crate::openai::request::ChatRequest;

/// What a request says of the conversation it belongs to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Signal<'r> {
    /// A session id the client sent (`x-session-id`, `prompt_cache_key`, Anthropic's
    /// `metadata.user_id`), as its raw bytes.
    Named(&'r [u8]),
    /// The request continues a conversation the gateway holds (a Responses
    /// `previous_response_id`): recognised by its beginning like an unnamed one, and sticky
    /// whatever its size.
    Continued,
    /// Nothing: recognised by its beginning, sticky only when large enough to be cached.
    Unsaid,
}

impl Signal<'_> {
    /// Whether the client said the request belongs to a conversation.
    pub fn said(&self) -> bool {
        !matches!(self, Signal::Unsaid)
    }
}

/// The conversation's key within `wallet` (an account or organization id, so two wallets
/// never share one) for the model or tier `asked`: 32 hex digits of a SHA-256.
pub fn conversation_key(
    wallet: &str,
    asked: &str,
    req: &ChatRequest<'_>,
    signal: Signal,
) -> String {
    let mut h = Sha256::new();
    // Lengths before variable parts: no two different inputs hash the same bytes.
    for part in [wallet.as_bytes(), asked.as_bytes()] {
        h.update((part.len() as u64).to_le_bytes());
        h.update(part);
    }
    match signal {
        Signal::Named(id) => {
            h.update(b"s");
            h.update(id);
        }
        Signal::Continued | Signal::Unsaid => {
            h.update(b"p");
            beginning(req, &mut h);
        }
    }
    let digest = h.finalize();
    let mut out = String::with_capacity(32);
    for b in &digest[..16] {
        out.push(char::from(HEX[usize::from(b >> 4)]));
        out.push(char::from(HEX[usize::from(b & 15)]));
    }
    out
}

const HEX: &[u8; 16] = b"0123456789abcdef";

/// Hashes what every turn of a conversation repeats: the tools, then each message up to and
/// including the first user message (system and developer prompts come before it).
fn beginning(req: &ChatRequest<'_>, h: &mut Sha256) {
    let tools = req.get("tools").map_or("", |t| t.get());
    h.update((tools.len() as u64).to_le_bytes());
    h.update(tools.as_bytes());
    for m in &req.messages {
        let content = m.content.map_or("", |c| c.get());
        h.update(m.role.as_bytes());
        h.update((content.len() as u64).to_le_bytes());
        h.update(content.as_bytes());
        if m.role == "user" {
            break;
        }
    }
}

/// Whether an Anthropic body marks a prompt-cache breakpoint with `"ttl": "1h"` (an hour's
/// cache instead of five minutes). Read from the bytes: the member may sit at any depth.
pub fn asks_hour_cache(body: &[u8]) -> bool {
    let mut rest = body;
    while let Some(at) = memchr::memmem::find(rest, b"\"ttl\"") {
        rest = &rest[at + 5..];
        let value = skip_ws(rest).strip_prefix(b":").map(skip_ws);
        if value.is_some_and(|v| v.starts_with(b"\"1h\"")) {
            return true;
        }
    }
    false
}

fn skip_ws(b: &[u8]) -> &[u8] {
    let n = b.iter().take_while(|c| c.is_ascii_whitespace()).count();
    &b[n..]
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::openai::request::parse_chat_request;

    fn key(wallet: &str, body: &str, signal: Signal) -> String {
        let req = parse_chat_request(body.as_bytes()).unwrap();
        conversation_key(wallet, &req.model, &req, signal)
    }

    const TURN1: &str = r#"{"model":"m","messages":[{"role":"system","content":"You are terse."},{"role":"user","content":"Hello"}]}"#;
    const TURN2: &str = r#"{"model":"m","messages":[{"role":"system","content":"You are terse."},{"role":"user","content":"Hello"},{"role":"assistant","content":"Hi"},{"role":"user","content":"More"}]}"#;

    #[test]
    fn every_turn_of_a_conversation_has_its_first_turns_key() {
        let k = key("acct_a", TURN1, Signal::Unsaid);
        assert_eq!(k.len(), 32);
        assert_eq!(k, key("acct_a", TURN2, Signal::Unsaid));
        assert_eq!(k, key("acct_a", TURN2, Signal::Continued));
    }

    #[test]
    fn wallets_models_prompts_tools_and_sessions_each_make_another_key() {
        let k = key("acct_a", TURN1, Signal::Unsaid);
        assert_ne!(k, key("acct_b", TURN1, Signal::Unsaid), "another wallet");
        assert_ne!(
            k,
            key("acct_a", &TURN1.replace("\"m\"", "\"n\""), Signal::Unsaid),
            "another model"
        );
        assert_ne!(
            k,
            key("acct_a", &TURN1.replace("terse", "brief"), Signal::Unsaid),
            "another system prompt"
        );
        assert_ne!(
            k,
            key("acct_a", &TURN1.replace("Hello", "Hallo"), Signal::Unsaid),
            "another first message"
        );
        let tools = TURN1.replace(
            r#""messages""#,
            r#""tools":[{"type":"function","function":{"name":"f"}}],"messages""#,
        );
        assert_ne!(k, key("acct_a", &tools, Signal::Unsaid), "tools");
        let named = key("acct_a", TURN1, Signal::Named(b"\"s1\""));
        assert_ne!(k, named);
        assert_eq!(named, key("acct_a", TURN2, Signal::Named(b"\"s1\"")));
        assert_ne!(named, key("acct_a", TURN1, Signal::Named(b"\"s2\"")));
    }

    #[test]
    fn an_hour_cache_is_found_at_any_depth_and_spacing() {
        assert!(asks_hour_cache(
            br#"{"system":[{"text":"x","cache_control":{"type":"ephemeral","ttl":"1h"}}]}"#
        ));
        assert!(asks_hour_cache(br#"{"a":{"ttl" :  "1h"}}"#));
        assert!(!asks_hour_cache(br#"{"cache_control":{"ttl":"5m"}}"#));
        assert!(!asks_hour_cache(br#"{"text":"ttl 1h"}"#));
        assert!(!asks_hour_cache(br#"{"ttl""#));
        assert!(!asks_hour_cache(b""));
    }
}
