//! A tool server's requests to the agent during a call, both ways, on any instance: each is
//! relayed on the call's event stream with an id sealed for the calling account
//! (`tollgate_filters::mcp::ask`: the service, the gateway's session with it, the server's own
//! id, an expiry), and the agent's answer, POSTed to either endpoint and so to any instance, is
//! opened, checked and delivered to that session with the server's own id back. Nothing is
//! kept between the two: the secret (`[mcp] relay_secret_env`) is the same on every instance.
//! An answer to an input a 2026 server asked for ([`inputs`](super::inputs)) has no server
//! session to go to: it is handed to the call waiting on this instance, or left in Redis for
//! the instance that holds it ([`wait_answer`]).

use std::time::Duration;

use crate::request::Session;
use serde_json::value::RawValue;
use serde_json::Value;
use tollgate_filters::mcp::ask::{self, Refusal, Route};
use tollgate_filters::mcp::{era, request_json, service_allowed, RpcError, INVALID_REQUEST};
use tollgate_filters::{ErrorKind, GatewayError};

use crate::request::ctx::RequestCtx;
use crate::request::respond;
use crate::runtime::Shared;
use crate::tool_servers::client::Upstream;
use crate::tool_servers::live;
use crate::tool_servers::reply::Ask;

/// The secret ids are sealed with: the configured one, else this instance's own.
fn secret(shared: &Shared) -> Vec<u8> {
    let rt = shared.runtime.load();
    match &rt.config.mcp.relay_secret {
        Some(s) => s.clone(),
        None => shared.mcp.generated_secret().to_vec(),
    }
}

/// What the ids of one call's relayed requests are sealed with.
pub struct Sealer {
    slug: String,
    account: String,
    secret: Vec<u8>,
    /// Unix seconds: when the call will have timed out.
    expires: u64,
}

impl Sealer {
    pub fn new(shared: &Shared, slug: &str, account: &str, timeout: Duration) -> Sealer {
        let now = crate::clock::now_secs().max(0) as u64;
        Sealer {
            slug: slug.to_owned(),
            account: account.to_owned(),
            secret: secret(shared),
            // A second's slack for the rounding down of now.
            expires: now + timeout.as_secs() + 1,
        }
    }

    /// The server's request as the agent gets it: its id replaced by a sealed one.
    pub fn seal(&self, a: &Ask) -> Option<Vec<u8>> {
        let route = Route {
            slug: self.slug.clone(),
            session: a.session.clone(),
            version: a.version.clone(),
            id: a.id.clone(),
            expires: self.expires,
            waiter: None,
        };
        let id = ask::seal(&route, &self.account, &self.secret, rand::random());
        ask::with_id(&a.message, &Value::String(id))
    }

