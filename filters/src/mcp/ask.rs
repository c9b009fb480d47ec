//! A tool server's requests to the agent during a call (`sampling/createMessage`,
//! `elicitation/create`, `roots/list`, `ping`), relayed with an id of the gateway's making, so
//! that the agent's answer can be delivered by any instance with nothing kept in between: the
//! id carries where the answer goes (the service, the gateway's session with it, the protocol
//! version, the server's own id) and until when, encrypted and authenticated
//! (ChaCha20-Poly1305 under a key derived from the gateway's secret, a random nonce) with the
//! account that made the call as associated data. An agent can neither read the route (the
//! gateway's session id with a server stays the gateway's) nor alter it into another session,
//! and another account cannot answer at all.

use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use base64::Engine;
use hmac::{Hmac, Mac};
use ring::aead::{Aad, LessSafeKey, Nonce, UnboundKey, CHACHA20_POLY1305, NONCE_LEN};
use serde::{Deserialize, Serialize};
use serde_json::value::RawValue;
use serde_json::Value;
use sha2::Sha256;

use crate::json::raw;
use crate::json::splice::splice_members;

/// What every id of ours starts with (the format's version: another format gets another).
pub const PREFIX: &str = "tg1.";

/// Where an answer goes, as sealed into the id the agent sees.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Route {
    /// The service's slug.
    #[serde(rename = "s")]
    pub slug: String,
    /// The gateway's `Mcp-Session-Id` with the server (none for a server without sessions).
    #[serde(rename = "u")]
    pub session: Option<String>,
    /// The protocol version of that session.
    #[serde(rename = "v")]
    pub version: String,
    /// The server's own id for its request.
    #[serde(rename = "i")]
    pub id: Value,
    /// Unix seconds after which the answer is refused (the call has timed out by then).
    #[serde(rename = "e")]
    pub expires: u64,
    /// For an input a 2026-07-28 server asked for (`id` is then its key): the call waiting
    /// for it on the instance that relayed it (there is no server session to deliver into).
    #[serde(rename = "w", default, skip_serializing_if = "Option::is_none")]
    pub waiter: Option<String>,
}

/// Why an answer's id is refused.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Refusal {
    /// Not an id of ours at all.
    NotOurs,
    /// Ours in shape, but altered, sealed under another secret, or issued to another account.
    Forged,
    /// Issued to this account, but its call is over.
    Expired,
}

/// The AEAD key: HMAC-SHA256 of a label under the secret (whatever the secret's length).
fn key(secret: &[u8]) -> Option<LessSafeKey> {
    let mut m = Hmac::<Sha256>::new_from_slice(secret).ok()?;
    m.update(b"tollgate mcp relay id v1");
    let k = m.finalize().into_bytes();
    UnboundKey::new(&CHACHA20_POLY1305, &k)
        .ok()
        .map(LessSafeKey::new)
}

/// The id the agent is sent for a server's request routed by `route`, for `account`; `nonce`
/// random (the caller's: this crate does no I/O), never reused under one secret.
pub fn seal(route: &Route, account: &str, secret: &[u8], nonce: [u8; NONCE_LEN]) -> String {
    // A Route always serializes.
    let mut data = serde_json::to_vec(route).unwrap_or_default();
    let sealed = key(secret).and_then(|k| {
        let n = Nonce::assume_unique_for_key(nonce);
        k.seal_in_place_append_tag(n, Aad::from(account.as_bytes()), &mut data)
            .ok()
    });
    if sealed.is_none() {
        // Unreachable (a key of the right length, a small payload); an id that opens never.
        data.clear();
    }
    let mut out = nonce.to_vec();
    out.extend_from_slice(&data);
    format!("{PREFIX}{}", URL_SAFE_NO_PAD.encode(out))
}

