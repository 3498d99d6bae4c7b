"""Policies: routing, fallbacks, budgets, TTL and rewrite permissions."""
