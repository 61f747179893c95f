-- Webhooks: endpoints an operator registers (`webhook create`) and their
-- durable outbox. A publish writes one delivery per matching endpoint and
-- event inside the publish's transaction, so a rolled-back publish sends nothing and a
-- crash loses nothing. Times are epoch milliseconds.
CREATE TABLE webhook_endpoints (
    id              BIGSERIAL PRIMARY KEY,
    url             TEXT NOT NULL,
    -- `whsec_` + base64 key: kept as is, since signing needs it.
    secret          TEXT NOT NULL,
    -- The position-event list's filters (NULL: any).
    symbol          TEXT,
    address         TEXT,
    kind            TEXT,
    min_value       TEXT,
    created_at      BIGINT NOT NULL,
    disabled_at     BIGINT,
    disabled_reason TEXT,
    -- Since when the head delivery has failed (NULL: not failing).
    failing_since   BIGINT,
    -- Delivery is ordered per endpoint, so the backoff is the endpoint's.
    next_attempt_at BIGINT NOT NULL,
    -- The delivering process and until when its claim holds.
    claimed_by      TEXT,
    claimed_until   BIGINT
);

CREATE TABLE webhook_deliveries (
    id              BIGSERIAL PRIMARY KEY,
    endpoint_id     BIGINT NOT NULL REFERENCES webhook_endpoints(id) ON DELETE CASCADE,
    -- The Standard Webhooks `webhook-id`: the same on every attempt.
    message_id      TEXT NOT NULL UNIQUE,
    event_type      TEXT NOT NULL,
    -- The position event's stream id (NULL for a test message).
    event_seq       BIGINT,
    payload         TEXT NOT NULL,
    -- pending | delivered | failed (only a test send fails for good).
    state           TEXT NOT NULL,
    created_at      BIGINT NOT NULL,
    attempts        INTEGER NOT NULL,
    last_attempt_at BIGINT,
    last_status     INTEGER,
    last_error      TEXT,
    delivered_at    BIGINT
);
CREATE INDEX webhook_deliveries_pending ON webhook_deliveries (endpoint_id, id) WHERE state = 'pending';
CREATE INDEX webhook_deliveries_endpoint ON webhook_deliveries (endpoint_id, id);
CREATE INDEX webhook_deliveries_finished ON webhook_deliveries (created_at) WHERE state <> 'pending';
