//! A Stripe event parsed into what the gateway acts on, without I/O: one variant per thing the
//! webhook does, so the webhook matches on a type instead of on strings, and every event type
//! it reads is unit-tested here against Stripe's own payload shapes (the classic ones and the
//! 2025 API's). What a price id *means* (which plan, which credit pack) is configuration, so
//! the variants carry the price ids and the gateway resolves them.

use serde_json::Value;

/// An event as delivered: its id and `type` (recorded as they came) and what it asks of us.
#[derive(Debug, Clone, PartialEq)]
pub struct Event {
    pub id: String,
    pub type_name: String,
    pub action: Action,
}

/// What an event asks of the gateway.
#[derive(Debug, Clone, PartialEq)]
pub enum Action {
    /// `checkout.session.completed` (paid) or `checkout.session.async_payment_succeeded`.
    CheckoutPaid(Checkout),
    /// `checkout.session.completed` still `unpaid` (a delayed payment method): its
    /// `async_payment_succeeded` grants.
    CheckoutAwaitingPayment,
    /// `invoice.paid` for a subscription's first invoice, which its checkout grants.
    FirstInvoicePaid {
        invoice: String,
        payment_intent: Option<String>,
    },
    /// `invoice.paid` for a renewal (`billing_reason` `subscription_cycle`).
    RenewalPaid(Renewal),
    /// `invoice.paid` for any other reason (proration, a manual invoice): nothing to grant.
    OtherInvoicePaid { reason: String },
    /// `customer.subscription.updated` or `.deleted`.
    SubscriptionChanged(Subscription),
    /// `charge.refunded` or `charge.dispute.created`.
    Clawback(Clawback),
    /// A type we act on, but without the id it needs: recorded with this reason.
    Incomplete(&'static str),
    /// Any other type: recorded, nothing done.
    Ignored,
}

/// A paid checkout session.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Checkout {
    pub session_id: String,
    pub session_key: Option<String>,
    pub client_reference_id: Option<String>,
    /// `customer_details.email`, else `customer_email`; trimmed and lower-cased.
    pub payer_email: Option<String>,
    pub metadata_plan: Option<String>,
    pub metadata_credits_pack: Option<String>,
    pub amount: Option<i64>,
    pub currency: Option<String>,
    pub customer: Option<String>,
    pub subscription: Option<String>,
    pub payment_intent: Option<String>,
    pub invoice: Option<String>,
}

/// A renewal invoice.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Renewal {
    pub invoice: String,
    pub customer: Option<String>,
    pub subscription: Option<String>,
    pub price_ids: Vec<String>,
    pub amount: Option<i64>,
    pub currency: Option<String>,
    pub payment_intent: Option<String>,
    /// The end of the first line's period, in ms.
    pub renews_at_ms: Option<i64>,
}

/// A subscription's new state.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Subscription {
    pub id: String,
    pub customer: Option<String>,
    pub status: Option<String>,
    pub price_ids: Vec<String>,
    /// `current_period_end` (the subscription's, else its first item's, as the 2025 API has
    /// it), in ms.
    pub renews_at_ms: Option<i64>,
    pub deleted: bool,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ClawbackKind {
    Refund,
    Dispute,
}

impl ClawbackKind {
    pub fn as_str(self) -> &'static str {
        match self {
            ClawbackKind::Refund => "refund",
            ClawbackKind::Dispute => "dispute",
        }
    }
}

/// A refund or a dispute of a charge.
#[derive(Debug, Clone, PartialEq)]
pub struct Clawback {
    pub kind: ClawbackKind,
    pub payment_intent: Option<String>,
    pub invoice: Option<String>,
    pub amount: Option<i64>,
    /// Only on a refund: how much of `amount` went back.
    pub amount_refunded: Option<i64>,
    pub currency: Option<String>,
}

/// Why a body is not an event (the 400's message, after `body: `).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ParseError {
    Malformed(String),
    NoIdOrType,
    NoObject,
}

impl std::fmt::Display for ParseError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            ParseError::Malformed(e) => write!(f, "malformed JSON ({e})"),
            ParseError::NoIdOrType => f.write_str("an event needs id and type"),
            ParseError::NoObject => f.write_str("data.object must be an object"),
        }
    }
}

impl Event {
    pub fn parse(raw: &[u8]) -> Result<Event, ParseError> {
        let v: Value =
            serde_json::from_slice(raw).map_err(|e| ParseError::Malformed(e.to_string()))?;
        let (Some(id), Some(ty)) = (str_at(&v, &["id"]), str_at(&v, &["type"])) else {
            return Err(ParseError::NoIdOrType);
        };
        let obj = &v["data"]["object"];
        if !obj.is_object() {
            return Err(ParseError::NoObject);
        }
        Ok(Event {
            id: id.to_owned(),
            type_name: ty.to_owned(),
            action: action(ty, obj),
        })
    }
}

