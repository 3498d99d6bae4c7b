"""What Gemini's generateContent and countTokens accept in a part's `fileData`.

The body is parsed as proto3 JSON, so a value of the wrong JSON type is the parse error, a 400 INVALID_ARGUMENT
`Invalid value at 'contents[0].parts[0].file_data.file_uri' (TYPE_STRING), 5` (a message field given a non-object:
the message's type URL instead of TYPE_STRING), as for generationConfig (gemini_generation_params.py). `fileUri`
and `mimeType` are strings (https://ai.google.dev/api/caching#FileData).
"""

from __future__ import annotations

from typing import Any

from prefixgate.errors import RequestError
from prefixgate.simulation.mock.gemini_generation_params import json_shown, proto_field

_FILE_DATA_TYPE = "type.googleapis.com/google.ai.generativelanguage.v1beta.FileData"


def check_file_data(contents: Any, path: str) -> None:
    """Raise the parse error for a `fileData` of the wrong shape in `contents` (at proto path `path`), if any."""
    for i, content in enumerate(contents if isinstance(contents, list) else []):
        parts = content.get("parts") if isinstance(content, dict) else None
        for j, part in enumerate(parts if isinstance(parts, list) else []):
            file_data = proto_field(part, "fileData") if isinstance(part, dict) else None
            if file_data is None:
                continue
            at = f"{path}[{i}].parts[{j}].file_data"
            if not isinstance(file_data, dict):
                raise RequestError(f"Invalid value at '{at}' ({_FILE_DATA_TYPE}), {json_shown(file_data)}", field=at)
            for name, snake in (("fileUri", "file_uri"), ("mimeType", "mime_type")):
                value = proto_field(file_data, name)
                if value is not None and not isinstance(value, str):
                    raise RequestError(f"Invalid value at '{at}.{snake}' (TYPE_STRING), {json_shown(value)}",
                                       field=f"{at}.{snake}")
