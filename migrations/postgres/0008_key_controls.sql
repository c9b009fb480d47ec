-- A key may expire (issue 29): milliseconds since the epoch, NULL for never.
ALTER TABLE api_keys ADD COLUMN expires_at BIGINT;
-- A key may be limited to some models (issue 29): a JSON array of ids, aliases or tiers; NULL for all.
ALTER TABLE api_keys ADD COLUMN allowed_models TEXT;
