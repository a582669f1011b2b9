-- Budgets (issue 36): the community a group channel belongs to, for the budget of its
-- community. A Discord server is one community: each of its channels ("discord:<channel>")
-- is recorded here with its server ("discord:<guild>") when a message of it is admitted, so
-- that the server's channels share one daily community budget. A Telegram group is its own
-- community and needs no row. Ids only: no text.
-- Never edit this file once it has landed.

CREATE TABLE channel_communities (
    channel    text NOT NULL PRIMARY KEY,
    community  text NOT NULL
);
