//! Google's Gemini API in front: `POST /v1beta/models/{model}:generateContent`,
//! `:streamGenerateContent` (`alt=sse`, or one JSON array without it), `:countTokens`, and
//! `GET /v1beta/models[/{model}]`. Keys come as `x-goog-api-key`, `?key=` or a bearer token
//! (`auth/caller.rs`); every answer, errors included, is in Google's shape (`ctx.wire`).
//!
//! A generate request is the chat pipeline: the caller authenticated and admitted by the route
//! table → read and check the body → written as the internal chat request → route, hold,
//! forward ([`crate::pipeline::serve`]; the attempt writes the reply as a Gemini response, a
//! stream as Gemini chunks) → settled once and answered ([`crate::pipeline::settle_and_answer`]).

use crate::request::Session;
use serde_json::{json, Value};
use tollgate_filters::gemini::reply::completion_to_gemini;
use tollgate_filters::gemini::request::parse_gemini_request;
use tollgate_filters::gemini::stream::GeminiStream;
use tollgate_filters::gemini::{split_method, Method};
use tollgate_filters::openai::request::parse_chat_request;
use tollgate_filters::route::{ModelKind, Target};
use tollgate_filters::translator::StreamTranslator;
use tollgate_filters::{tokens, ErrorKind, GatewayError, Usage};

use crate::auth::caller::Caller;
use crate::config::Provider;
use crate::pipeline::front::{Front, FrontDoor};
use crate::pipeline::tokenize::off_thread;
use crate::pipeline::translate;
use crate::pipeline::{serve, settle_and_answer};
use crate::request::ctx::{Door, RequestCtx, Wire};
use crate::request::{body, respond};
use crate::runtime::Shared;

/// Google's Gemini API (`/v1beta/models/…`, `/v1/models/{model}:…`).
pub const GEMINI: Door = Door {
    name: "gemini",
    wire: Wire::Gemini,
    what: "chat completion",
};

fn not_found(what: &str) -> GatewayError {
    GatewayError::new(ErrorKind::NotFound, what.to_owned())
}

/// `POST /v1beta/models/{model}:{method}` (`segment` is `{model}:{method}`).
pub async fn handle(
    shared: &Shared,
    session: &mut Session,
    ctx: &mut RequestCtx,
    caller: &Caller,
    segment: &str,
) -> Result<(), GatewayError> {
    let Some((model, method)) = split_method(segment) else {
        return Err(not_found(&format!(
            "no method `{segment}`: generateContent, streamGenerateContent or countTokens"
        )));
    };
    let rt = shared.runtime.load_full();
    let raw = match body::read_within(session, &rt.config).await {
        Ok(raw) => raw,
        Err(e) => return settle_and_answer(shared, session, ctx, Err(e)).await,
    };
    crate::request_log::capture::request(ctx, caller, &rt.config, &raw);
    let req = match parse_gemini_request(&raw) {
        Ok(r) => r,
        Err(e) => return settle_and_answer(shared, session, ctx, Err(e)).await,
    };
    if method == Method::CountTokens {
        return count_tokens(shared, session, ctx, caller, model, req.texts).await;
    }
    let stream = method == Method::Stream;
    let sse = query_param(session, "alt").as_deref() == Some("sse");
    let chat_body = req.chat_body(model, stream);
    let result = match parse_chat_request(&chat_body) {
        Ok(mut chat) => {
            // The relay reads the usage chunk itself: Gemini carries usage in its last chunk.
            chat.client_wants_usage = true;
            let door = Gemini {
                id: response_id(),
                sse,
            };
            let front = Front {
                door: &door,
                resume: None,
                cache: Default::default(),
            };
            serve(shared, session, ctx, caller, &chat, front).await
        }
        Err(e) => Err(e),
    };
    settle_and_answer(shared, session, ctx, result).await
}

