"""Training: advantage estimators, the policy loss, models and engines. Sees only experiences."""
