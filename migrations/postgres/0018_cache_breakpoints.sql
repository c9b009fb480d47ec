-- Prompt-cache breakpoints (issue 53), turned on for one key or for an organization's wallet
-- (an account row); a model's own switch is in the config (1: on).
ALTER TABLE accounts ADD COLUMN cache_breakpoints BIGINT NOT NULL DEFAULT 0;
ALTER TABLE api_keys ADD COLUMN cache_breakpoints BIGINT NOT NULL DEFAULT 0;
