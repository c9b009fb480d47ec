//! The pipeline every metered model request goes through, whichever front door it came in by
//! (`crate::fronts` parses each door's body into the internal chat request; what the door
//! adds, the pipeline asks of its [`front::FrontDoor`]).
//!
//! (the caller authenticated and admitted by the route table; the body read and parsed by its
//! front door) → resolve the model → route candidates → credit hold (the request's charge) →
//! forward ([`forward`]: one [`attempt`] per candidate and endpoint, streams in [`stream`], a
//! cut stream continued in [`resume`], each returning what it served; the door translates the
//! reply, from the chat translations of [`translate`]; a request the response cache has is
//! answered from it instead, by [`cached`]) → settle, once → answer ([`settle_and_answer`]). A request that fails
//! anywhere after the hold is settled too (at zero cost when no output was produced), so every
//! held request ends with exactly one usage row.

pub mod attempt;
pub mod breakpoints;
pub mod cached;
pub mod cut;
pub mod forward;
pub mod front;
pub mod resume;
pub mod route;
pub mod settle;
pub mod stream;
pub mod tokenize;
pub mod translate;

pub use settle::settle_and_answer;

use crate::request::Session;
use tollgate_filters::credits::format_credits;
use tollgate_filters::openai::request::ChatRequest;
use tollgate_filters::route::{ModelKind, ModelSpec, Target};
use tollgate_filters::time::http_date;
use tollgate_filters::{ErrorKind, GatewayError};

use self::front::Front;
use crate::auth::allowlist;
use crate::auth::caller::Caller;
use crate::ledger::KeyAuth;
use crate::limits::budgets::Caps;
use crate::metering::charge::Charge;
use crate::metering::holds::HoldRequest;
use crate::metering::{self, Hold};
use crate::request::ctx::RequestCtx;
use crate::routing::Turn;
use crate::runtime::{Runtime, Shared};
use tollgate_filters::sticky::Signal;

/// Serves an internal chat request `req` (a chat-completions client's own, or what another
/// front door wrote): resolve the model, route, hold, forward. Returns what was served, for
/// [`settle_and_answer`].
pub async fn serve(
    shared: &Shared,
    session: &mut Session,
    ctx: &mut RequestCtx,
    caller: &Caller,
    req: &ChatRequest<'_>,
    front: Front<'_>,
) -> Result<forward::Reply, GatewayError> {
    let rt = shared.runtime.load_full();
    ctx.model_requested = Some(req.model.to_string());
    let now = crate::clock::now_secs();
    let catalog = &rt.config.catalog;
    let resolution = catalog.resolve(&req.model, now)?;
    if let Target::Model(i) = resolution.target {
        check_model(catalog.model(i), req, caller, &front)?;
    }
    let mut candidates = candidates(&rt, caller, resolution.target, req, &front, now)?;
    let sticky = sticky_turn(shared, &rt, session, caller, req, &front).await;
    if let Some(turn) = &sticky {
        turn.prefer(catalog, &mut candidates);
    }
    // A request the first candidate cannot carry faithfully is refused before anything is
    // held (a later candidate it cannot be carried to is skipped instead).
    let first = catalog.model(candidates[0]);
    if let Some(pool) = rt.pools.get(&first.provider) {
        front.door.check_first(req, first, &pool.provider)?;
    }
    if let Caller::Key(key) = caller {
        hold(shared, ctx, key, first, req).await?;
    }
    if let Some(n) = resolution.notice {
        ctx.set_header("Deprecation", format!("@{}", n.deprecated_at));
        ctx.set_header("Sunset", http_date(n.retires_at));
    }
    if let Some(reply) = cached::look_up(shared, &rt, (session, ctx), caller, req, &front).await? {
        return Ok(reply);
    }
    let resume = resumes(&rt, caller, resolution.target, req, &front);
    let f = forward::Forward {
        shared,
        rt: &rt,
        req,
        front,
        candidates: &candidates,
        resume,
        breakpoints: breakpoints::Breakpoints::of(&rt, caller, req, &candidates),
        sticky: sticky.as_ref(),
    };
    forward::run(&f, session, ctx).await
}

/// The request's conversation and where it was served last, when sticky routing applies to
/// it (`crate::routing`): named by the `x-session-id` header, else by what its door reads in
/// the body, else by the prompt's beginning.
async fn sticky_turn(
    shared: &Shared,
    rt: &Runtime,
    session: &Session,
    caller: &Caller,
    req: &ChatRequest<'_>,
    front: &Front<'_>,
) -> Option<Turn> {
    let header = session.req_header().headers.get("x-session-id");
    let signal = match header.map(|h| h.as_bytes()).filter(|h| !h.is_empty()) {
        Some(id) => Signal::Named(id),
        None => front.door.conversation(req),
    };
    let turn = Turn::of(&rt.config.routing.sticky, caller.account_id(), req, signal)?;
    Some(turn.look_up(shared).await)
}

/// Refuses a request for a model that cannot serve it here: an embedding model, a model a
/// guest may not use, a model that does not serve the legacy completions asked of it.
fn check_model(
    model: &ModelSpec,
    req: &ChatRequest<'_>,
    caller: &Caller,
    front: &Front<'_>,
) -> Result<(), GatewayError> {
    if model.kind == ModelKind::Embedding {
        return Err(GatewayError::invalid(format!(
            "model: `{}` is an embedding model; it answers POST /v1/embeddings",
            req.model
        )));
    }
    if matches!(caller, Caller::Guest) && !model.guest {
        return Err(GatewayError::new(
            ErrorKind::Authentication,
            format!(
                "model `{}` needs an API key: send Authorization: Bearer <API key>",
                req.model
            ),
        ));
    }
    if !front.door.serves(Some(model)) {
        return Err(front.door.not_served(&req.model));
    }
    Ok(())
}

