//! `GET /api/v1/auth/me`: the account as its holder sees it: balance (what every credit lease
//! has not spent included), plan, its limits and the requests left in the current windows, this month's
//! spend, and whether it is an operator.

use crate::request::Session;
use serde_json::json;
use tollgate_filters::credits::to_credits;
use tollgate_filters::ratelimit::{PlanLimits, HOUR_MS};
use tollgate_filters::{ErrorKind, GatewayError};

use super::account_json;
use crate::auth::caller::Caller;
use crate::request::ctx::RequestCtx;
use crate::request::respond;
use crate::runtime::Shared;

pub async fn me(
    shared: &Shared,
    session: &mut Session,
    ctx: &mut RequestCtx,
    caller: &Caller,
) -> Result<(), GatewayError> {
    let account_id = caller.account()?;
    let ledger = shared.ledger()?;
    // This instance's leased settlements written first; what every instance's lease has not
    // spent is part of the balance, so each instance shows the same one.
    let round = shared.leases.flush(ledger, account_id).await?;
    let mut a = ledger.account(account_id).await?.ok_or_else(|| {
        GatewayError::new(ErrorKind::Authentication, "the account no longer exists")
    })?;
    a.balance += ledger.leased(account_id).await?;
    drop(round);
    let rt = shared.runtime.load_full();
    let limits: PlanLimits = rt
        .config
        .plans
        .limits(&a.plan)
        .with_overrides(a.requests_per_hour, a.requests_per_day);
    let windows = limits.windows();
    let used = shared
        .limiter
        .used(&format!("acct:{account_id}"), &windows)
        .await;
    let left = |ms: i64| {
        windows
            .iter()
            .zip(&used)
            .find(|(w, _)| w.window_ms == ms)
            .map(|(w, u)| w.limit.saturating_sub(*u))
    };
    let month = month_start_ms(crate::clock::now_ms());
    let spent: i64 = ledger
        .usage_by(account_id, None, month, true)
        .await?
        .iter()
        .map(|r| r.credits)
        .sum();
    let mut v = account_json(&a);
    // The account was just read: its e-mail says whether it is an operator.
    let operator = a
        .email
        .as_ref()
        .is_some_and(|e| rt.config.server.admin_emails.contains(e));
    v["operator"] = operator.into();
    v["limits"] = json!({"requests_per_hour": limits.per_hour, "requests_per_day": limits.per_day});
    v["remaining"] =
        json!({"hour": left(HOUR_MS), "day": left(tollgate_filters::ratelimit::DAY_MS)});
    v["spent_this_month"] = to_credits(spent).into();
    v["log_payloads"] = ledger.log_payloads(account_id).await?.into();
    respond::json(session, ctx, 200, &v, &[]).await;
    Ok(())
}

/// The first millisecond of the UTC month containing `now_ms`.
fn month_start_ms(now_ms: i64) -> i64 {
    let day = tollgate_filters::time::format_date(now_ms / 1000);
    let first = format!("{}-01", &day[..7]);
    tollgate_filters::time::parse_date(&first).map_or(now_ms, |s| s * 1000)
}

#[cfg(test)]
mod tests {
    #[test]
    fn the_month_starts_on_the_first_at_midnight_utc() {
        // 2026-11-23T01:00:00Z
        let now = 1_795_395_600_000;
        assert_eq!(super::month_start_ms(now), 1_793_491_200_000);
    }
}
