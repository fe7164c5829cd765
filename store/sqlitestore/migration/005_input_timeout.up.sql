-- When an open question expires, and the answer it then takes (NULL: the
-- task fails with input_timeout).
ALTER TABLE input_requests ADD COLUMN expires_at INTEGER;
ALTER TABLE input_requests ADD COLUMN default_answer TEXT;
CREATE INDEX input_requests_expiry ON input_requests (expires_at) WHERE status = 'pending';