    /// A 2026 server's input request (`key`: its name in `inputRequests`) as a request to a
    /// 2025 agent, its answer to be handed to the call waiting on `waiter` here.
    pub fn seal_input(
        &self,
        key: &str,
        method: &str,
        params: Option<&RawValue>,
        waiter: &str,
    ) -> Vec<u8> {
        let route = Route {
            slug: self.slug.clone(),
            session: None,
            version: era::STATELESS.to_owned(),
            id: Value::String(key.to_owned()),
            expires: self.expires,
            waiter: Some(waiter.to_owned()),
        };
        let id = Value::String(ask::seal(
            &route,
            &self.account,
            &self.secret,
            rand::random(),
        ));
        let params = params.map(|p| p.get().as_bytes());
        let mut out = br#"{"jsonrpc":"2.0","id":"#.to_vec();
        out.extend_from_slice(id.to_string().as_bytes());
        out.push(b',');
        // The rest as a request without an id writes it: `"method":…,"params":…}`.
        out.extend_from_slice(&request_json(None, method, params)[br#"{"jsonrpc":"2.0","#.len()..]);
        out
    }
}

/// An agent's JSON-RPC response (`raw`, its `id`), on `/mcp` (`slug` None) or `/mcp/{slug}`:
/// delivered to the tool server whose request it answers (202), or refused with a JSON-RPC
/// error and the status of the failure.
#[allow(clippy::too_many_arguments)]
pub async fn answer(
    shared: &Shared,
    session: &mut Session,
    ctx: &mut RequestCtx,
    account: &str,
    allowed: Option<&[String]>,
    slug: Option<&str>,
    raw: &[u8],
    id: Value,
) {
    let out = deliver(shared, account, allowed, slug, raw, &id).await;
    let (status, body) = match out {
        Ok(()) => (202, Vec::new()),
        Err((e, code)) => {
            let (status, _) = e.status_and_type();
            let mut rpc = RpcError::from_error(Value::Null, &e);
            if let Some(c) = code {
                rpc.code = c;
            }
            (status, rpc.to_json())
        }
    };
    ctx.status = status;
    respond::send(session, ctx, status, "application/json", body, &[]).await;
}

/// The error, and the JSON-RPC code when not the kind's own.
type Refused = (GatewayError, Option<i64>);

async fn deliver(
    shared: &Shared,
    account: &str,
    allowed: Option<&[String]>,
    slug: Option<&str>,
    raw: &[u8],
    id: &Value,
) -> Result<(), Refused> {
    let invalid = |m: String| (GatewayError::invalid(m), Some(INVALID_REQUEST));
    let now = crate::clock::now_secs().max(0) as u64;
    let route = ask::open(id, account, &secret(shared), now).map_err(|r| match r {
        Refusal::NotOurs => invalid(format!(
            "id {id} answers no request of this gateway's: a response is taken only for a request a tool server sent during a call"
        )),
        Refusal::Forged => (
            GatewayError::new(
                ErrorKind::Forbidden,
                "the response's id was altered or was not sent to this account",
            ),
            Some(INVALID_REQUEST),
        ),
        Refusal::Expired => invalid("the call this response answers is over".into()),
    })?;
    if let Some(s) = slug.filter(|s| *s != route.slug) {
        return Err(invalid(format!(
            "this response answers a request of `{}`, not of `{s}`: send it where the call went",
            route.slug
        )));
    }
    let services = live::services(shared).await.map_err(|e| (e, None))?;
    let service = services
        .iter()
        .find(|s| s.slug == route.slug && service_allowed(allowed, &s.slug))
        .ok_or_else(|| {
            (
                GatewayError::new(
                    ErrorKind::NotFound,
                    format!("no live tool server `{}`", route.slug),
                ),
                None,
            )
        })?;
    if let Some(w) = &route.waiter {
        // An input a 2026 server asked for: the call waiting for it is on one instance, this
        // one or another that finds it in Redis.
        if shared.mcp.answered(w, raw.to_vec()) {
            return Ok(());
        }
        let ttl = route.expires.saturating_sub(now).max(1);
        return match pass_on(shared, w, raw, ttl).await {
            Some(true) => Ok(()),
            Some(false) => Err((
                GatewayError::new(
                    ErrorKind::ServiceUnavailable,
                    "the answer could not be passed on to the instance that holds the call (Redis did not answer)",
                ),
                None,
            )),
            None => Err((
                GatewayError::new(
                    ErrorKind::Conflict,
                    "no call here waits for this answer: without Redis, a 2026-07-28 tool server's input is taken only by the instance that holds the call (send the answers of a call where the call went)",
                ),
                Some(INVALID_REQUEST),
            )),
        };
    }
    let message = ask::with_id(raw, &route.id)
        .ok_or_else(|| invalid("a JSON-RPC response must be an object".into()))?;
    let timeout = shared.runtime.load().config.mcp.call_timeout;
    let up_err = |why: String| {
        let e = GatewayError::upstream(format!("tool server `{}` {why}", route.slug));
        (e, None)
    };
    let up = Upstream::resolve(shared, &service.upstream_url, timeout)
        .await
        .map_err(|f| up_err(f.0))?;
    match up
        .deliver(&message, route.session.as_deref(), &route.version)
        .await
    {
        Ok(200..=299) => Ok(()),
        Ok(s) => Err(up_err(format!(
            "refused the answer with HTTP {s} (its session may be over)"
        ))),
        Err(f) => Err(up_err(f.0)),
    }
}

/// Where an answer to the input `nonce` waits in Redis for the instance holding the call.
fn input_key(prefix: &str, nonce: &str) -> String {
    format!("{prefix}:mcp:input:{nonce}")
}

/// Leaves an answer in Redis for the instance holding its call, for `ttl` seconds: `None`
/// without Redis, else whether it was written.
async fn pass_on(shared: &Shared, nonce: &str, message: &[u8], ttl: u64) -> Option<bool> {
    let redis = shared.limiter.redis.as_ref()?;
    let Some(mut conn) = redis.conn() else {
        return Some(false);
    };
    let mut cmd = redis::cmd("SET");
    cmd.arg(input_key(redis.prefix(), nonce))
        .arg(message)
        .arg("EX")
        .arg(ttl);
    let set = tokio::time::timeout(REDIS_WAIT, cmd.query_async::<()>(&mut conn)).await;
    Some(matches!(set, Ok(Ok(()))))
}

/// How long one Redis command may take here.
const REDIS_WAIT: Duration = Duration::from_secs(2);

/// Waits up to `left` for the answer to the input `nonce`: handed over on this instance
/// (`answer`), or, with Redis, left there by another instance (looked for every 100 ms).
pub async fn wait_answer(
    shared: &Shared,
    nonce: &str,
    mut answer: tokio::sync::oneshot::Receiver<Vec<u8>>,
    left: Duration,
) -> Option<Vec<u8>> {
    let redis = shared
        .limiter
        .redis
        .as_ref()
        .map(|r| (r, input_key(r.prefix(), nonce)));
    let Some((redis, key)) = redis else {
        return tokio::time::timeout(left, answer).await.ok()?.ok();
    };
    let deadline = tokio::time::Instant::now() + left;
    loop {
        let tick = tokio::time::sleep(Duration::from_millis(100));
        tokio::select! {
            got = &mut answer => return got.ok(),
            _ = tick => {}
        }
        if let Some(mut conn) = redis.conn() {
            let mut cmd = redis::cmd("GETDEL");
            cmd.arg(&key);
            let get = cmd.query_async::<Option<Vec<u8>>>(&mut conn);
            if let Ok(Ok(Some(m))) = tokio::time::timeout(REDIS_WAIT, get).await {
                return Some(m);
            }
        }
        if tokio::time::Instant::now() >= deadline {
            return None;
        }
    }
}
