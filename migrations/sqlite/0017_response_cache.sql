-- The exact response cache (issue 53): a hit is a usage row marked as such, and every usage row
-- keeps what it saved against list price (a provider's cache reads, or a cached reply's list
-- cost less its charge), so the saving shown is a sum. Entries live here when no Redis is
-- configured, scoped to one wallet, evicted oldest first past the total cap.
ALTER TABLE usage ADD COLUMN cache_hit INTEGER NOT NULL DEFAULT 0;
ALTER TABLE usage ADD COLUMN saved_credits BIGINT NOT NULL DEFAULT 0;
-- The direct settlement's view and trigger carry the new columns.
DROP TRIGGER usage_settle;
DROP VIEW usage_settlements;
CREATE VIEW usage_settlements AS
    SELECT request_id, account_id, key_id, model_requested, model_used, provider, prompt_tokens,
           completion_tokens, credits, status, latency_ms, created_at, balance_after, hold_note,
           kind, tool_slug, tool_name, developer_id, developer_credits, cache_hit, saved_credits
    FROM usage;
CREATE TRIGGER usage_settle INSTEAD OF INSERT ON usage_settlements BEGIN
    INSERT INTO usage (request_id, account_id, key_id, model_requested, model_used, provider,
                       prompt_tokens, completion_tokens, credits, status, latency_ms, created_at,
                       balance_after, hold_note, kind, tool_slug, tool_name, developer_id,
                       developer_credits, cache_hit, saved_credits)
    VALUES (NEW.request_id, NEW.account_id, NEW.key_id, NEW.model_requested, NEW.model_used,
            NEW.provider, NEW.prompt_tokens, NEW.completion_tokens, NEW.credits, NEW.status,
            NEW.latency_ms, NEW.created_at, NEW.balance_after, NEW.hold_note, NEW.kind,
            NEW.tool_slug, NEW.tool_name, NEW.developer_id, NEW.developer_credits,
            NEW.cache_hit, NEW.saved_credits);
    UPDATE accounts SET balance = NEW.balance_after WHERE user_id = NEW.account_id;
    DELETE FROM holds WHERE id = NEW.request_id;
END;
-- A key whose requests use the response cache without asking.
ALTER TABLE api_keys ADD COLUMN response_cache INTEGER NOT NULL DEFAULT 0;
CREATE TABLE response_cache (
    key         TEXT   PRIMARY KEY,
    wallet      TEXT   NOT NULL,
    created_at  BIGINT NOT NULL,
    expires_at  BIGINT NOT NULL,
    size        BIGINT NOT NULL,
    entry       BLOB   NOT NULL
);
CREATE INDEX response_cache_age ON response_cache(created_at);
