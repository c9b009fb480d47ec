-- Hold and settlement as one statement each (one driver round trip instead of four or five):
-- the INSERT computes the amounts from the account row, a trigger moves the money, all inside
-- the statement's write lock. See src/store/mod.rs.
ALTER TABLE holds ADD COLUMN balance_after INTEGER NOT NULL DEFAULT 0;
ALTER TABLE usage ADD COLUMN balance_after INTEGER NOT NULL DEFAULT 0;

CREATE TRIGGER holds_debit AFTER INSERT ON holds BEGIN
    UPDATE accounts SET balance = NEW.balance_after WHERE user_id = NEW.account_id;
END;

CREATE TRIGGER usage_settle AFTER INSERT ON usage BEGIN
    UPDATE accounts SET balance = NEW.balance_after WHERE user_id = NEW.account_id;
    DELETE FROM holds WHERE id = NEW.request_id;
END;
