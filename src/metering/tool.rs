//! Credits for one tool call (DESIGN.md, Rules: MCP): the price is held before the call, on the
//! same credit leases as chat where they can pay; a call that succeeded is charged the price and
//! its developer credited `(price × share + 99) / 100` in the same transaction (the usage row's
//! write, or its lease round); a failed call is charged nothing and recorded as failed.

use tollgate_filters::credits::{HoldSize, MICROS_PER_CREDIT};
use tollgate_filters::mcp::{developer_share, joined_name};

use super::{write, Hold, Meter, PlacedHold};
use crate::ledger::{Settlement, StoreError, ToolCharge};

/// One tool call's facts, for its hold and usage row.
pub struct ToolCall<'a> {
    pub request_id: &'a str,
    pub account_id: &'a str,
    pub key_id: &'a str,
    pub slug: &'a str,
    pub tool: &'a str,
    pub developer_id: &'a str,
    /// Whole credits per call.
    pub price: u64,
    /// `[mcp] developer_share_percent`.
    pub share_percent: u64,
    /// The key's budget and member's cap, where it has them: the price is held against them
    /// too.
    pub caps: crate::limits::budgets::Caps<'a>,
}

impl ToolCall<'_> {
    fn price_micros(&self) -> i64 {
        i64::try_from(self.price)
            .unwrap_or(i64::MAX)
            .saturating_mul(MICROS_PER_CREDIT)
    }
}

/// Holds the call's price (all of it, or `Refused`).
pub async fn hold(meter: &Meter<'_>, call: &ToolCall<'_>) -> Result<Hold, StoreError> {
    let price = call.price_micros();
    let size = HoldSize {
        prompt_cost: price,
        wanted: price,
        minimum: price,
        output_per_1k: 0,
        choices: 1,
    };
    let who = (call.request_id, call.account_id, call.key_id);
    super::holds::place(meter, who, size, 0, call.caps).await
}

/// Settles the call: the price and the developer's share when it `succeeded`, else nothing.
/// `None` when the ledger failed: the settlement then waits to be retried until it commits
/// (`unsettled`), never charged twice.
pub async fn settle(
    meter: &Meter<'_>,
    hold: PlacedHold,
    call: &ToolCall<'_>,
    succeeded: bool,
    status: u16,
    latency_ms: i64,
) -> Option<super::Written> {
    let (cost, share) = if succeeded {
        let share = developer_share(call.price, call.share_percent);
        let share = i64::try_from(share)
            .unwrap_or(i64::MAX)
            .saturating_mul(MICROS_PER_CREDIT);
        (call.price_micros(), share)
    } else {
        (0, 0)
    };
    let s = Settlement {
        hold_id: call.request_id.to_owned(),
        request_id: call.request_id.to_owned(),
        account_id: hold.account_id.clone(),
        key_id: Some(hold.key_id.clone()),
        model_requested: joined_name(call.slug, call.tool),
        model_used: None,
        provider: Some(["mcp:", call.slug].concat()),
        prompt_tokens: 0,
        completion_tokens: 0,
        cost,
        status: i64::from(status),
        latency_ms,
        now_ms: crate::clock::now_ms(),
        hold_note: None,
        saving: Default::default(),
        tool: Some(ToolCharge {
            slug: call.slug.to_owned(),
            tool: call.tool.to_owned(),
            developer_id: call.developer_id.to_owned(),
            developer_credits: share,
        }),
    };
    write(meter, hold, s).await
}
