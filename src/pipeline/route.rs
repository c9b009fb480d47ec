//! The route a request is forwarded on: the pipeline's request, its front door and its
//! candidates, shared by the forwarding loop (`forward.rs`) and a stream's continuation
//! (`resume.rs`), which walk the same candidates in the same order.

use tollgate_filters::openai::request::ChatRequest;
use tollgate_filters::route::ModelSpec;

use super::front::Front;
use crate::runtime::{Runtime, Shared};
use crate::upstream::Pool;

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
}
