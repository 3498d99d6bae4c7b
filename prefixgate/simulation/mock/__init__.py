"""`prefixgate mock-providers`: faithful stand-ins for the hosted APIs (hosted APIs are unreachable from
tests and benchmarks), one module per provider, the shared server, reply text, and fault injection."""
