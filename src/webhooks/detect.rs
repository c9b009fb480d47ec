//! The checks off the request path: what a charge, a payment or an operator's move noticed
//! ([`super::Notice`]) becomes events here, and a sweep every `sweep_interval_secs` finds keys
//! about to expire or expired and balances below a threshold (which a refund or an admin's
//! change may cause too). Each event is written once across instances by its dedupe key:
//!
//! | event | dedupe key |
//! |---|---|
//! | `budget.threshold` | key or member, period start, percent |
//! | `balance.low` | endpoint, episode (a new one each time the balance falls below) |
//! | `key.expiring`, `key.expired` | key, its expiry |
//! | `payment.received` | the Stripe event |
//! | `tool_server.status_changed` | slug, time of the move |

use std::collections::{BTreeSet, HashSet};
use std::sync::Arc;

use serde_json::json;
use tokio::sync::mpsc::Receiver;
use tollgate_filters::credits::to_credits;

use super::{emit, Notice};
use crate::ledger::Ledger;
use crate::runtime::Shared;

/// `key.expiring` goes this long before a key's expiry.
pub const EXPIRING_MS: i64 = 7 * 86_400_000;

/// Dedupe keys this instance has seen written (or found taken), so that repeated notices of
/// one crossing cost no write; bounded by forgetting all at this size.
const REMEMBERED: usize = 10_000;

struct Checker {
    shared: Arc<Shared>,
    ledger: Ledger,
    seen: HashSet<String>,
}

impl Checker {
    /// Writes an event unless this instance already saw its dedupe key.
    async fn once(
        &mut self,
        wallet: &str,
        event_type: &str,
        dedupe: String,
        data: serde_json::Value,
    ) {
        if self.seen.contains(&dedupe) {
            return;
        }
        match emit(&self.ledger, wallet, event_type, &dedupe, data, None).await {
            Ok(_) => {
                if self.seen.len() >= REMEMBERED {
                    self.seen.clear();
                }
                self.seen.insert(dedupe);
            }
            Err(e) => tracing::warn!(%wallet, event_type, "could not write a webhook event: {e}"),
        }
    }

    async fn handle(&mut self, n: Notice, balances: &mut BTreeSet<String>) {
        match n {
            Notice::Budget {
                wallet,
                ident,
                cap,
                period,
                spent,
                percents,
            } => {
                let Some((whose, start)) = ident.rsplit_once(':') else {
                    return;
                };
                let start_ms: i64 = start.parse().unwrap_or(0);
                let mut data = json!({"period": period.as_str(), "period_start": start_ms / 1000,
                    "budget": to_credits(cap), "spent": to_credits(spent)});
                match whose
                    .strip_prefix("member:")
                    .and_then(|m| m.split_once(':'))
                {
                    Some((org, account)) => {
                        data["subject"] = "member".into();
                        data["organization_id"] = org.into();
                        data["member_account_id"] = account.into();
                    }
                    None => {
                        data["subject"] = "key".into();
                        data["key_id"] = whose.into();
                    }
                }
                for p in percents {
                    data["percent"] = p.into();
                    let dedupe = format!("budget.threshold:{ident}:{p}");
                    self.once(&wallet, "budget.threshold", dedupe, data.clone())
                        .await;
                }
            }
            Notice::Balance { wallet } => {
                balances.insert(wallet);
            }
            Notice::Payment { stripe_event } => self.payment(&stripe_event).await,
            Notice::ToolServer {
                owner,
                slug,
                from,
                to,
                at,
            } => {
                let dedupe = format!("tool_server.status_changed:{slug}:{at}:{to}");
                let data = json!({"slug": slug, "from": from, "to": to});
                self.once(&owner, "tool_server.status_changed", dedupe, data)
                    .await;
            }
        }
    }

    async fn payment(&mut self, stripe_event: &str) {
        let p = match self.ledger.payment_of_event(stripe_event).await {
            Ok(Some(p)) => p,
            Ok(None) => return,
            Err(e) => {
                tracing::warn!(stripe_event, "could not read a payment for its event: {e}");
                return;
            }
        };
        let data = json!({"kind": p.kind, "plan": p.plan, "credits_pack": p.credits_pack,
            "credits": to_credits(p.credits), "amount": p.amount, "currency": p.currency,
            "stripe_event_id": stripe_event});
        let dedupe = format!("payment.received:{stripe_event}");
        self.once(&p.account_id, "payment.received", dedupe, data)
            .await;
    }

