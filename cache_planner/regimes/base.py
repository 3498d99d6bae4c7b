"""What every cache regime answers (see the package's docstring); the defaults are a regime that places nothing."""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from prefixgate.cache_planner.checkpoints import Candidate
    from prefixgate.cache_planner.stability import RouteState
    from prefixgate.cache_planner.target import Target
    from prefixgate.cost import Price
    from prefixgate.ir import Block, Conversation, Segment
    from prefixgate.providers.rules import Catalog, ModelRules


class Regime:
    providers: tuple[str, ...] = ()         # the planner providers (Target.provider) that cache this way
    bridges: bool = False                   # lookback bridges: a window only so many positions back is searched
    holds: bool = False                     # hour-long conversation entries kept alive by marking them (`held`)
    caller_marks: bool = False              # the caller may place its own markers (kept, added to or optimized)
    one_ttl: bool = False                   # every marker of a request takes the same TTL
    routing_key: bool = False               # a request carries a key that routes it to its prefix (cache_key.py)
    catalogued: bool = True                 # planned with its model's catalogue row (minimum tokens, TTLs, prices)
    whole_prompt: bool = True               # an answered prompt is cached whole (False: up to its markers only)

    def markable(self, target: Target, seg: Segment, block: Block) -> bool:
        """Whether a checkpoint may sit after `block`."""
        return False

    def adjusts(self, model: ModelRules) -> bool:
        """Whether markers the caller placed may be moved or added to on `model` (route's `caller_checkpoints`)."""
        return False

    def choose(self, target: Target, model: ModelRules, price: Price, catalog: Catalog, route: RouteState,
               cands: list[Candidate], notes: list[str]) -> list[Candidate]:
        """The candidates worth a marker, in index order with their TTLs final (explained in `notes`)."""
        return []

    def ttls(self, target: Target, model: ModelRules, catalog: Catalog) -> tuple[str, ...]:
        """The TTLs a marker may take on `model`."""
        return ()

    def warm_for(self, target: Target, catalog: Catalog, params: dict) -> tuple[str, int]:
        """(write TTL, seconds) a prefix stays cached after an answer that placed no marker of its own: the
        provider's rule (what a sticky route pins a session for, gateway/sticky.py)."""
        return "5m", 300

    def marker_limit(self, target: Target, catalog: Catalog) -> int:
        """The most markers one request may carry."""
        return 0

    def marked(self, conv: Conversation, marks: dict[int, str]) -> None:
        """After the caller's markers are settled: request fields that go with them."""

    def place(self, conv: Conversation, target: Target, model: ModelRules, price: Price, catalog: Catalog,
              route: RouteState, cands: list[Candidate], flat: list, static: Candidate | None, static_key: str,
              now: float, notes: list[str]) -> dict | None:
        """Write the planner's own placement on `conv` (its blocks through `checkpoints._own`); returns the body of
        an explicit cache to create first, if one pays."""
        return None
