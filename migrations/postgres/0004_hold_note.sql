-- What the credit hold decided for the candidates after the first (DESIGN.md, Rules: Credits):
-- e.g. "econ-b: hold topped up; econ-c: skipped, the hold cannot pay one token". NULL when the
-- first candidate's hold covered the request as asked.
ALTER TABLE usage ADD COLUMN hold_note TEXT;
