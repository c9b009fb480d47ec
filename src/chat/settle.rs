//! Settlement of the request's hold, once, from whatever the request context holds: called
//! before a JSON answer (it carries the balance after settlement), at the end of the pipeline,
//! and from `logging` for a request that ended some other way.

use tollgate_filters::credits::format_credits;

use crate::metering;
use crate::proxy::ctx::RequestCtx;
use crate::runtime::Shared;

pub async fn settle(shared: &Shared, ctx: &mut RequestCtx) {
    let Some(hold) = ctx.hold.take() else { return };
    let Ok(meter) = shared.meter() else { return };
    if let Some((charged, balance)) = metering::settle(&meter, hold, &ctx.served()).await {
        ctx.charged = Some(charged);
        ctx.set_header("X-Credits-Remaining", format_credits(balance));
    }
}
