"""The providers' Files APIs (`/v1/files`): who serves one, how big a file may be, and what an unknown id answers.

- OpenAI: `POST /v1/files` (multipart: `file`, `purpose`, optional `expires_after`), list, retrieve, `/content`,
  DELETE. "Individual files can be up to 512 MB" (platform.openai.com/docs/api-reference/files/create). An id the
  organisation does not hold: 404 `No such File object: {id}` (`param: id`).
- Anthropic (beta: `anthropic-beta: files-api-2025-04-14` on every call, and on a Messages request naming a file):
  upload, list, metadata, `/content` (only for files a tool such as code execution wrote: `downloadable`), DELETE.
  "Maximum file size: 500 MB per file" (docs.claude.com/en/docs/build-with-claude/files).
- Gemini: a resumable upload (`POST /upload/{v}/files`, `X-Goog-Upload-Command: start`, then the bytes to the
  `X-Goog-Upload-URL` it answers, the last chunk with `upload, finalize`), `GET /{v}/files` (`pageSize`,
  `pageToken`), `GET` and `DELETE /{v}/files/{id}`; a file is named `files/{id}` or by its `uri`, lives 48 hours,
  and may be 2 GB (ai.google.dev/gemini-api/docs/files). An id the project does not hold: 403 `You do not have
  permission to access the File {id} or it may not exist.` (PERMISSION_DENIED, as google-gemini issues quote it).
- OpenAI's Uploads API, for files over the Files API's 512 MB (platform.openai.com/docs/api-reference/uploads):
  `POST /v1/uploads` (`bytes`, `filename`, `mime_type`, `purpose`, optional `expires_after` for the File) answers
  an Upload, `pending`; Parts (`POST /v1/uploads/{id}/parts`, multipart `data`) are "at most 64 MB" each, up to
  "8 GB in total", and may be added in parallel; `POST /v1/uploads/{id}/complete` (`part_ids` in the file's order,
  optional `md5`) needs the Parts' bytes to match `bytes` and answers the Upload `completed` with its `file`;
  `POST /v1/uploads/{id}/cancel` answers it `cancelled`. An Upload "expires after an hour" (`expired`).
- OpenAI's Containers API (platform.openai.com/docs/api-reference/containers), where a code interpreter runs and
  writes its files: `POST`/`GET /v1/containers` (list: `after`, `limit` 1-100, default 20, `order`, `name`),
  `GET`/`DELETE /v1/containers/{id}`, and per container `GET`/`POST .../files` (multipart `file`, or JSON
  `file_id` copying a File in), `GET`/`DELETE .../files/{file_id}`, `.../files/{file_id}/content`. A container
  expires after `expires_after.minutes` (default 20) from its `last_active_at`.
"""

from __future__ import annotations

from prefixgate.errors import RequestError

OPENAI, ANTHROPIC, GEMINI = "openai", "anthropic", "gemini"     # the wire formats whose clients upload files
MAX_FILE_BYTES = {OPENAI: 512 * 1024 * 1024, ANTHROPIC: 500 * 1024 * 1024, GEMINI: 2 * 1024 * 1024 * 1024}
PROVIDER_NAMES = {OPENAI: "OpenAI", ANTHROPIC: "Anthropic", GEMINI: "Google"}
# The upstream kinds (policies/kinds.py) whose account holds a caller's files: the provider's own API, never a
# compatible provider or Bedrock and Vertex, which serve no Files API.
FILE_KINDS = {OPENAI: frozenset({"openai", "openai_responses"}), ANTHROPIC: frozenset({"anthropic"}),
              GEMINI: frozenset({"gemini"})}
GEMINI_FILE_LIFETIME_S = 48 * 3600
MAX_UPLOAD_BYTES = 8 * 1024 ** 3        # one OpenAI Upload, all its Parts together
MAX_PART_BYTES = 64 * 1024 ** 2         # one Part (the openai SDK's DEFAULT_PART_SIZE, 67,108,864)
UPLOAD_LIFETIME_S = 3600
# The URIs a Gemini request may name a file by besides `files/{id}` (the File's `uri` is the v1beta one).
GEMINI_FILE_URIS = ("https://generativelanguage.googleapis.com/v1beta/files/",
                    "https://generativelanguage.googleapis.com/v1/files/")
ANTHROPIC_FILES_BETA = "files-api-2025-04-14"
# Query parameters each list call defines (OpenAI: cursor `after`; Anthropic: `after_id`/`before_id`, and the
# opaque `page` cursor its SDK pages with since 2026, or `ids`).
LIST_QUERY = {OPENAI: frozenset({"after", "limit", "order", "purpose"}),
              ANTHROPIC: frozenset({"after_id", "before_id", "limit", "page", "ids", "ids[]", "scope_id"}),
              GEMINI: frozenset({"pageSize", "pageToken"})}
CONTAINER_LIST_QUERY = frozenset({"after", "limit", "order", "name"})
CONTAINER_FILES_QUERY = frozenset({"after", "limit", "order"})
CONTAINER_IDLE_S = 20 * 60      # a container's default `expires_after`


def gemini_names(file_id: str) -> tuple[str, ...]:
    """Every name a Gemini request may give the file `files/{id}` (or `{id}`) by."""
    bare = file_id.removeprefix("files/")
    return (f"files/{bare}", *(uri + bare for uri in GEMINI_FILE_URIS))


def gemini_name(ident: str) -> str:
    """`ident` as the file's name where it is a Gemini file's URI (`files/{id}`, what its upload is counted
    under); any other id as it is."""
    uri = next((uri for uri in GEMINI_FILE_URIS if ident.startswith(uri)), None)
    return "files/" + ident.removeprefix(uri) if uri else ident


def file_not_found(provider: str, file_id: str) -> RequestError:
    """What the provider answers for a file id its account does not hold."""
    if provider == ANTHROPIC:
        return RequestError(f"File not found: {file_id}", status=404, kind="not_found")
    if provider == GEMINI:
        return RequestError(f"You do not have permission to access the File {file_id.removeprefix('files/')} or it "
                            "may not exist.", status=403, kind="permission")
    return RequestError(f"No such File object: {file_id}", field="id", status=404, kind="not_found")


def container_not_found(container_id: str) -> RequestError:
    """What OpenAI answers for a container its organisation does not hold (or no longer: it expired)."""
    return RequestError(f"Container with id '{container_id}' not found.", status=404, kind="not_found")


def upload_not_found(upload_id: str) -> RequestError:
    """What OpenAI answers for an Upload id its organisation does not hold (worded as its other objects' 404s)."""
    return RequestError(f"No such Upload object: {upload_id}", field="upload_id", status=404, kind="not_found")
