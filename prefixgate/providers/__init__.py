"""Provider facts: caching rules and lifecycle (providers.toml), prices, the catalogue, compatible profiles."""
