-- The durable inbox of several workers (issue 16) lives on PostgreSQL only: a single process
-- on SQLite (`companion run`, role all) takes messages straight from the platform as before.
SELECT 1;
