-- Per-key tool filtering (issue 30): the tool servers (`slug`) and tools (`slug__tool`) a key
-- may use, a JSON array; NULL for all.
ALTER TABLE api_keys ADD COLUMN allowed_tools TEXT;
-- Per-tool prices (issue 30): whole credits per call by tool name, a JSON object; a tool not in
-- it (or NULL) costs the service's default_credits.
ALTER TABLE mcp_services ADD COLUMN tool_prices TEXT;
