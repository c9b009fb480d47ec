-- Organizations (issue 51): an organization is an account (its wallet, plan and limits are the
-- account's, so holds, leases, settlement and plan limits apply to it as to a person's) with a
-- name and members; an organization key is a key of that account owned by a member.
CREATE TABLE organizations (
    id         TEXT PRIMARY KEY REFERENCES accounts(user_id),
    name       TEXT   NOT NULL,
    created_at BIGINT NOT NULL,
    -- The models every organization key may use (a JSON array of ids, aliases and tiers; NULL:
    -- all), on top of each key's own list.
    allowed_models TEXT
);

CREATE TABLE org_members (
    org_id     TEXT   NOT NULL REFERENCES organizations(id),
    account_id TEXT   NOT NULL REFERENCES accounts(user_id),
    role       TEXT   NOT NULL CHECK (role IN ('owner', 'admin', 'member')),
    joined_at  BIGINT NOT NULL,
    -- A credit cap per period across the member's organization keys (µcr; NULL: none).
    cap_micros BIGINT CHECK (cap_micros >= 0),
    cap_period TEXT,
    PRIMARY KEY (org_id, account_id)
);
CREATE INDEX org_members_account ON org_members(account_id);
-- One owner per organization.
CREATE UNIQUE INDEX org_members_owner ON org_members(org_id) WHERE role = 'owner';

-- An invitation is a link with a single-use token (only its hash is kept) for one e-mail.
CREATE TABLE org_invitations (
    id          TEXT PRIMARY KEY,
    org_id      TEXT   NOT NULL REFERENCES organizations(id),
    email       TEXT   NOT NULL,
    role        TEXT   NOT NULL CHECK (role IN ('admin', 'member')),
    token_hash  TEXT   NOT NULL UNIQUE,
    invited_by  TEXT   NOT NULL,
    created_at  BIGINT NOT NULL,
    expires_at  BIGINT NOT NULL,
    accepted_at BIGINT,
    accepted_by TEXT,
    revoked_at  BIGINT
);
CREATE INDEX org_invitations_org ON org_invitations(org_id, created_at);

-- The member who owns an organization key (NULL: a key of a person's own account).
ALTER TABLE api_keys ADD COLUMN owner_id TEXT;
CREATE INDEX api_keys_owner ON api_keys(account_id, owner_id) WHERE owner_id IS NOT NULL;

-- Single sign-on per organization: its OpenID provider and who may come in through it.
CREATE TABLE org_sso (
    org_id          TEXT PRIMARY KEY REFERENCES organizations(id),
    issuer          TEXT   NOT NULL,
    client_id       TEXT   NOT NULL,
    client_secret   TEXT   NOT NULL,
    -- A JSON array of e-mail domains.
    allowed_domains TEXT   NOT NULL,
    default_role    TEXT   NOT NULL CHECK (default_role IN ('admin', 'member')),
    -- 1: its members reach the organization only through a session signed in by it.
    required        BIGINT NOT NULL DEFAULT 0,
    updated_at      BIGINT NOT NULL
);

-- A sign-in on its way through the provider: its state (hashed), nonce and PKCE verifier,
-- taken once by the callback on whichever instance it lands.
CREATE TABLE sso_logins (
    state_hash TEXT PRIMARY KEY,
    org_id     TEXT   NOT NULL,
    nonce      TEXT   NOT NULL,
    verifier   TEXT   NOT NULL,
    expires_at BIGINT NOT NULL
);

-- The organization whose single sign-on made a dashboard session (NULL: a password).
ALTER TABLE sessions ADD COLUMN sso_org TEXT;
