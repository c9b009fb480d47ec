//! Stripe's events, in the shapes Stripe sends, parsed into what the webhook does.

use serde_json::json;

use super::*;

fn parse(ty: &str, object: serde_json::Value) -> Action {
    let body = json!({"id": "evt_1", "type": ty, "data": {"object": object}});
    let e = Event::parse(body.to_string().as_bytes()).expect("an event");
    assert_eq!((e.id.as_str(), e.type_name.as_str()), ("evt_1", ty));
    e.action
}

#[test]
fn a_body_that_is_not_an_event_says_why() {
    assert!(matches!(
        Event::parse(b"{not json"),
        Err(ParseError::Malformed(_))
    ));
    let no_type = json!({"id": "evt_1", "data": {"object": {}}}).to_string();
    assert_eq!(
        Event::parse(no_type.as_bytes()),
        Err(ParseError::NoIdOrType)
    );
    let no_object = json!({"id": "evt_1", "type": "invoice.paid", "data": {}}).to_string();
    assert_eq!(
        Event::parse(no_object.as_bytes()),
        Err(ParseError::NoObject)
    );
    assert_eq!(
        ParseError::NoObject.to_string(),
        "data.object must be an object"
    );
}

#[test]
fn a_paid_checkout_carries_what_the_grant_needs() {
    let a = parse(
        "checkout.session.completed",
        json!({
            "id": "cs_1", "payment_status": "paid", "client_reference_id": "usr_a",
            "customer_details": {"email": "  Payer@Example.COM "}, "customer_email": "other@x.io",
            "metadata": {"session_key": "k1", "plan": "pro"},
            "amount_total": 2000, "currency": "usd", "customer": "cus_1",
            "subscription": "sub_1", "payment_intent": "pi_1", "invoice": "in_1"
        }),
    );
    let Action::CheckoutPaid(c) = a else {
        panic!("{a:?}")
    };
    assert_eq!(c.session_id, "cs_1");
    assert_eq!(c.session_key.as_deref(), Some("k1"));
    assert_eq!(c.client_reference_id.as_deref(), Some("usr_a"));
    assert_eq!(c.payer_email.as_deref(), Some("payer@example.com"));
    assert_eq!(c.metadata_plan.as_deref(), Some("pro"));
    assert_eq!(c.metadata_credits_pack, None);
    assert_eq!((c.amount, c.currency.as_deref()), (Some(2000), Some("usd")));
    assert_eq!(c.subscription.as_deref(), Some("sub_1"));
    assert_eq!(c.payment_intent.as_deref(), Some("pi_1"));
    assert_eq!(c.invoice.as_deref(), Some("in_1"));
    // Without customer_details, the session's customer_email.
    let a = parse(
        "checkout.session.async_payment_succeeded",
        json!({"id": "cs_2", "payment_status": "unpaid", "customer_email": "B@x.io"}),
    );
    let Action::CheckoutPaid(c) = a else {
        panic!("{a:?}")
    };
    assert_eq!(c.payer_email.as_deref(), Some("b@x.io"));
}

#[test]
fn an_unpaid_checkout_waits_and_one_without_id_is_incomplete() {
    assert_eq!(
        parse(
            "checkout.session.completed",
            json!({"id": "cs_1", "payment_status": "unpaid"})
        ),
        Action::CheckoutAwaitingPayment
    );
    assert_eq!(
        parse(
            "checkout.session.completed",
            json!({"payment_status": "paid"})
        ),
        Action::Incomplete("no session id")
    );
}

#[test]
fn invoices_by_billing_reason() {
    assert_eq!(
        parse(
            "invoice.paid",
            json!({"id": "in_1", "billing_reason": "subscription_create", "payment_intent": "pi_1"})
        ),
        Action::FirstInvoicePaid {
            invoice: "in_1".into(),
            payment_intent: Some("pi_1".into())
        }
    );
    assert_eq!(
        parse(
            "invoice.paid",
            json!({"id": "in_1", "billing_reason": "manual"})
        ),
        Action::OtherInvoicePaid {
            reason: "manual".into()
        }
    );
    assert_eq!(
        parse(
            "invoice.paid",
            json!({"billing_reason": "subscription_cycle"})
        ),
        Action::Incomplete("no invoice id")
    );
    // A renewal in the 2025 API's shape: the subscription under parent, the price under
    // pricing.price_details.
    let a = parse(
        "invoice.paid",
        json!({
            "id": "in_2", "billing_reason": "subscription_cycle", "customer": "cus_1",
            "parent": {"subscription_details": {"subscription": "sub_1"}},
            "amount_paid": 2000, "currency": "eur", "payment_intent": "pi_2",
            "lines": {"data": [{"pricing": {"price_details": {"price": "price_pro"}},
                                "period": {"end": 1_800_000_000}}]}
        }),
    );
    assert_eq!(
        a,
        Action::RenewalPaid(Renewal {
            invoice: "in_2".into(),
            customer: Some("cus_1".into()),
            subscription: Some("sub_1".into()),
            price_ids: vec!["price_pro".into()],
            amount: Some(2000),
            currency: Some("eur".into()),
            payment_intent: Some("pi_2".into()),
            renews_at_ms: Some(1_800_000_000_000),
        })
    );
}

#[test]
fn subscription_changes_read_the_period_end_in_both_shapes() {
    let a = parse(
        "customer.subscription.updated",
        json!({"id": "sub_1", "customer": "cus_1", "status": "active", "current_period_end": 10,
               "items": {"data": [{"price": {"id": "price_pro"}}]}}),
    );
    assert_eq!(
        a,
        Action::SubscriptionChanged(Subscription {
            id: "sub_1".into(),
            customer: Some("cus_1".into()),
            status: Some("active".into()),
            price_ids: vec!["price_pro".into()],
            renews_at_ms: Some(10_000),
            deleted: false,
        })
    );
    let a = parse(
        "customer.subscription.deleted",
        json!({"id": "sub_1", "status": "canceled",
               "items": {"data": [{"price": "price_pro", "current_period_end": 20}]}}),
    );
    let Action::SubscriptionChanged(s) = a else {
        panic!("{a:?}")
    };
    assert!(s.deleted);
    assert_eq!(s.renews_at_ms, Some(20_000));
    assert_eq!(s.price_ids, vec!["price_pro".to_owned()]);
    assert_eq!(
        parse("customer.subscription.updated", json!({})),
        Action::Incomplete("no subscription id")
    );
}

#[test]
fn refunds_and_disputes_are_clawbacks() {
    let body = json!({"payment_intent": "pi_1", "invoice": "in_1", "amount": 2000,
                      "amount_refunded": 500, "currency": "usd"});
    let Action::Clawback(r) = parse("charge.refunded", body.clone()) else {
        panic!()
    };
    assert_eq!(r.kind.as_str(), "refund");
    assert_eq!((r.amount, r.amount_refunded), (Some(2000), Some(500)));
    let Action::Clawback(d) = parse("charge.dispute.created", body) else {
        panic!()
    };
    assert_eq!(d.kind, ClawbackKind::Dispute);
    assert_eq!(
        d.amount_refunded, None,
        "a dispute takes back the whole amount"
    );
    assert_eq!(d.payment_intent.as_deref(), Some("pi_1"));
}

#[test]
fn other_types_are_ignored() {
    assert_eq!(
        parse("customer.created", json!({"id": "cus_1"})),
        Action::Ignored
    );
}
