-- Columns kept in step with SQLite's schema; Postgres does hold and settlement as one
-- statement each with data-modifying CTEs (src/store/mod.rs), no triggers.
ALTER TABLE holds ADD COLUMN balance_after BIGINT NOT NULL DEFAULT 0;
ALTER TABLE usage ADD COLUMN balance_after BIGINT NOT NULL DEFAULT 0;
