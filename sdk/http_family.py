"""httpx or httpx2: the provider SDKs accept a client of either family (httpx2 is a drop-in fork), and
every object the wrapper hands them must come from the family of the client they already use."""

from __future__ import annotations

import sys
from types import ModuleType
from typing import Any


def family_of(obj: Any) -> ModuleType:
    """The httpx-family module `obj` (a client, request or response) belongs to."""
    for name in ("httpx2", "httpx"):
        module = sys.modules.get(name)
        if module is None and name == "httpx2":
            try:
                import httpx2 as module
            except ImportError:
                continue
        if module is not None and isinstance(obj, (module.Client, module.AsyncClient, module.Request, module.Response)):
            return module
    raise TypeError(f"expected an httpx or httpx2 client, request or response, got {type(obj).__name__}")
