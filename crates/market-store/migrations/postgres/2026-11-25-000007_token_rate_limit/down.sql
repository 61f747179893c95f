ALTER TABLE api_tokens DROP COLUMN rate_limit_per_minute;
