DROP TABLE leaders;
