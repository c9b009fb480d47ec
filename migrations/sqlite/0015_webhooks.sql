-- Events sent to customers (issue 52): endpoints an account or organization registered, the
-- events written once each (a unique dedupe key per wallet, kind, subject, period and
-- percent, so instances racing to write one write it once), and an outbox of deliveries, one
-- per endpoint and event, numbered per endpoint so each endpoint gets its events in order.
CREATE TABLE webhook_endpoints (
    id                TEXT PRIMARY KEY,
    -- The wallet whose events it gets: a person's account or an organization's.
    wallet_id         TEXT   NOT NULL REFERENCES accounts(user_id),
    is_org            BIGINT NOT NULL DEFAULT 0,
    url               TEXT   NOT NULL,
    description       TEXT,
    -- A JSON array of event types.
    events            TEXT   NOT NULL,
    -- The signing secret (shown once at creation and rotation).
    secret            TEXT   NOT NULL,
    enabled           BIGINT NOT NULL DEFAULT 1,
    -- `balance.low` below this many µcr (NULL: no threshold).
    balance_threshold BIGINT,
    -- 1 from a `balance.low` until the balance is back at or above the threshold; each time
    -- it goes to 1 is a new episode (its event's dedupe key).
    balance_low       BIGINT NOT NULL DEFAULT 0,
    balance_episode   BIGINT NOT NULL DEFAULT 0,
    -- The last delivery number given out for this endpoint.
    last_seq          BIGINT NOT NULL DEFAULT 0,
    created_at        BIGINT NOT NULL
);
CREATE INDEX webhook_endpoints_wallet ON webhook_endpoints(wallet_id);

CREATE TABLE webhook_events (
    id         TEXT PRIMARY KEY,
    wallet_id  TEXT   NOT NULL,
    type       TEXT   NOT NULL,
    dedupe     TEXT   NOT NULL UNIQUE,
    -- The JSON body every delivery of it sends, byte for byte.
    payload    TEXT   NOT NULL,
    created_at BIGINT NOT NULL
);

CREATE TABLE webhook_deliveries (
    endpoint_id  TEXT   NOT NULL,
    seq          BIGINT NOT NULL,
    event_id     TEXT   NOT NULL REFERENCES webhook_events(id),
    status       TEXT   NOT NULL CHECK (status IN ('pending', 'delivered', 'failed')),
    attempts     BIGINT NOT NULL DEFAULT 0,
    -- Not tried before this time (ms), nor while another instance holds it (locked_until).
    next_at      BIGINT NOT NULL,
    locked_until BIGINT NOT NULL DEFAULT 0,
    last_status  BIGINT,
    last_error   TEXT,
    created_at   BIGINT NOT NULL,
    finished_at  BIGINT,
    PRIMARY KEY (endpoint_id, seq),
    UNIQUE (endpoint_id, event_id)
);
CREATE INDEX webhook_deliveries_pending ON webhook_deliveries(endpoint_id, seq) WHERE status = 'pending';
