"""Budgets (issue 36): what each person, community and the whole bot may spend on the model,
reserved before each call and settled after (memory/budget/guard.py)."""
