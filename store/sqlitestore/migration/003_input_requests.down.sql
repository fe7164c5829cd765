DROP TABLE input_requests;
