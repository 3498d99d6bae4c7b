"""The cache planner: learn what is stable, rewrite static-first, place checkpoints, choose TTLs."""

from prefixgate.cache_planner.cache_key import CACHE_KEY_MODES, CacheKeyMode
from prefixgate.cache_planner.caller_markers import CALLER_CHECKPOINTS, CallerCheckpoints
from prefixgate.cache_planner.plan import MODES, Mode, Plan, fingerprint, plan
from prefixgate.cache_planner.stability import PlannerState, RedisStore
from prefixgate.cache_planner.target import Target

__all__ = ["CACHE_KEY_MODES", "CacheKeyMode", "CALLER_CHECKPOINTS", "CallerCheckpoints", "MODES", "Mode", "Plan", "PlannerState", "RedisStore", "Target", "fingerprint", "plan"]
