"""The bundled local backend: a paged, prefix-cached, continuous-batching inference engine."""
