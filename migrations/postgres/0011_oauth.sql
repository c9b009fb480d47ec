-- OAuth 2.1 for MCP clients (issue 30): clients registered dynamically (RFC 7591), the grants
-- account holders approve on the consent page, one-time authorization codes, and access and
-- refresh tokens. Codes and tokens are stored as SHA-256 hashes only. A grant acts as one of
-- the account's API keys (`key_id`): its budget, allowlists and limits bind the grant's tokens.

CREATE TABLE oauth_clients (
    id            TEXT PRIMARY KEY,
    name          TEXT    NOT NULL,
    -- A JSON array of the exact redirect URIs registered.
    redirect_uris TEXT    NOT NULL,
    created_at    BIGINT NOT NULL
);

CREATE TABLE oauth_grants (
    id           TEXT PRIMARY KEY,
    account_id   TEXT    NOT NULL REFERENCES accounts(user_id),
    key_id       TEXT    NOT NULL REFERENCES api_keys(id),
    client_id    TEXT    NOT NULL REFERENCES oauth_clients(id),
    -- The path of the protected resource (`/mcp` or `/mcp/{slug}`, RFC 8707).
    resource     TEXT    NOT NULL,
    created_at   BIGINT NOT NULL,
    last_used_at BIGINT,
    revoked_at   BIGINT
);
CREATE INDEX oauth_grants_account ON oauth_grants(account_id);

CREATE TABLE oauth_codes (
    hash           TEXT PRIMARY KEY,
    grant_id       TEXT    NOT NULL REFERENCES oauth_grants(id),
    redirect_uri   TEXT    NOT NULL,
    code_challenge TEXT    NOT NULL,
    expires_at     BIGINT NOT NULL,
    -- Set when the code is exchanged; a second exchange revokes the grant (RFC 6749 4.1.2).
    used_at        BIGINT
);

CREATE TABLE oauth_tokens (
    hash       TEXT PRIMARY KEY,
    grant_id   TEXT    NOT NULL REFERENCES oauth_grants(id),
    -- `access` or `refresh`.
    kind       TEXT    NOT NULL,
    expires_at BIGINT NOT NULL,
    -- Set when a refresh token is exchanged; presenting it again revokes the grant.
    rotated_at BIGINT
);
CREATE INDEX oauth_tokens_grant ON oauth_tokens(grant_id);
