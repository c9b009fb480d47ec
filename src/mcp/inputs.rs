//! A call whose answer is an event stream ([`relay`](super::relay)), and, for a 2025-era agent
//! calling a 2026-07-28 tool server, the input that server asks for: its input-required
//! result's `inputRequests` become requests to the agent on the call's stream (sampling,
//! elicitation, roots), each with a sealed id ([`asks`](super::asks)), and once every answer is
//! in, the call is sent again with them (`inputResponses`, the round's `requestState`), for
//! up to [`MAX_ROUNDS`] rounds. The call waits on this instance (a 2026 server keeps no session
//! to deliver into): an answer that reaches another instance is left in Redis for it, or
//! without Redis refused there (409) and the call times out, free. The call is held, timed
//! (`call_timeout`, all rounds together) and charged once, as any.

use crate::request::Session;
use serde_json::value::RawValue;
use tokio::sync::mpsc::unbounded_channel;
use tollgate_filters::json::raw;
use tollgate_filters::mcp::ask::{self, InputRound};

use super::asks::{wait_answer, Sealer};
use super::relay;
use crate::request::ctx::RequestCtx;
use crate::runtime::Shared;
use crate::tool_servers::client::{Failure, Upstream};
use crate::tool_servers::reply::{RelayTo, Reply};

/// The most rounds of input one call may ask for.
pub const MAX_ROUNDS: usize = 8;

/// Runs `tools/call` with `params` on `up`, relaying what the agent takes (its notifications,
/// and the server's requests when `asks`); the reply, and whether the agent's answer became an
/// event stream. Boxed: a relayed call is the rarer one and its future twice a plain call's
/// (12 KB against 5); unboxed, every call's future, copied whole when the request's future is
/// boxed, would be that large.
pub async fn call(
    shared: &Shared,
    session: &mut Session,
    ctx: &RequestCtx,
    up: Upstream<'_>,
    params: &[u8],
    asks: bool,
    sealer: &Sealer,
) -> (Result<Reply, Failure>, bool) {
    Box::pin(run(shared, session, ctx, up, params, asks, sealer)).await
}

/// [`call`], unboxed.
async fn run(
    shared: &Shared,
    session: &mut Session,
    ctx: &RequestCtx,
    up: Upstream<'_>,
    params: &[u8],
    asks: bool,
    sealer: &Sealer,
) -> (Result<Reply, Failure>, bool) {
    let (tx, mut rx) = unbounded_channel();
    let up = up.relaying(RelayTo { tx, asks });
    let first = up.request("tools/call", Some(params));
    let (mut reply, mut opened) = relay::drive(session, ctx, first, &mut rx, sealer, false).await;
    if !asks {
        return (reply, opened);
    }
    for _ in 0..MAX_ROUNDS {
        let round = match &reply {
            Ok(r) => r.result().and_then(ask::input_round),
            Err(_) => None,
        };
        let Some(round) = round else { break };
        let answers = match gather(shared, session, ctx, &up, &round, sealer, &mut opened).await {
            Ok(a) => a,
            Err(f) => return (Err(f), opened),
        };
        let Some(retry) = ask::retry_params(params, &answers, round.state.as_deref()) else {
            break;
        };
        let again = up.request("tools/call", Some(&retry));
        (reply, opened) = relay::drive(session, ctx, again, &mut rx, sealer, opened).await;
    }
    (reply, opened)
}

/// Asks the agent for one round's inputs and waits for every answer: each `result`, by key.
async fn gather(
    shared: &Shared,
    session: &mut Session,
    ctx: &RequestCtx,
    up: &Upstream<'_>,
    round: &InputRound,
    sealer: &Sealer,
    opened: &mut bool,
) -> Result<Vec<(String, Box<RawValue>)>, Failure> {
    let mut waits = Vec::new();
    for (key, method, params) in &round.requests {
        let nonce = format!("{:032x}", rand::random::<u128>());
        let answer = shared.mcp.wait_for(&nonce);
        let msg = sealer.seal_input(key, method, params.as_deref(), &nonce);
        *opened = relay::event(session, ctx, &msg, *opened).await;
        waits.push((key.clone(), nonce, answer));
    }
    let mut answers = Vec::new();
    let mut failed = None;
    for (key, nonce, answer) in waits {
        let got = match failed {
            None => wait_answer(shared, &nonce, answer, up.left()).await,
            Some(_) => None,
        };
        shared.mcp.unwait(&nonce);
        if failed.is_some() {
            continue;
        }
        match got.map(|m| result_of(&m)) {
            Some(Ok(r)) => answers.push((key, r)),
            Some(Err(why)) => {
                failed = Some(format!(
                    "asked for input `{key}`, which the agent refused ({why})"
                ))
            }
            None => {
                failed = Some(format!(
                    "asked for input `{key}`, which the agent did not give in time"
                ))
            }
        }
    }
    match failed {
        Some(f) => Err(Failure(f)),
        None => Ok(answers),
    }
}

/// An agent's answer: its `result`, or why not (its error's message).
fn result_of(message: &[u8]) -> Result<Box<RawValue>, String> {
    let members = raw::parse_object(message).map_err(|_| "not JSON".to_owned())?;
    if let Some(r) = raw::get(&members, "result") {
        return Ok(r.to_owned());
    }
    let error = raw::get(&members, "error").and_then(raw::object);
    let why = error
        .as_ref()
        .and_then(|e| raw::get(e, "message"))
        .and_then(raw::as_str)
        .map(|m| m.into_owned());
    Err(why.unwrap_or_else(|| "an error".to_owned()))
}
