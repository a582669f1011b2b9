"""Several workers on one PostgreSQL (issue 16): a platform process stores every update in the
inbox before it acknowledges it; workers claim one user's pending messages at a time and answer
them through the platform's REST API (memory/store/postgres/inbox.py holds the tables)."""
