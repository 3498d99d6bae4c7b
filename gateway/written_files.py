"""Files Claude's code execution wrote in a tenant's answer: they lie in the organisation's storage as uploads do,
so they count toward the tenant's `uploads` quota (`file_quota`) from that answer until deleted: toward
`max_files` at once, and toward `max_mb` with their size once the provider's metadata for the file (`GET
/v1/files/{id}` at the account that ran the code: `size_bytes`) gives it. The answer names the file, not its
size; where the metadata cannot be had (an account with no Files API, a failed call) the file counts 0 bytes.
"""

from __future__ import annotations

import asyncio
import json

from prefixgate.dialects import wire_format
from prefixgate.errors import RequestError
from prefixgate.gateway.auth import Caller, upstream_credential
from prefixgate.gateway.file_quota import FILE_TTL_S, FileQuota, file_size
from prefixgate.gateway.upstream import UpstreamClient, UpstreamFailure
from prefixgate.model_ids import STORED_ID, path_model
from prefixgate.policies import Upstream
from prefixgate.providers.files import ANTHROPIC, ANTHROPIC_FILES_BETA, FILE_KINDS

METADATA_S = 10.0       # the metadata call's timeout: a small JSON answer


class WrittenFiles:
    def __init__(self, quota: FileQuota, upstream: UpstreamClient) -> None:
        self._quota = quota
        self._upstream = upstream
        self._counting: set[asyncio.Task] = set()

    def count(self, owner: str, file_id: str, home: Upstream | None, caller: Caller) -> None:
        """`owner`'s file `file_id`, written at `home` in an answer to `caller`, counted: one more file before the
        answer starts (an upload sent at once must see it), its bytes once known (off the answer's path)."""
        added = self._quota.add(owner, file_id, 0, FILE_TTL_S)
        task = asyncio.get_running_loop().create_task(self._count(added, owner, file_id, home, caller))
        self._counting.add(task)
        task.add_done_callback(self._counting.discard)

    async def _count(self, added: asyncio.Task, owner: str, file_id: str, home: Upstream | None, caller: Caller) -> None:
        await added
        if home is None or home.kind not in FILE_KINDS[ANTHROPIC]:
            return
        try:
            tail = f"/files/{path_model(file_id, STORED_ID, field='file_id')}"
            resp = await self._upstream.forward(
                home, wire_format(ANTHROPIC), "GET", tail if home.url.endswith("/v1") else "/v1" + tail, "", b"",
                upstream_credential(home, caller, ANTHROPIC), METADATA_S,
                caller_headers={"anthropic-beta": ANTHROPIC_FILES_BETA})
            made = json.loads(resp.body or b"")
        except (UpstreamFailure, RequestError, OSError, TimeoutError, ValueError):
            return      # the file still counts, as 0 bytes
        size = file_size(made) if isinstance(made, dict) else 0
        if size:
            await self._quota.adjust(owner, file_id, size)
