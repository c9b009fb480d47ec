-- Credit leases (src/leases.rs): an instance reserves part of a balance as one row in `holds`
-- and writes the usage rows it meters against it in batches. Such a usage row names its lease;
-- its money already left the balance when the lease was taken, so the settle trigger must not
-- touch the account for it.
ALTER TABLE usage ADD COLUMN lease_id TEXT;

DROP TRIGGER usage_settle;
CREATE TRIGGER usage_settle AFTER INSERT ON usage WHEN NEW.lease_id IS NULL BEGIN
    UPDATE accounts SET balance = NEW.balance_after WHERE user_id = NEW.account_id;
    DELETE FROM holds WHERE id = NEW.request_id;
END;