/// The route of an answer's id, when it is one of ours, intact, `account`'s and not expired.
pub fn open(id: &Value, account: &str, secret: &[u8], now: u64) -> Result<Route, Refusal> {
    let text = id.as_str().ok_or(Refusal::NotOurs)?;
    let rest = text.strip_prefix(PREFIX).ok_or(Refusal::NotOurs)?;
    let mut bytes = URL_SAFE_NO_PAD.decode(rest).map_err(|_| Refusal::NotOurs)?;
    if bytes.len() < NONCE_LEN + CHACHA20_POLY1305.tag_len() {
        return Err(Refusal::NotOurs);
    }
    let mut sealed = bytes.split_off(NONCE_LEN);
    let nonce = Nonce::try_assume_unique_for_key(&bytes).map_err(|_| Refusal::NotOurs)?;
    let k = key(secret).ok_or(Refusal::Forged)?;
    // Fails for any change of a byte, another secret, or another account.
    let json = k
        .open_in_place(nonce, Aad::from(account.as_bytes()), &mut sealed)
        .map_err(|_| Refusal::Forged)?;
    let route: Route = serde_json::from_slice(json).map_err(|_| Refusal::Forged)?;
    if route.expires < now {
        return Err(Refusal::Expired);
    }
    Ok(route)
}

/// A message (a JSON object) with its `id` set to the given JSON text, every other byte as it
/// was; `None` when it is not an object.
pub fn with_id(message: &[u8], id: &Value) -> Option<Vec<u8>> {
    let members = raw::parse_object(message).ok()?;
    let id = id.to_string();
    let mut out = Vec::with_capacity(message.len() + id.len());
    splice_members(message, &members, &[("id", id.as_bytes())], &mut out);
    Some(out)
}

/// A server's request on its event stream: its id and method (a notification or a response
/// is none).
pub fn server_request(data: &[u8]) -> Option<(Value, String)> {
    let members = raw::parse_object(data).ok()?;
    let method = raw::as_str(raw::get(&members, "method")?)?.into_owned();
    let id: Value = serde_json::from_str(raw::get(&members, "id")?.get()).ok()?;
    (id.is_string() || id.is_i64() || id.is_u64()).then_some((id, method))
}

/// One round of a 2026-07-28 server's input-required result: the inputs it asks for (key,
/// method, params as sent) and the `requestState` to echo. `None`: a result of another type.
pub struct InputRound {
    pub requests: Vec<(String, String, Option<Box<RawValue>>)>,
    pub state: Option<Box<RawValue>>,
}

pub fn input_round(result: &RawValue) -> Option<InputRound> {
    let members = raw::object(result)?;
    let kind = raw::get(&members, "resultType").and_then(raw::as_str)?;
    if kind != "input_required" {
        return None;
    }
    let mut requests = Vec::new();
    for (key, r) in raw::get(&members, "inputRequests").and_then(raw::object)? {
        let m = raw::object(r)?;
        let method = raw::as_str(raw::get(&m, "method")?)?.into_owned();
        let params = raw::get_set(&m, "params").map(ToOwned::to_owned);
        requests.push((key.into_owned(), method, params));
    }
    let state = raw::get_set(&members, "requestState").map(ToOwned::to_owned);
    Some(InputRound { requests, state })
}

