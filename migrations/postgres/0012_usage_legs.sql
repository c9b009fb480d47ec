-- A resumed stream's legs (README, "Streams that survive a cut"): one row per provider that
-- served part of the answer, under the request id of the request's one usage row, which
-- carries the charge (the legs' sum) and moves the money. Written after that settlement.
CREATE TABLE usage_legs (
    request_id        TEXT    NOT NULL,
    leg               INTEGER NOT NULL,
    account_id        TEXT    NOT NULL,
    model_used        TEXT    NOT NULL,
    provider          TEXT    NOT NULL,
    prompt_tokens     BIGINT  NOT NULL,
    completion_tokens BIGINT  NOT NULL,
    credits           BIGINT  NOT NULL,
    created_at        BIGINT  NOT NULL,
    PRIMARY KEY (request_id, leg)
);
CREATE INDEX usage_legs_account_time ON usage_legs(account_id, created_at);
