"""A model request naming a file that was deleted at the provider (its console, a script with the organisation's
key), not through the gateway: the provider's refusal says so, and the file is forgotten and its share of the
tenant's upload quota freed (`file_quota`), as a retrieve, download or delete that hears it is gone does
(`files_upstream.forget_if_gone`).

Only where the answer names the file unambiguously: OpenAI's 404 or 400 whose message holds the file's id
("No such File object: file-..."), Anthropic's 404 naming it ("File not found: file_..."), Gemini's 403 naming it
("You do not have permission to access the File ID or it may not exist."). A refusal that names no file, or
another file than the one named (a request may name several), frees nothing: the file may well be there, and
a tenant must not lose track of what it stores through a vague error.
"""

from __future__ import annotations

import re

from prefixgate.gateway.file_quota import FileQuota
from prefixgate.gateway.provider_ids import FILE, named_ids
from prefixgate.gateway.stored_ids import StoredIds
from prefixgate.gateway.upstream import UpstreamFailure
from prefixgate.ir import Conversation
from prefixgate.policies.schema import Upstream
from prefixgate.providers.files import ANTHROPIC, FILE_KINDS, GEMINI, OPENAI, gemini_names

# The statuses each provider refuses a model request naming a file it does not hold with.
GONE_STATUSES = {OPENAI: frozenset({400, 404}), ANTHROPIC: frozenset({404}), GEMINI: frozenset({403})}


def may_name_a_gone_file(status: int | None) -> bool:
    """Whether a refusal's status is one a provider says a file is gone with (the cheap test before any other)."""
    return status in (400, 403, 404)


async def forget_named_gone(stored_ids: StoredIds, quota: FileQuota, owner: str | None, conv: Conversation,
                            upstream: Upstream, failure: UpstreamFailure) -> None:
    """Each file `conv` names that `failure` (from `upstream`, the file's recorded home) says is gone."""
    provider = next((p for p, kinds in FILE_KINDS.items() if upstream.kind in kinds), None)
    if provider is None or failure.status not in GONE_STATUSES[provider]:
        return
    for named in named_ids(conv):
        if named.kind != FILE:
            continue
        counted = "files/" + named.ident.rpartition("files/")[2] if provider == GEMINI else named.ident
        said = counted.removeprefix("files/") if provider == GEMINI else counted    # Gemini words the bare id
        if not re.search(rf"(?<![\w-]){re.escape(said)}(?![\w-])", failure.message):
            continue
        if await stored_ids.find_home(FILE, counted) != upstream.name or not await stored_ids.allows(FILE, counted, owner):
            continue        # refused where the file never was, or not this party's: says nothing of it
        for name in gemini_names(counted) if provider == GEMINI else (counted,):
            await stored_ids.forget(FILE, name)
        await quota.remove(owner, counted)
