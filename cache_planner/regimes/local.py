"""The self-hosted engine (this project's backend, vLLM, SGLang): it hashes every full block of every prompt
and shares them between requests by itself, so there is nothing to mark and no catalogue row to plan with; what
the gateway adds is routing a prefix to the replica that holds it (`policies/affinity.py`, `gateway/kv_index.py`).
"""

from __future__ import annotations

from prefixgate.cache_planner.regimes.base import Regime

NOTE = "cache: the local engine caches every shared prefix block automatically"


class LocalEngine(Regime):
    providers = ("local",)
    catalogued = False


REGIME = LocalEngine()
