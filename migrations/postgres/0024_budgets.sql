-- Budgets (issue 36): what each scope (a person, a community, the whole bot) has spent and
-- holds reserved in each period ('d:2026-12-03', 'm:2026-12'), in the budgets' unit (USD at
-- MODEL_PRICES, or tokens for a model priced at 0). A call reserves its worst case here before
-- the model is asked and settles its real cost after; `notified` is the highest share of the
-- cap (0, 80, 100) whose notice the operators were already sent. Counters only: no text.
-- Never edit this file once it has landed.

CREATE TABLE budget_counters (
    scope     text NOT NULL,
    period    text NOT NULL,
    spent     double precision NOT NULL DEFAULT 0,
    reserved  double precision NOT NULL DEFAULT 0,
    calls     integer NOT NULL DEFAULT 0,
    refused   integer NOT NULL DEFAULT 0,
    notified  integer NOT NULL DEFAULT 0,
    PRIMARY KEY (scope, period)
);