/// The models that may serve the request, in failover order: the target's candidates with a
/// usable endpoint, within the key's allowlist (a model outside it does not exist for the
/// key, and failover never leaves it); never empty.
fn candidates(
    rt: &Runtime,
    caller: &Caller,
    target: Target,
    req: &ChatRequest<'_>,
    front: &Front<'_>,
    now: i64,
) -> Result<Vec<usize>, GatewayError> {
    let catalog = &rt.config.catalog;
    if matches!(target, Target::Tier(_)) && !front.door.serves(None) {
        return Err(front.door.not_served(&req.model));
    }
    let allowed = match caller {
        Caller::Key(k) => allowlist::of_key(catalog, k, now),
        _ => None,
    };
    if let (Some(ids), Target::Model(i)) = (&allowed, target) {
        if !ids.contains(&i) {
            return Err(allowlist::not_found(&req.model));
        }
    }
    let guest = matches!(caller, Caller::Guest);
    let mut candidates = catalog.candidates(target, now, guest, |m| {
        // A door's request goes only to the models that serve it.
        front.door.serves(Some(m))
            && rt
                .pools
                .get(&m.provider)
                .is_some_and(|p| p.has_usable_endpoint())
    });
    if let Some(ids) = &allowed {
        candidates.retain(|i| ids.contains(i));
        if candidates.is_empty() && matches!(target, Target::Tier(_)) {
            return Err(allowlist::not_found(&req.model));
        }
    }
    if candidates.is_empty() {
        let what = match target {
            Target::Model(i) => catalog.model(i).id.clone(),
            Target::Tier(t) => format!("tier {}", t.as_str()),
        };
        return Err(GatewayError::upstream(format!(
            "no healthy upstream can serve {what}"
        )));
    }
    Ok(candidates)
}

/// Whether a stream resumes after a cut: when its request says so, else by its key's plan or
/// its model. A door whose stream has no seam to continue at never resumes.
fn resumes(
    rt: &Runtime,
    caller: &Caller,
    target: Target,
    req: &ChatRequest<'_>,
    front: &Front<'_>,
) -> bool {
    if !req.stream || !front.door.resumes_on(None) {
        return false;
    }
    let plan = match caller {
        Caller::Key(k) => Some(k.plan.as_str()),
        _ => None,
    };
    let model_id = match target {
        Target::Model(i) => rt.config.catalog.model(i).id.as_str(),
        Target::Tier(_) => &req.model,
    };
    front
        .resume
        .unwrap_or_else(|| rt.config.routing.resumes_by_default(plan, model_id))
}

/// Counts a keyed request's estimated tokens (the prompt, and `max_tokens` per completion
/// when the client set it) against its key's and plan's tokens per minute.
async fn admit_tokens(
    shared: &Shared,
    key: &KeyAuth,
    first: &ModelSpec,
    req: &ChatRequest<'_>,
) -> Result<Option<crate::limits::tokens::Counted>, GatewayError> {
    let rt = shared.runtime.load();
    let plans = &rt.config.plans;
    if key.limits.tokens_per_minute.is_none() && plans.usage_limits(&key.plan).0.is_none() {
        return Ok(None);
    }
    let prompt = tollgate_filters::credits::estimate_prompt_tokens(req, req.raw_len);
    let output = req
        .max_tokens
        .map_or(0, |m| m.min(first.max_output_tokens).saturating_mul(req.n));
    let estimate = prompt.saturating_add(output);
    let (limiter, metrics) = (&shared.limiter, &shared.metrics);
    crate::auth::key_limits::admit_tokens(limiter, plans, metrics, key, estimate).await
}

/// Places the credit hold of a keyed request, sized for its first candidate, as the request's
/// charge (`ctx.metered`).
async fn hold(
    shared: &Shared,
    ctx: &mut RequestCtx,
    key: &KeyAuth,
    first: &ModelSpec,
    req: &ChatRequest<'_>,
) -> Result<(), GatewayError> {
    let meter = shared.meter()?;
    let ask = HoldRequest {
        request_id: &ctx.request_id,
        account_id: &key.account_id,
        key_id: &key.key_id,
        max_tokens: req.max_tokens,
        choices: req.n,
        body: req,
        body_bytes: req.raw_len,
        caps: Caps::of(key),
    };
    let tokens = admit_tokens(shared, key, first, req).await?;
    match metering::holds::hold(&meter, &ask, first).await? {
        Hold::Placed {
            hold,
            budget,
            balance,
            reserved,
        } => {
            ctx.set_header("X-Credits-Remaining", format_credits(balance));
            let charge = Charge::new(hold, budget).within(reserved).counting(tokens);
            ctx.metered = Some(charge);
            Ok(())
        }
        Hold::OverBudget { left, which } => {
            Err(metering::holds::over_budget(Caps::of(key), which, left))
        }
        Hold::Refused { balance } => {
            if let Some(b) = balance {
                ctx.set_header("X-Credits-Remaining", format_credits(b));
            }
            Err(GatewayError::new(
                ErrorKind::InsufficientCredits,
                "the credit balance cannot pay for this request's prompt and one output token",
            ))
        }
    }
}
