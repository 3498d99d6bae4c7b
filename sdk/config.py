"""What one `wrap()` call asked for, checked once at the edge."""

from __future__ import annotations

import threading
import weakref
from dataclasses import dataclass, field

from prefixgate.cache_planner import CALLER_CHECKPOINTS, CallerCheckpoints, PlannerState
from prefixgate.cache_planner.plan import Mode
from prefixgate.sdk.azure import check_deployments
from prefixgate.sdk.usage_ledger import Ledger

# `plan()` updates a route's state without a lock of its own (the gateway plans on one event loop);
# wrapped clients used from many threads share a state, so they share its lock.
_LOCKS: weakref.WeakKeyDictionary[PlannerState, threading.Lock] = weakref.WeakKeyDictionary()
_LOCKS_GUARD = threading.Lock()


def lock_for(state: PlannerState) -> threading.Lock:
    with _LOCKS_GUARD:
        return _LOCKS.setdefault(state, threading.Lock())


@dataclass(frozen=True)
class WrapConfig:
    ledger: Ledger
    state: PlannerState
    mode: Mode
    route: str | None = None
    tenant: str = ""
    lock: threading.Lock = field(default_factory=threading.Lock, compare=False, repr=False)
    caller_checkpoints: CallerCheckpoints = "keep"
    azure: bool = False     # an Azure OpenAI client: calls name deployments (sdk/azure.py)
    deployments: tuple[tuple[str, str], ...] = ()

    @classmethod
    def build(cls, *, route: str | None, rewrite: bool, ledger: Ledger | None, tenant: str | None,
              state: PlannerState | None, default_ledger: Ledger, caller_checkpoints: str = "keep",
              azure: bool = False, deployments: object = None) -> WrapConfig:
        if route is not None and (not isinstance(route, str) or not route.strip()):
            raise ValueError(f"wrap(route=...) must be a non-empty string or None, got {route!r}")
        if not isinstance(rewrite, bool):
            raise TypeError(f"wrap(rewrite=...) must be True or False, got {rewrite!r}")
        if ledger is not None and not isinstance(ledger, Ledger):
            raise TypeError(f"wrap(ledger=...) must be a prefixgate.sdk.Ledger, got {type(ledger).__name__}")
        if tenant is not None and not isinstance(tenant, str):
            raise TypeError(f"wrap(tenant=...) must be a string, got {type(tenant).__name__}")
        if state is not None and not isinstance(state, PlannerState):
            raise TypeError(f"wrap(state=...) must be a prefixgate.cache_planner.PlannerState, got {type(state).__name__}")
        if caller_checkpoints not in CALLER_CHECKPOINTS:
            raise ValueError(f"wrap(caller_checkpoints=...) must be one of {', '.join(CALLER_CHECKPOINTS)}, "
                             f"got {caller_checkpoints!r}")
        if deployments is not None and not azure:
            raise TypeError("wrap(deployments=...) is for Azure OpenAI clients (openai.AzureOpenAI, AsyncAzureOpenAI, "
                            "or an OpenAI client on an Azure endpoint)")
        state = state if state is not None else PlannerState()
        return cls(ledger=ledger if ledger is not None else default_ledger, state=state,
                   mode="rewrite" if rewrite else "checkpoints", route=route, tenant=tenant or "",
                   lock=lock_for(state), caller_checkpoints=caller_checkpoints,  # type: ignore[arg-type]
                   azure=azure, deployments=check_deployments(deployments) if deployments is not None else ())
