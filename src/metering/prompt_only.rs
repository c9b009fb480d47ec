//! The hold of a request that is charged for its prompt only (embeddings): the estimated
//! prompt tokens at the model's input rate, nothing for output. Placed like a chat request's
//! hold (against a credit lease, else as a hold row), settled the same way.

use tollgate_filters::credits::size_hold;
use tollgate_filters::route::ModelSpec;

use tollgate_filters::budget::Period;

use super::{holds, Hold, Meter};
use crate::ledger::StoreError;

/// Places the hold for `prompt_tokens` of `model` for `(request id, account, key)`, within
/// the key's `budget` when it has one.
pub async fn hold(
    meter: &Meter<'_>,
    who: (&str, &str, &str),
    prompt_tokens: u64,
    model: &ModelSpec,
    budget: Option<(i64, Period)>,
) -> Result<Hold, StoreError> {
    let size = size_hold(prompt_tokens, 0, 1, model.input_micros_per_1k, 0);
    holds::place(meter, who, size, prompt_tokens, budget).await
}
