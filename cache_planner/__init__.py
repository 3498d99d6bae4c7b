"""The cache planner: learn what is stable, rewrite static-first, place checkpoints, choose TTLs."""

from prefixgate.cache_planner.plan import MODES, Mode, Plan, plan
from prefixgate.cache_planner.target import Target

__all__ = ["MODES", "Mode", "Plan", "Target", "plan"]
