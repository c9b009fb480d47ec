-- Payments through Stripe Checkout (issue 14): the checkouts we created, every webhook event
-- received (its id is the idempotency key), the payments applied, and on each account its
-- Stripe customer and subscription. An anonymous account (identity step d) is an account with
-- no e-mail and the payer's e-mail in `payer_email`, until the operator assigns it.

CREATE TABLE checkouts (
    id           TEXT PRIMARY KEY,          -- the Checkout Session id (cs_…)
    session_key  TEXT   NOT NULL UNIQUE,    -- metadata[session_key], random per checkout
    account_id   TEXT   NOT NULL REFERENCES accounts(user_id),
    plan         TEXT,                      -- the plan bought, or
    credits_pack TEXT,                      -- the credit pack bought
    mode         TEXT   NOT NULL,           -- subscription | payment
    created_at   INTEGER NOT NULL
);
CREATE INDEX checkouts_account ON checkouts(account_id, created_at);

CREATE TABLE stripe_events (
    id          TEXT PRIMARY KEY,           -- evt_…: a redelivery finds its row and changes nothing
    type        TEXT   NOT NULL,
    account_id  TEXT,
    -- client_reference_id | session_key | email | anonymous (checkout events), else null
    matched_by  TEXT,
    outcome     TEXT   NOT NULL,
    created_at  INTEGER NOT NULL
);

CREATE TABLE payments (
    -- What was paid for, once: the Checkout Session (cs_…), the renewal invoice (in_…), or
    -- for a take-back the event (evt_…).
    source         TEXT PRIMARY KEY,
    event_id       TEXT   NOT NULL REFERENCES stripe_events(id),
    account_id     TEXT   NOT NULL REFERENCES accounts(user_id),
    -- checkout | renewal | refund | dispute
    kind           TEXT   NOT NULL,
    plan           TEXT,
    credits_pack   TEXT,
    credits        INTEGER NOT NULL,         -- µcr granted (negative: taken back)
    amount         INTEGER,                  -- in the currency's minor unit
    currency       TEXT,
    payment_intent TEXT,
    invoice_id     TEXT,
    refers_to      TEXT,                    -- a take-back's payment (its source)
    created_at     INTEGER NOT NULL
);
CREATE INDEX payments_account ON payments(account_id, created_at);
CREATE INDEX payments_intent ON payments(payment_intent);
CREATE INDEX payments_invoice ON payments(invoice_id);

ALTER TABLE accounts ADD COLUMN stripe_customer_id TEXT;
ALTER TABLE accounts ADD COLUMN stripe_subscription_id TEXT;
ALTER TABLE accounts ADD COLUMN subscription_status TEXT;
ALTER TABLE accounts ADD COLUMN renews_at INTEGER;
ALTER TABLE accounts ADD COLUMN payer_email TEXT;
ALTER TABLE accounts ADD COLUMN claimed_by TEXT;
CREATE INDEX accounts_customer ON accounts(stripe_customer_id);
CREATE INDEX accounts_subscription ON accounts(stripe_subscription_id);
