-- A token's own request limit per minute; NULL: the server's --rate-limit.
ALTER TABLE api_tokens ADD COLUMN rate_limit_per_minute INTEGER;
