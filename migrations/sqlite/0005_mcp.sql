-- The MCP tool marketplace: registered tool servers, and tool calls in the usage table.
CREATE TABLE mcp_services (
    id              TEXT PRIMARY KEY,
    slug            TEXT   NOT NULL UNIQUE,
    owner_id        TEXT   NOT NULL REFERENCES accounts(user_id),
    name            TEXT,
    description     TEXT,
    upstream_url    TEXT   NOT NULL,
    -- Whole credits per call.
    default_credits INTEGER NOT NULL CHECK (default_credits >= 0),
    -- pending | live | rejected | suspended
    status          TEXT   NOT NULL,
    first_party     INTEGER NOT NULL DEFAULT 0,
    -- The upstream's tools/list result (a JSON array), as of the last check.
    tools           TEXT   NOT NULL,
    created_at      INTEGER NOT NULL,
    updated_at      INTEGER NOT NULL
);
CREATE INDEX mcp_services_owner ON mcp_services(owner_id);

-- A tool call's usage row: kind 'tool', the service and tool, the developer paid and how much
-- (µcr). Chat rows keep kind 'chat'.
ALTER TABLE usage ADD COLUMN kind TEXT NOT NULL DEFAULT 'chat';
ALTER TABLE usage ADD COLUMN tool_slug TEXT;
ALTER TABLE usage ADD COLUMN tool_name TEXT;
ALTER TABLE usage ADD COLUMN developer_id TEXT;
ALTER TABLE usage ADD COLUMN developer_credits INTEGER;
CREATE INDEX usage_developer ON usage(developer_id, created_at);
