"""Reports: cost totals, budgets, estimates and exports; audit verification; workers; run alerts."""
