"""Provider miss diagnostics in a format's own fields: a request names an earlier answer, and the provider's answer
says why its cache missed against it (wire-2026-11.md sections 2 and 3). A format whose API defines such fields
sets `WireFormat.miss_diagnosis`; the gateway (gateway/diagnostics.py) decides when to ask and remembers ids."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from prefixgate.ir import Conversation


@dataclass(frozen=True)
class ProviderVerdict:
    reason: str                 # the provider's own word: tools_changed, previous_message_not_found, ...
    missed_tokens: int | None   # the tokens it says were not read from cache (*_changed / cache_miss only)


class MissDiagnosis:
    per_model: bool = False     # only models whose catalogue row takes explicit caching options may ask

    def fields(self, previous: str | None, sent: Conversation) -> dict[str, Any]:
        """What to add to the upstream body, naming the conversation's previous answer (None: there is none)."""
        raise NotImplementedError

    def callers_own(self, params: dict[str, Any]) -> bool:
        """Whether the caller sent the field itself (then it is read, never touched)."""
        raise NotImplementedError

    def answer(self, data: dict) -> dict | None:
        """The finished answer in `data` (a JSON body or a stream event), else None."""
        raise NotImplementedError

    def verdict(self, answer: dict) -> ProviderVerdict | None:
        """Why the cache missed, from a finished answer; None when it carries no diagnosis."""
        raise NotImplementedError
