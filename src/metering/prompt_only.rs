//! The hold of a request that is charged for its prompt only (embeddings): the estimated
//! prompt tokens at the model's input rate, nothing for output. Placed like a chat request's
//! hold (against a credit lease, else as a hold row), settled the same way.

use tollgate_filters::credits::size_hold;
use tollgate_filters::route::ModelSpec;

use super::{place, Hold, Meter};
use crate::ledger::StoreError;

/// Places the hold for `prompt_tokens` of `model` for `(request id, account, key)`.
pub async fn hold(
    meter: &Meter<'_>,
    who: (&str, &str, &str),
    prompt_tokens: u64,
    model: &ModelSpec,
) -> Result<Hold, StoreError> {
    let size = size_hold(prompt_tokens, 0, 1, model.input_micros_per_1k, 0);
    place(meter, who, &size, prompt_tokens).await
}
