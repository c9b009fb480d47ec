-- The developer index holds tool calls only (as on SQLite, where this migration also moves the
-- direct settlement's trigger off the usage table): a chat row (no developer) was an index
-- entry under NULL that no query reads (`developer_id = $1` never matches NULL).
DROP INDEX usage_developer;
CREATE INDEX usage_developer ON usage(developer_id, created_at) WHERE developer_id IS NOT NULL;
