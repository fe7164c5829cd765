DROP INDEX input_requests_expiry;
ALTER TABLE input_requests DROP COLUMN default_answer;
ALTER TABLE input_requests DROP COLUMN expires_at;
