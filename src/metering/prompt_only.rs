//! The hold of a request that is charged for its prompt only (embeddings): at the model's input
//! rate, nothing for output, sized for the most tokens the prompt can count and taking at least
//! its estimate (a balance between the two holds all it has). Placed like a chat request's
//! hold (against a credit lease, else as a hold row), settled the same way: at the provider's
//! count, and above the hold from the balance.

use tollgate_filters::credits::size_hold;
use tollgate_filters::route::ModelSpec;

use crate::limits::budgets::Caps;

use super::{holds, Hold, Meter};
use crate::ledger::StoreError;

/// Places the hold for a prompt of `(estimated, bound)` tokens of `model` for `(request id,
/// account, key)`, within the key's budget and member's cap where it has them.
pub async fn hold(
    meter: &Meter<'_>,
    who: (&str, &str, &str),
    (estimated, bound): (u64, u64),
    model: &ModelSpec,
    caps: Caps<'_>,
) -> Result<Hold, StoreError> {
    let rate = model.input_micros_per_1k;
    let mut size = size_hold(bound.max(estimated), 0, 1, rate, 0);
    size.minimum = size_hold(estimated, 0, 1, rate, 0).minimum;
    holds::place(meter, who, size, estimated, caps).await
}