/// `:countTokens`: `{"totalTokens": n}` from the gateway's tokenizer (as the Messages API's
/// count_tokens), for a model the caller may use; free of credits.
async fn count_tokens(
    shared: &Shared,
    session: &mut Session,
    ctx: &mut RequestCtx,
    caller: &Caller,
    model: &str,
    texts: String,
) -> Result<(), GatewayError> {
    let rt = shared.runtime.load();
    let resolution = rt.config.catalog.resolve(model, crate::clock::now_secs())?;
    if let (Caller::Guest, Target::Model(i)) = (caller, resolution.target) {
        if !rt.config.catalog.model(i).guest {
            return Err(GatewayError::new(
                ErrorKind::Authentication,
                format!("model `{model}` needs an API key: send x-goog-api-key: <API key>"),
            ));
        }
    }
    let n = off_thread(shared, move || tokens::count_text(&texts))
        .await
        .ok_or_else(|| GatewayError::internal("the token count failed"))?;
    respond::json(session, ctx, 200, &json!({"totalTokens": n}), &[]).await;
    Ok(())
}

/// `GET /v1beta/models`: the chat models and aliases as Gemini lists them.
pub async fn models(
    shared: &Shared,
    session: &mut Session,
    ctx: &mut RequestCtx,
) -> Result<(), GatewayError> {
    let rt = shared.runtime.load();
    let now = crate::clock::now_secs();
    let catalog = &rt.config.catalog;
    let mut list: Vec<Value> = catalog
        .models()
        .iter()
        .filter(|m| m.kind == ModelKind::Chat && !m.retired(now))
        .map(|m| entry(&m.id, m.max_output_tokens))
        .collect();
    for (alias, target) in catalog.aliases_at(now) {
        if let Some(m) = catalog.models().iter().find(|m| m.id == target) {
            list.push(entry(alias, m.max_output_tokens));
        }
    }
    respond::json(session, ctx, 200, &json!({ "models": list }), &[]).await;
    Ok(())
}

/// `GET /v1beta/models/{model}`.
pub async fn model(
    shared: &Shared,
    session: &mut Session,
    ctx: &mut RequestCtx,
    name: &str,
) -> Result<(), GatewayError> {
    let rt = shared.runtime.load();
    let now = crate::clock::now_secs();
    let catalog = &rt.config.catalog;
    let found = match catalog.resolve(name, now)?.target {
        Target::Model(i) if catalog.model(i).kind == ModelKind::Chat => {
            entry(name, catalog.model(i).max_output_tokens)
        }
        _ => return Err(not_found(&format!("model `{name}` is not a chat model"))),
    };
    respond::json(session, ctx, 200, &found, &[]).await;
    Ok(())
}

fn entry(name: &str, output: u64) -> Value {
    json!({"name": format!("models/{name}"), "baseModelId": name, "version": "1",
           "displayName": name, "outputTokenLimit": output,
           "supportedGenerationMethods": ["generateContent", "streamGenerateContent", "countTokens"]})
}

/// A value of the request's query string.
fn query_param(session: &Session, name: &str) -> Option<String> {
    session.req_header().uri.query().and_then(|q| {
        q.split('&')
            .filter_map(|p| p.split_once('='))
            .find(|(k, _)| *k == name)
            .map(|(_, v)| v.to_owned())
    })
}

fn response_id() -> String {
    let (a, b): (u64, u64) = rand::random();
    format!("{a:016x}{b:016x}")
}

/// The Gemini door: the chat reply written as a Gemini response, a stream as Gemini chunks
/// (never resumed: no seam to continue at).
struct Gemini {
    /// The `responseId`.
    id: String,
    /// Stream as Server-Sent Events (`alt=sse`), else as one JSON array.
    sse: bool,
}

impl FrontDoor for Gemini {
    fn resumes_on(&self, _provider: Option<&Provider>) -> bool {
        false
    }

    fn reply(
        &self,
        wire: Wire,
        provider: &Provider,
        raw: &[u8],
        model: &str,
        count: &mut dyn FnMut(&str) -> Usage,
    ) -> Result<(Vec<u8>, Usage, bool), String> {
        let kind = provider.kind.wire();
        let (chat, usage, counted) = translate::chat_reply(wire, kind, raw, model, count)?;
        let object = completion_to_gemini(&chat, model, &self.id)?;
        Ok((object.to_string().into_bytes(), usage, counted))
    }

    fn stream(
        &self,
        wire: Wire,
        provider: &Provider,
        model: &str,
        client_wants_usage: bool,
        _resume: bool,
    ) -> Box<dyn StreamTranslator> {
        let chat = translate::leg(wire, provider.kind.wire(), model, client_wants_usage);
        Box::new(GeminiStream::new(chat, model, &self.id, self.sse))
    }
}