    /// The wallet's balance as every instance shows it (this instance's leased charges
    /// written first, every lease's unspent part added back).
    async fn balance(&self, wallet: &str) -> Option<i64> {
        let shared = &self.shared;
        let round = shared.leases.flush(&self.ledger, wallet).await.ok()?;
        let account = self.ledger.account(wallet).await.ok()??;
        let leased = self.ledger.leased(wallet).await.ok()?;
        drop(round);
        Some(account.balance + leased)
    }

    /// `balance.low` to each endpoint of `wallet` whose threshold the balance is below, once
    /// per fall; re-armed when it is back at or above.
    async fn check_balance(&mut self, wallet: &str) {
        let Ok(endpoints) = self.ledger.endpoints(wallet).await else {
            return;
        };
        let watching: Vec<_> = endpoints
            .into_iter()
            .filter(|e| e.enabled && e.wants("balance.low") && e.balance_threshold.is_some())
            .collect();
        if watching.is_empty() {
            return;
        }
        let Some(balance) = self.balance(wallet).await else {
            return;
        };
        for e in watching {
            let threshold = e.balance_threshold.unwrap_or(0);
            if balance >= threshold {
                if e.balance_low {
                    if let Err(err) = self.ledger.rearm_balance_low(&e.id).await {
                        tracing::warn!(endpoint = %e.id, "could not re-arm balance.low: {err}");
                    }
                }
                continue;
            }
            if e.balance_low {
                continue;
            }
            let Ok(Some(episode)) = self.ledger.enter_balance_low(&e.id).await else {
                continue;
            };
            let data = json!({"balance": to_credits(balance), "threshold": to_credits(threshold)});
            let dedupe = format!("balance.low:{}:{episode}", e.id);
            if let Err(err) = emit(
                &self.ledger,
                wallet,
                "balance.low",
                &dedupe,
                data,
                Some(&e.id),
            )
            .await
            {
                // Not written: armed again, so the next check sends it.
                tracing::warn!(endpoint = %e.id, "could not write balance.low: {err}");
                let _ = self.ledger.rearm_balance_low(&e.id).await;
            }
        }
    }

    /// Keys expiring within [`EXPIRING_MS`] or expired since the last day, of watched
    /// wallets; balances of watched wallets.
    async fn sweep(&mut self) {
        let now = crate::clock::now_ms();
        match self
            .ledger
            .expiring_keys(now - 86_400_000, now + EXPIRING_MS)
            .await
        {
            Ok(keys) => {
                for k in keys {
                    let kind = if k.expires_at <= now {
                        "key.expired"
                    } else {
                        "key.expiring"
                    };
                    let data = json!({"key_id": k.id, "name": k.name, "prefix": k.prefix,
                        "owner_account_id": k.owner_id, "expires_at": k.expires_at / 1000});
                    let dedupe = format!("{kind}:{}:{}", k.id, k.expires_at);
                    self.once(&k.wallet_id, kind, dedupe, data).await;
                }
            }
            Err(e) => tracing::warn!("could not look for expiring keys: {e}"),
        }
        for w in self.shared.webhooks.watched() {
            self.check_balance(&w).await;
        }
    }
}

/// The checker of one instance: notices as they come (balances checked once per batch),
/// the sweep on its interval, until shutdown.
pub async fn run(
    shared: Arc<Shared>,
    ledger: Ledger,
    mut rx: Receiver<Notice>,
    mut shutdown: pingora::server::ShutdownWatch,
) {
    let mut c = Checker {
        shared,
        ledger,
        seen: HashSet::new(),
    };
    let mut next_sweep = tokio::time::Instant::now();
    loop {
        let every = c.shared.runtime.load().config.webhooks.sweep_interval;
        tokio::select! {
            _ = shutdown.changed() => return,
            n = rx.recv() => {
                let Some(n) = n else { return };
                let mut balances = BTreeSet::new();
                c.handle(n, &mut balances).await;
                while let Ok(n) = rx.try_recv() {
                    c.handle(n, &mut balances).await;
                }
                for w in balances {
                    c.check_balance(&w).await;
                }
            }
            _ = tokio::time::sleep_until(next_sweep) => {
                c.sweep().await;
                next_sweep = tokio::time::Instant::now() + every;
            }
        }
    }
}
