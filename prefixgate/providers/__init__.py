"""Per-provider caching rules, pricing, and a cache simulator."""
