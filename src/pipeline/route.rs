//! The route a request is forwarded on: the pipeline's request, its front door and its
//! candidates, shared by the forwarding loop (`forward.rs`) and a stream's continuation
//! (`resume.rs`), which walk the same candidates in the same order; the endpoints of each, its
//! conversation's endpoint first when it is sticky (`crate::routing`).

use std::sync::Arc;

use tollgate_filters::openai::request::ChatRequest;
use tollgate_filters::route::ModelSpec;

use super::front::Front;
use crate::routing::{Served, Turn};
use crate::runtime::{Runtime, Shared};
use crate::upstream::{Endpoint, Pool};

/// A request ready to forward.
pub struct Forward<'a> {
    pub shared: &'a Shared,
    pub rt: &'a Runtime,
    pub req: &'a ChatRequest<'a>,
    /// What the client's front door adds (the Anthropic body, a Responses stream, a legacy
    /// completion, a Gemini reply).
    pub front: Front<'a>,
    /// Catalog indices of the models to try, in order.
    pub candidates: &'a [usize],
    /// A stream cut after its commit is continued on a later candidate (`resume.rs`).
    pub resume: bool,
    /// Whether an Anthropic body gets prompt-cache marks (`breakpoints.rs`).
    pub breakpoints: super::breakpoints::Breakpoints,
    /// The conversation of a sticky request, and where it was served last.
    pub sticky: Option<&'a Turn>,
}

impl<'a> Forward<'a> {
    /// The candidates from position `from` on, each with its position, its model and its
    /// provider's pool (a candidate whose pool is gone after a reload is passed over).
    pub fn candidates_from(
        &self,
        from: usize,
    ) -> impl Iterator<Item = (usize, &'a ModelSpec, &'a Pool)> + 'a {
        let rt = self.rt;
        self.candidates
            .iter()
            .enumerate()
            .skip(from)
            .filter_map(move |(at, &mi)| {
                let model = rt.config.catalog.model(mi);
                rt.pools
                    .get(&model.provider)
                    .map(|pool| (at, model, &**pool))
            })
    }

    /// The endpoints to try for `model` in its pool, in order: the pool's usable ones (one
    /// round-robin step), the conversation's own first when it is one of them.
    pub fn endpoints(&self, model: &ModelSpec, pool: &Pool) -> Vec<Arc<Endpoint>> {
        let mut endpoints = pool.usable_endpoints();
        if let Some(turn) = self.sticky {
            turn.order(model, &mut endpoints);
        }
        endpoints
    }

    /// Records that `endpoint` of `pool` served the request as `model`, sent `body`: where its
    /// conversation's next turn goes first.
    pub async fn served(&self, model: &ModelSpec, pool: &Pool, endpoint: &Endpoint, body: &[u8]) {
        let Some(turn) = self.sticky else {
            return;
        };
        let served = Served {
            config: &self.rt.config.routing.sticky,
            req: self.req,
            model,
            pool,
            endpoint,
            body,
        };
        if turn.served(self.shared, served) {
            // One turn of the scheduler lets the write just spawned reach the store's
            // connection before the reply goes out, so the client's next turn, on any
            // instance, is queued behind it; the request does not wait for Redis's answer.
            tokio::task::yield_now().await;
        }
    }
}
