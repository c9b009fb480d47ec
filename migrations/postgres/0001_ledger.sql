-- Accounts, keys, sessions, credit holds, usage and the credit ledger.
-- Money is integer micro-credits (BIGINT); times are Unix milliseconds (BIGINT).

CREATE TABLE accounts (
    user_id           TEXT PRIMARY KEY,
    email             TEXT UNIQUE,
    password_hash     TEXT,
    plan              TEXT   NOT NULL DEFAULT 'free',
    balance           BIGINT NOT NULL CHECK (balance >= 0),
    -- Written and read back in the same statement by holds and settlements (see store/mod.rs).
    scratch           BIGINT NOT NULL DEFAULT 0,
    requests_per_hour BIGINT,
    requests_per_day  BIGINT,
    created_at        BIGINT NOT NULL
);

CREATE TABLE api_keys (
    id           TEXT PRIMARY KEY,
    account_id   TEXT   NOT NULL REFERENCES accounts(user_id),
    name         TEXT   NOT NULL,
    prefix       TEXT   NOT NULL,
    hash         TEXT   NOT NULL UNIQUE,
    created_at   BIGINT NOT NULL,
    last_used_at BIGINT,
    revoked_at   BIGINT
);
CREATE INDEX api_keys_account ON api_keys(account_id);

CREATE TABLE sessions (
    id_hash    TEXT PRIMARY KEY,
    account_id TEXT   NOT NULL REFERENCES accounts(user_id),
    expires_at BIGINT NOT NULL
);
CREATE INDEX sessions_expiry ON sessions(expires_at);

CREATE TABLE holds (
    id         TEXT PRIMARY KEY,
    account_id TEXT   NOT NULL REFERENCES accounts(user_id),
    amount     BIGINT NOT NULL,
    expires_at BIGINT NOT NULL
);
CREATE INDEX holds_expiry ON holds(expires_at);

CREATE TABLE usage (
    request_id        TEXT PRIMARY KEY,
    account_id        TEXT   NOT NULL REFERENCES accounts(user_id),
    key_id            TEXT,
    model_requested   TEXT   NOT NULL,
    model_used        TEXT,
    provider          TEXT,
    prompt_tokens     BIGINT NOT NULL,
    completion_tokens BIGINT NOT NULL,
    credits           BIGINT NOT NULL,
    status            BIGINT NOT NULL,
    latency_ms        BIGINT NOT NULL,
    created_at        BIGINT NOT NULL
);
CREATE INDEX usage_account_time ON usage(account_id, created_at);

CREATE TABLE credit_ledger (
    id         BIGSERIAL PRIMARY KEY,
    account_id TEXT   NOT NULL REFERENCES accounts(user_id),
    delta      BIGINT NOT NULL,
    reason     TEXT   NOT NULL,
    actor      TEXT   NOT NULL,
    created_at BIGINT NOT NULL
);
CREATE INDEX credit_ledger_account ON credit_ledger(account_id, created_at);
