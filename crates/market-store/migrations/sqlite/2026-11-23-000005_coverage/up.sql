-- The whole coverage report of a data version (a JSON `NetworkCoverage`:
-- decimals as plain strings), as its writer computed it over every position
-- it serves (`track`). A running server that applies a publish's changes,
-- instead of reloading the whole version, serves this report as it is.
-- NULL for versions written before: a server computes theirs at load.
ALTER TABLE version_freshness ADD COLUMN coverage TEXT;