/// A call's params for its retry: `params` (an object's JSON text) with `inputResponses` (each
/// key's answer, as JSON text) and the round's `requestState` set.
pub fn retry_params(
    params: &[u8],
    responses: &[(String, Box<RawValue>)],
    state: Option<&RawValue>,
) -> Option<Vec<u8>> {
    let members = raw::parse_object(params).ok()?;
    let mut answers = b"{".to_vec();
    for (i, (key, v)) in responses.iter().enumerate() {
        if i > 0 {
            answers.push(b',');
        }
        answers.extend_from_slice(Value::from(key.as_str()).to_string().as_bytes());
        answers.push(b':');
        answers.extend_from_slice(v.get().as_bytes());
    }
    answers.push(b'}');
    let mut set: Vec<(&str, &[u8])> = vec![("inputResponses", &answers)];
    if let Some(s) = state {
        set.push(("requestState", s.get().as_bytes()));
    }
    let mut out = Vec::with_capacity(params.len() + answers.len() + 64);
    splice_members(params, &members, &set, &mut out);
    Some(out)
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn route() -> Route {
        Route {
            slug: "weather".into(),
            session: Some("sess-1".into()),
            version: "2025-06-18".into(),
            id: json!(0),
            expires: 1_000,
            waiter: None,
        }
    }

    #[test]
    fn an_id_opens_for_its_account_only_and_until_it_expires() {
        let id = json!(seal(&route(), "acct-a", b"secret-1", [7; NONCE_LEN]));
        assert!(id.as_str().unwrap().starts_with(PREFIX));
        assert_eq!(open(&id, "acct-a", b"secret-1", 999), Ok(route()));
        assert_eq!(open(&id, "acct-a", b"secret-1", 1_000), Ok(route()));
        assert_eq!(
            open(&id, "acct-a", b"secret-1", 1_001),
            Err(Refusal::Expired)
        );
        assert_eq!(open(&id, "acct-b", b"secret-1", 999), Err(Refusal::Forged));
        assert_eq!(open(&id, "acct-a", b"secret-2", 999), Err(Refusal::Forged));
    }

    #[test]
    fn an_altered_id_is_forged_a_foreign_one_not_ours_and_the_route_unreadable() {
        let id = seal(&route(), "a", b"k", [1; NONCE_LEN]);
        let bytes = URL_SAFE_NO_PAD.decode(&id[PREFIX.len()..]).unwrap();
        // The route is not in the clear.
        assert!(!String::from_utf8_lossy(&bytes).contains("sess-1"));
        for at in [0, NONCE_LEN, bytes.len() - 1] {
            let mut b = bytes.clone();
            b[at] ^= 1;
            let altered = json!(format!("{PREFIX}{}", URL_SAFE_NO_PAD.encode(&b)));
            assert_eq!(open(&altered, "a", b"k", 0), Err(Refusal::Forged), "{at}");
        }
        let cut = json!(&id[..id.len() - 4]);
        assert!(open(&cut, "a", b"k", 0).is_err());
        for foreign in [
            json!(7),
            json!("7"),
            json!("tg1.x"),
            json!(null),
            json!("tg2.a.b"),
        ] {
            assert_eq!(
                open(&foreign, "a", b"k", 0),
                Err(Refusal::NotOurs),
                "{foreign}"
            );
        }
    }

    #[test]
    fn ids_are_swapped_in_place_and_requests_told_from_notifications() {
        let msg = br#"{"jsonrpc":"2.0", "id" : 0,"method":"ping","params":{"x":1e400}}"#;
        let out = with_id(msg, &json!("tg1.a.b")).unwrap();
        assert_eq!(
            String::from_utf8(out).unwrap(),
            r#"{"jsonrpc":"2.0", "id" : "tg1.a.b","method":"ping","params":{"x":1e400}}"#
        );
        assert_eq!(
            server_request(br#"{"jsonrpc":"2.0","id":3,"method":"elicitation/create"}"#),
            Some((json!(3), "elicitation/create".into()))
        );
        assert_eq!(
            server_request(br#"{"jsonrpc":"2.0","method":"notifications/progress"}"#),
            None
        );
        assert_eq!(
            server_request(br#"{"jsonrpc":"2.0","id":3,"result":{}}"#),
            None
        );
        assert!(with_id(b"[1]", &json!(1)).is_none());
    }

    #[test]
    fn an_input_required_round_is_read_and_its_retry_carries_the_answers() {
        let r = RawValue::from_string(r#"{"resultType":"input_required","inputRequests":{"name":{"method":"elicitation/create","params":{"message":"Name?"}}},"requestState":"s1"}"#.into()).unwrap();
        let round = input_round(&r).unwrap();
        assert_eq!(round.requests.len(), 1);
        assert_eq!(round.requests[0].0, "name");
        assert_eq!(round.requests[0].1, "elicitation/create");
        assert_eq!(round.state.as_deref().map(RawValue::get), Some(r#""s1""#));
        let done =
            RawValue::from_string(r#"{"resultType":"complete","content":[]}"#.into()).unwrap();
        assert!(input_round(&done).is_none());
        let answer = RawValue::from_string(r#"{"action":"accept"}"#.into()).unwrap();
        let out = retry_params(
            br#"{"name":"t","arguments":{"a":1}}"#,
            &[("name".into(), answer)],
            round.state.as_deref(),
        )
        .unwrap();
        assert_eq!(
            String::from_utf8(out).unwrap(),
            r#"{"name":"t","arguments":{"a":1},"inputResponses":{"name":{"action":"accept"}},"requestState":"s1"}"#
        );
    }
}
