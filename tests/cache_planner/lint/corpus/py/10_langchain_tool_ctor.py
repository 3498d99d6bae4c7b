"""LangChain-style tool constructor whose description embeds a timestamp via time.time(), built per
request. (Built once at import it would be fixed for the process's life: a session value.)"""
import time

from langchain_core.tools import StructuredTool


def _lookup(order_id: str) -> str:
    return order_id


def order_tool() -> StructuredTool:
    return StructuredTool.from_function(
        func=_lookup,
        name="lookup_order",
        # prefixgate: expect=PG001
        description=f"Look up an order by id (index refreshed at {int(time.time())}). Returns status, items, carrier "
                    "and the tracking URL. Use it before answering any question about a specific order.",
    )
