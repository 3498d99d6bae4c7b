"""The request path's reuse layer: one store of memos keyed by content and bounded by the memory they hold
(`memo`), and what a value holds (`sizing`). See ARCHITECTURE.md, "Reuse"."""

from prefixgate.reuse.memo import STORE, Memo, Store, keep, memo
from prefixgate.reuse.sizing import weigh

__all__ = ["STORE", "Memo", "Store", "keep", "memo", "weigh"]
