"""prefixgate: make LLM prompt prefixes reusable."""

from prefixgate.cost import Cost, Price, price_usage
from prefixgate.errors import RequestError
from prefixgate.ir import Block, Checkpoint, Conversation, Segment
from prefixgate.usage import Usage

__version__ = "0.1.0"

__all__ = [
    "Block", "Checkpoint", "Conversation", "Cost", "Price", "RequestError", "Segment", "Usage",
    "__version__", "price_usage",
]
