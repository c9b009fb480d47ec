//! `POST /v1/embeddings`: the OpenAI embeddings request in front of the embedding models
//! (`[[models]] kind = "embedding"`), metered like chat: the caller authenticated and admitted
//! by the route table → read and check the body → the model (an embedding model, named: a tier
//! picks chat models) → a hold for the most tokens the input can count at the input rate → the
//! model's endpoints in turn → settle, once, at the provider's `prompt_tokens` (the tokenizer's
//! count when it sent none) → answer.
//!
//! Failover stays within the model's own endpoint pool (DESIGN.md, Rules: Front doors): vectors
//! of two models are not comparable, so a request never falls over to another model.

use std::time::Instant;

use crate::request::Session;
use bytes::BytesMut;
use tollgate_filters::credits::format_credits;
use tollgate_filters::openai::embeddings::{
    parse_embeddings_request, reply_usage, upstream_body, write_reply, EmbeddingsRequest,
};
use tollgate_filters::route::{ModelKind, ModelSpec, Target};
use tollgate_filters::time::http_date;
use tollgate_filters::{tokens, ErrorKind, GatewayError, Usage};

use crate::auth::caller::Caller;
use crate::limits::budgets::Caps;
use crate::metering::charge::Charge;
use crate::metering::{prompt_only, Hold};
use crate::pipeline::forward::Reply;
use crate::pipeline::settle_and_answer;
use crate::pipeline::tokenize::off_thread;
use crate::request::body;
use crate::request::ctx::{Delivery, Door, RequestCtx, Wire};
use crate::runtime::{Runtime, Shared};
use crate::upstream::failover::{
    check_status, failover, record_answered, record_failover, AttemptError, Failover,
};
use crate::upstream::head::Request;
use crate::upstream::wire::BodyError;
use crate::upstream::{provider, wire, Endpoint, Pool};

/// OpenAI's embeddings (`/v1/embeddings`).
pub const EMBEDDINGS: Door = Door {
    name: "embeddings",
    wire: Wire::OpenAi,
    what: "embeddings",
};

/// Largest embeddings reply the gateway buffers: 2,048 inputs of 3,072 floats as JSON text.
const MAX_REPLY: usize = 96 * 1024 * 1024;

/// Runs an embeddings request of `caller` (resolved and admitted by the route table).
pub async fn handle(
    shared: &Shared,
    session: &mut Session,
    ctx: &mut RequestCtx,
    caller: &Caller,
) -> Result<(), GatewayError> {
    let result = pipeline(shared, session, ctx, caller).await;
    // Settled once, before the answer, by the chat pipeline's own ending.
    settle_and_answer(shared, session, ctx, result.map(Reply::Json)).await
}