fn action(ty: &str, obj: &Value) -> Action {
    let s = |path: &[&str]| str_at(obj, path).map(str::to_owned);
    match ty {
        "checkout.session.completed" | "checkout.session.async_payment_succeeded" => {
            if ty == "checkout.session.completed"
                && s(&["payment_status"]).as_deref() == Some("unpaid")
            {
                return Action::CheckoutAwaitingPayment;
            }
            let Some(session_id) = s(&["id"]) else {
                return Action::Incomplete("no session id");
            };
            Action::CheckoutPaid(Checkout {
                session_id,
                session_key: s(&["metadata", "session_key"]),
                client_reference_id: s(&["client_reference_id"]),
                payer_email: s(&["customer_details", "email"])
                    .or_else(|| s(&["customer_email"]))
                    .map(|e| e.trim().to_lowercase()),
                metadata_plan: s(&["metadata", "plan"]),
                metadata_credits_pack: s(&["metadata", "credits_pack"]),
                amount: int_at(obj, &["amount_total"]),
                currency: s(&["currency"]),
                customer: s(&["customer"]),
                subscription: s(&["subscription"]),
                payment_intent: s(&["payment_intent"]),
                invoice: s(&["invoice"]),
            })
        }
        "invoice.paid" => {
            let reason = s(&["billing_reason"]).unwrap_or_default();
            match (reason.as_str(), s(&["id"])) {
                ("subscription_create", Some(invoice)) => Action::FirstInvoicePaid {
                    invoice,
                    payment_intent: s(&["payment_intent"]),
                },
                ("subscription_cycle", None) => Action::Incomplete("no invoice id"),
                ("subscription_cycle", Some(invoice)) => {
                    let lines = &obj["lines"];
                    Action::RenewalPaid(Renewal {
                        invoice,
                        customer: s(&["customer"]),
                        subscription: invoice_subscription(obj).map(str::to_owned),
                        price_ids: price_ids(lines),
                        amount: int_at(obj, &["amount_paid"]),
                        currency: s(&["currency"]),
                        payment_intent: s(&["payment_intent"]),
                        renews_at_ms: lines["data"][0]["period"]["end"].as_i64().map(|t| t * 1000),
                    })
                }
                _ => Action::OtherInvoicePaid { reason },
            }
        }
        "customer.subscription.updated" | "customer.subscription.deleted" => {
            let Some(id) = s(&["id"]) else {
                return Action::Incomplete("no subscription id");
            };
            let items = &obj["items"];
            Action::SubscriptionChanged(Subscription {
                id,
                customer: s(&["customer"]),
                status: s(&["status"]),
                price_ids: price_ids(items),
                renews_at_ms: int_at(obj, &["current_period_end"])
                    .or_else(|| items["data"][0]["current_period_end"].as_i64())
                    .map(|t| t * 1000),
                deleted: ty == "customer.subscription.deleted",
            })
        }
        "charge.refunded" | "charge.dispute.created" => {
            let kind = if ty == "charge.refunded" {
                ClawbackKind::Refund
            } else {
                ClawbackKind::Dispute
            };
            Action::Clawback(Clawback {
                kind,
                payment_intent: s(&["payment_intent"]),
                invoice: s(&["invoice"]),
                amount: int_at(obj, &["amount"]),
                amount_refunded: match kind {
                    ClawbackKind::Refund => int_at(obj, &["amount_refunded"]),
                    ClawbackKind::Dispute => None,
                },
                currency: s(&["currency"]),
            })
        }
        _ => Action::Ignored,
    }
}

/// A string field at a path of object keys (`None` when absent, null or not a string).
pub fn str_at<'a>(v: &'a Value, path: &[&str]) -> Option<&'a str> {
    let mut cur = v;
    for k in path {
        cur = cur.get(k)?;
    }
    cur.as_str().filter(|s| !s.is_empty())
}

/// An integer field at a path (`None` when absent or not an integer).
pub fn int_at(v: &Value, path: &[&str]) -> Option<i64> {
    let mut cur = v;
    for k in path {
        cur = cur.get(k)?;
    }
    cur.as_i64()
}

/// The price ids of a list object's items (`line_items`, an invoice's `lines`, a subscription's
/// `items`), in order; both the classic `price.id` and the 2025 API's
/// `pricing.price_details.price` shapes.
pub fn price_ids(list: &Value) -> Vec<String> {
    list.get("data")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .filter_map(|item| {
            str_at(item, &["price", "id"])
                .or_else(|| str_at(item, &["price"]))
                .or_else(|| str_at(item, &["pricing", "price_details", "price"]))
                .map(str::to_owned)
        })
        .collect()
}

/// An invoice's subscription id, in the classic and the 2025 API's shapes.
pub fn invoice_subscription(invoice: &Value) -> Option<&str> {
    str_at(invoice, &["subscription"])
        .or_else(|| str_at(invoice, &["parent", "subscription_details", "subscription"]))
}
