-- A key's budget (issue 29): a cap in micro-credits per period ('day', 'week', 'month' UTC, or
-- 'lifetime'); NULL for none.
ALTER TABLE api_keys ADD COLUMN budget_micros BIGINT;
ALTER TABLE api_keys ADD COLUMN budget_period TEXT;
-- A key's own limits (issue 29), on top of its plan's; NULL for none.
ALTER TABLE api_keys ADD COLUMN requests_per_minute BIGINT;
ALTER TABLE api_keys ADD COLUMN tokens_per_minute BIGINT;
ALTER TABLE api_keys ADD COLUMN concurrent_requests BIGINT;
