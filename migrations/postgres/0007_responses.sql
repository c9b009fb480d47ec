-- Stored responses (POST /v1/responses with store: true), per account, for previous_response_id
-- and GET /v1/responses/{id}. A response past its retention keeps its row without content
-- (`body` and `input_items` NULL) for as long again, so a chain that needs it is told it
-- expired (400) rather than that it never existed (404).
CREATE TABLE responses (
    id TEXT PRIMARY KEY,
    account_id TEXT NOT NULL REFERENCES accounts(user_id),
    created_at BIGINT NOT NULL,
    expires_at BIGINT NOT NULL,
    previous_response_id TEXT,
    input_items TEXT,
    body TEXT
);
CREATE INDEX responses_expires ON responses (expires_at);
