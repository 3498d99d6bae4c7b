"""The providers' Files APIs (`/v1/files`): who serves one, how big a file may be, and what an unknown id answers.

- OpenAI: `POST /v1/files` (multipart: `file`, `purpose`, optional `expires_after`), list, retrieve, `/content`,
  DELETE. "Individual files can be up to 512 MB" (platform.openai.com/docs/api-reference/files/create). An id the
  organisation does not hold: 404 `No such File object: {id}` (`param: id`).
- Anthropic (beta: `anthropic-beta: files-api-2025-04-14` on every call, and on a Messages request naming a file):
  upload, list, metadata, `/content` (only for files a tool such as code execution wrote: `downloadable`), DELETE.
  "Maximum file size: 500 MB per file" (docs.claude.com/en/docs/build-with-claude/files).
"""

from __future__ import annotations

from prefixgate.errors import RequestError

OPENAI, ANTHROPIC = "openai", "anthropic"     # the wire formats whose clients call `/v1/files`
MAX_FILE_BYTES = {OPENAI: 512 * 1024 * 1024, ANTHROPIC: 500 * 1024 * 1024}
PROVIDER_NAMES = {OPENAI: "OpenAI", ANTHROPIC: "Anthropic"}
# The upstream kinds (policies/kinds.py) whose account holds a caller's files: the provider's own API, never a
# compatible provider or Bedrock and Vertex, which serve no Files API.
FILE_KINDS = {OPENAI: frozenset({"openai", "openai_responses"}), ANTHROPIC: frozenset({"anthropic"})}
ANTHROPIC_FILES_BETA = "files-api-2025-04-14"
# Query parameters each list call defines (OpenAI: cursor `after`; Anthropic: `after_id`/`before_id`, and the
# opaque `page` cursor its SDK pages with since 2026, or `ids`).
LIST_QUERY = {OPENAI: frozenset({"after", "limit", "order", "purpose"}),
              ANTHROPIC: frozenset({"after_id", "before_id", "limit", "page", "ids", "ids[]", "scope_id"})}


def file_not_found(provider: str, file_id: str) -> RequestError:
    """What the provider answers for a file id its account does not hold."""
    if provider == ANTHROPIC:
        return RequestError(f"File not found: {file_id}", status=404, kind="not_found")
    return RequestError(f"No such File object: {file_id}", field="id", status=404, kind="not_found")
