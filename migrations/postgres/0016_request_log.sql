-- The request log (issue 52): one record per metered request (a model request of any front
-- door, a tool call), written in batches off the request path, listed by wallet and time; its
-- payloads (the request and response bodies, redacted and capped) only where payload logging
-- was on, nulled after `payload_retention_days`, the record deleted after `retention_days`.
CREATE TABLE request_log (
    request_id         TEXT PRIMARY KEY,
    -- When the request started (ms).
    created_at         BIGINT NOT NULL,
    -- The wallet charged: a person's account or an organization's.
    account_id         TEXT   NOT NULL,
    key_id             TEXT   NOT NULL,
    -- For an organization key: the member who owns it.
    member_id          TEXT,
    door               TEXT   NOT NULL,
    route              TEXT   NOT NULL,
    model_requested    TEXT,
    model_used         TEXT,
    provider           TEXT,
    status             BIGINT NOT NULL,
    prompt_tokens      BIGINT,
    completion_tokens  BIGINT,
    cost_micros        BIGINT,
    latency_ms         BIGINT NOT NULL,
    -- A stream's time to its first output (ms); NULL for a JSON reply.
    ttft_ms            BIGINT,
    -- Every upstream leg as a JSON array: model, provider, endpoint, outcome, reason, ms.
    legs               TEXT   NOT NULL,
    error              TEXT,
    request_body       TEXT,
    response_body      TEXT,
    -- 1: the body was longer than `max_payload_bytes` and is cut; NULL: not stored.
    request_truncated  BIGINT,
    response_truncated BIGINT
);
CREATE INDEX request_log_wallet ON request_log(account_id, created_at, request_id);
CREATE INDEX request_log_time ON request_log(created_at);
-- The payloads still kept, for their retention's sweep.
CREATE INDEX request_log_payloads ON request_log(created_at)
    WHERE request_body IS NOT NULL OR response_body IS NOT NULL;

-- Payload logging, turned on by a wallet's owner (a person's account, or an organization's,
-- which is an account) or on one key (1: on).
ALTER TABLE accounts ADD COLUMN log_payloads BIGINT NOT NULL DEFAULT 0;
ALTER TABLE api_keys ADD COLUMN log_payloads BIGINT NOT NULL DEFAULT 0;
