-- A usage row written by a credit lease's round (the hot path: every metered request under a
-- lease) pays for nothing it does not use (issue 31):
-- * The direct settlement's trigger moves to a view. An AFTER INSERT trigger on `usage` ran its
--   program for every row, lease rows included (its WHEN is tested inside the program): about
--   a fifth of a lease row's insert. The direct settlement now inserts into
--   `usage_settlements`, whose INSTEAD OF trigger writes the row, moves the money and drops the
--   hold: still one statement, atomic, RETURNING what it inserted (src/ledger/credits.rs).
-- * The developer index holds tool calls only: a chat row (no developer) was an index entry
--   under NULL that no query reads (`developer_id = $1` never matches NULL).
DROP TRIGGER usage_settle;
CREATE VIEW usage_settlements AS
    SELECT request_id, account_id, key_id, model_requested, model_used, provider, prompt_tokens,
           completion_tokens, credits, status, latency_ms, created_at, balance_after, hold_note,
           kind, tool_slug, tool_name, developer_id, developer_credits
    FROM usage;
CREATE TRIGGER usage_settle INSTEAD OF INSERT ON usage_settlements BEGIN
    INSERT INTO usage (request_id, account_id, key_id, model_requested, model_used, provider,
                       prompt_tokens, completion_tokens, credits, status, latency_ms, created_at,
                       balance_after, hold_note, kind, tool_slug, tool_name, developer_id,
                       developer_credits)
    VALUES (NEW.request_id, NEW.account_id, NEW.key_id, NEW.model_requested, NEW.model_used,
            NEW.provider, NEW.prompt_tokens, NEW.completion_tokens, NEW.credits, NEW.status,
            NEW.latency_ms, NEW.created_at, NEW.balance_after, NEW.hold_note, NEW.kind,
            NEW.tool_slug, NEW.tool_name, NEW.developer_id, NEW.developer_credits);
    UPDATE accounts SET balance = NEW.balance_after WHERE user_id = NEW.account_id;
    DELETE FROM holds WHERE id = NEW.request_id;
END;
DROP INDEX usage_developer;
CREATE INDEX usage_developer ON usage(developer_id, created_at) WHERE developer_id IS NOT NULL;
