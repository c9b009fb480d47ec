-- The exact response cache (issue 53): a hit is a usage row marked as such, and every usage row
-- keeps what it saved against list price (a provider's cache reads, or a cached reply's list
-- cost less its charge), so the saving shown is a sum. Entries live here when no Redis is
-- configured, scoped to one wallet, evicted oldest first past the total cap.
ALTER TABLE usage ADD COLUMN cache_hit BIGINT NOT NULL DEFAULT 0;
ALTER TABLE usage ADD COLUMN saved_credits BIGINT NOT NULL DEFAULT 0;
-- A key whose requests use the response cache without asking.
ALTER TABLE api_keys ADD COLUMN response_cache BIGINT NOT NULL DEFAULT 0;
CREATE TABLE response_cache (
    key         TEXT   PRIMARY KEY,
    wallet      TEXT   NOT NULL,
    created_at  BIGINT NOT NULL,
    expires_at  BIGINT NOT NULL,
    size        BIGINT NOT NULL,
    entry       BYTEA  NOT NULL
);
CREATE INDEX response_cache_age ON response_cache(created_at);
