//! Plans and credits sold through Stripe Checkout, against a fake Stripe API, one file per
//! behaviour: `checkout` (a session bound to the caller, what is not sold refused), `webhook`
//! (Stripe's signature, no secret no grant, exactly-once delivery: twice, and 20 times at once
//! over two instances), `identity` (steps a–d in order, anonymous accounts assigned by the
//! operator), `organizations` (an owner buys for its organization, once), `subscriptions` (renewals, cancellation, refunds and disputes, plan updates, the
//! portal), `bad_input` (garbage and unknown events never get a 5xx and write nothing);
//! `common` starts the gateway, signs and delivers events. SQLite, and Postgres + Redis when
//! set.

mod bad_input;
mod checkout;
mod common;
mod identity;
mod organizations;
mod subscriptions;
mod webhook;
