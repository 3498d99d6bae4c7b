"""The cost dashboard: the page and its assets (`page`), the JSON API it polls (`api`), and what they
compute from the ledger (figures, misses, alerts). Nothing on the request path imports this package."""

from prefixgate.gateway.dashboard.page import router

__all__ = ["router"]
