"""The cache planner: learn what is stable, rewrite static-first, place checkpoints, choose TTLs."""