async fn pipeline(
    shared: &Shared,
    session: &mut Session,
    ctx: &mut RequestCtx,
    caller: &Caller,
) -> Result<Vec<u8>, GatewayError> {
    let rt = shared.runtime.load_full();
    let raw = body::read_within(session, &rt.config).await?;
    crate::request_log::capture::request(ctx, caller, &rt.config, &raw);
    let req = parse_embeddings_request(&raw)?;
    ctx.model_requested = Some(req.model.to_string());
    let now = crate::clock::now_secs();
    let catalog = &rt.config.catalog;
    let resolution = catalog.resolve(&req.model, now)?;
    let Target::Model(i) = resolution.target else {
        return Err(GatewayError::invalid(format!(
            "model: `{}` is a tier, and tiers pick chat models; name an embedding model",
            req.model
        )));
    };
    if let Caller::Key(k) = caller {
        if let Some(ids) = crate::auth::allowlist::of_key(catalog, k, now) {
            if !ids.contains(&i) {
                return Err(crate::auth::allowlist::not_found(&req.model));
            }
        }
    }
    let model = catalog.model(i);
    if model.kind != ModelKind::Embedding {
        return Err(GatewayError::invalid(format!(
            "model: `{}` is a chat model; embeddings need an embedding model (chat models answer POST /v1/chat/completions)",
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
    let pool = rt
        .pools
        .get(&model.provider)
        .filter(|p| p.has_usable_endpoint())
        .ok_or_else(|| {
            GatewayError::upstream(format!("no healthy upstream can serve {}", model.id))
        })?;
    if let Caller::Key(key) = caller {
        let meter = shared.meter()?;
        let who = (ctx.request_id.as_str(), &*key.account_id, &*key.key_id);
        let prompt = (req.estimated_tokens, req.bound_tokens);
        match prompt_only::hold(&meter, who, prompt, model, Caps::of(key)).await? {
            Hold::Placed {
                hold,
                budget,
                balance,
                reserved,
            } => {
                ctx.set_header("X-Credits-Remaining", format_credits(balance));
                ctx.metered = Some(Charge::new(hold, budget).within(reserved));
            }
            Hold::OverBudget { left, which } => {
                return Err(crate::metering::holds::over_budget(
                    Caps::of(key),
                    which,
                    left,
                ))
            }
            Hold::Refused { balance } => {
                if let Some(b) = balance {
                    ctx.set_header("X-Credits-Remaining", format_credits(b));
                }
                return Err(GatewayError::new(
                    ErrorKind::InsufficientCredits,
                    "the credit balance cannot pay for this request's input",
                ));
            }
        }
    }
    if let Some(n) = resolution.notice {
        ctx.set_header("Deprecation", format!("@{}", n.deprecated_at));
        ctx.set_header("Sunset", http_date(n.retires_at));
    }
    forward(shared, &rt, ctx, &req, model, pool).await
}

/// The model's endpoints in turn, until one answers; never another model.
async fn forward(
    shared: &Shared,
    rt: &Runtime,
    ctx: &mut RequestCtx,
    req: &EmbeddingsRequest<'_>,
    model: &ModelSpec,
    pool: &Pool,
) -> Result<Vec<u8>, GatewayError> {
    let timeouts = &rt.config.timeouts;
    let deadline = Instant::now() + timeouts.response;
    let body = upstream_body(req, &model.upstream_model);
    let m = &shared.metrics;
    let mut last = String::from("no endpoint was usable");
    for endpoint in pool.usable_endpoints() {
        if Instant::now() >= deadline {
            break;
        }
        match attempt(shared, rt, ctx, pool, &endpoint, &body, deadline).await {
            Ok(reply) => {
                record_answered(m, pool, &endpoint, "ok");
                return finish(shared, ctx, req, model, pool, &reply).await;
            }
            Err(AttemptError::Client(e)) => {
                record_answered(m, pool, &endpoint, "rejected");
                return Err(e);
            }
            Err(AttemptError::Failover { reason, detail }) => {
                last = record_failover(
                    m,
                    pool,
                    &endpoint,
                    &model.id,
                    &ctx.request_id,
                    reason,
                    &detail,
                );
            }
        }
    }
    Err(GatewayError::upstream(format!(
        "every endpoint of {} failed (embeddings never fall over to another model); last: {last}",
        model.id
    )))
}

/// One endpoint: the whole reply within the deadline.
async fn attempt(
    shared: &Shared,
    rt: &Runtime,
    ctx: &RequestCtx,
    pool: &Pool,
    endpoint: &Endpoint,
    body: &[u8],
    deadline: Instant,
) -> Result<BytesMut, AttemptError> {
    let timeouts = &rt.config.timeouts;
    let p = &pool.provider;
    let path = provider::embeddings_path(&endpoint.url);
    let build = || -> pingora::Result<Vec<u8>> {
        let mut r = Request::new("POST", &path)?
            .header("Host", &endpoint.url.authority())?
            .header("Content-Type", "application/json")?
            .header("Accept-Encoding", "identity")?
            .header("Accept", "application/json")?
            .header("X-Request-Id", &ctx.request_id)?;
        if let Some((name, value)) = provider::auth_header(p) {
            r = r.header(name, &value)?;
        }
        Ok(r.body(body))
    };
    let request = build().map_err(|e| failover(Failover::RequestBuild, e))?;
    let peer = pool.peer(endpoint, timeouts.connect, timeouts.response);
    let remaining = deadline.saturating_duration_since(Instant::now());
    let exchange = async {
        let mut up = wire::exchange(&shared.connector, &peer, &request)
            .await
            .map_err(|e| match e {
                wire::Failure::Connect(e) => failover(Failover::Connect, e),
                wire::Failure::Exchange(e) => failover(Failover::Send, e),
            })?;
        check_status(&mut up, timeouts.stream_chunk).await?;
        let buf = match up.read_to_end(MAX_REPLY).await {
            Ok(buf) => buf,
            Err(BodyError::TooLarge) => {
                return Err(failover(Failover::BadReply, "upstream reply too large"))
            }
            Err(BodyError::Read(e)) => return Err(failover(Failover::Read, e)),
        };
        up.release(&shared.connector, &peer, peer.options.idle_timeout);
        Ok(buf)
    };
    match pingora::time::timeout(remaining, exchange).await {
        Ok(r) => r,
        Err(_) => Err(failover(
            Failover::Timeout,
            format!("no complete reply within {remaining:?}"),
        )),
    }
}

/// The reply for the client, and what served it for the settlement.
async fn finish(
    shared: &Shared,
    ctx: &mut RequestCtx,
    req: &EmbeddingsRequest<'_>,
    model: &ModelSpec,
    pool: &Pool,
    reply: &[u8],
) -> Result<Vec<u8>, GatewayError> {
    let reported = reply_usage(reply).map_err(|e| {
        GatewayError::upstream(format!(
            "{} sent a reply that is not embeddings: {e}",
            model.id
        ))
    })?;
    let (prompt_tokens, counted) = match reported {
        Some(n) => (n, false),
        None => {
            // No usage from the provider: count the texts off the proxy thread.
            let texts: Vec<String> = req.texts.iter().map(|t| t.to_string()).collect();
            let token_inputs = req.token_inputs;
            let n = off_thread(shared, move || {
                texts.iter().map(|t| tokens::count_text(t)).sum::<u64>() + token_inputs
            })
            .await
            .unwrap_or(req.estimated_tokens);
            (n, true)
        }
    };
    ctx.served = Some(Delivery {
        model: model.id.clone(),
        provider: pool.provider.name.clone(),
        rates: model.rates(),
        usage: Usage {
            prompt_tokens,
            ..Usage::default()
        },
        usage_counted: counted,
    });
    ctx.status = 200;
    Ok(write_reply(reply, &model.id, prompt_tokens))
}
