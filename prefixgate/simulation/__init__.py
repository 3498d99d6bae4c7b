"""The simulated world: each provider's prompt cache, the simulator over them, replay of traces, and the mock
providers (`prefixgate mock-providers`, the stand-in for hosted APIs). It reads provider facts from
`prefixgate.providers` and bodies through `prefixgate.dialects`; nothing in core imports it."""
