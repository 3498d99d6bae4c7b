"""prefixgate: make LLM prompt prefixes reusable."""

from prefixgate.cost import Cost, Price, price_usage
from prefixgate.errors import RequestError
from prefixgate.ir import Block, Checkpoint, Conversation, Segment
from prefixgate.usage import Usage

__version__ = "0.1.0"


def __getattr__(name: str):
    # `prefixgate.wrap` and `prefixgate.client` live in the SDK component, which imports the planner;
    # core must not import it at import time (dependencies point sdk -> cache_planner -> core).
    if name in ("wrap", "client"):
        from prefixgate import sdk

        return getattr(sdk, name)
    raise AttributeError(f"module 'prefixgate' has no attribute {name!r}")


__all__ = [
    "Block", "Checkpoint", "Conversation", "Cost", "Price", "RequestError", "Segment", "Usage",
    "__version__", "client", "price_usage", "wrap",
]
