"""An operator's YAML file (settings, routing policy) read strictly: every fault is one line naming the file
and where in it, never a traceback, and nothing a loose reading would silently drop or misread."""

from __future__ import annotations

import math
import os
from pathlib import Path
from typing import Any

import yaml


class YamlFileError(ValueError):
    """A file that cannot be read as a mapping; the message names the file and the line or key at fault."""


class _StrictLoader(yaml.SafeLoader):
    """PyYAML keeps the last of two equal keys: `budget:` written twice would drop the first without a word."""

    def construct_mapping(self, node: yaml.MappingNode, deep: bool = False) -> dict:
        seen: dict[Any, int] = {}
        for key_node, _ in node.value:
            if key_node.tag == "tag:yaml.org,2002:merge":   # `<<: *base` then overriding keys is allowed
                continue
            key = self.construct_object(key_node, deep=True)
            if not isinstance(key, (str, int, float, bool)):
                continue
            line = key_node.start_mark.line + 1
            if key in seen:
                raise yaml.constructor.ConstructorError(
                    None, None, f"key {key!r} appears twice (lines {seen[key]} and {line})", key_node.start_mark)
            seen[key] = line
        return super().construct_mapping(node, deep)


def _finite(value: Any, path: str) -> None:
    # `.nan` and `.inf` are valid YAML floats; every number a setting or policy takes is finite (a NaN budget
    # compares false with everything, so it neither refuses nor admits: each request fails instead).
    if isinstance(value, float) and not math.isfinite(value):
        raise YamlFileError(f"{path}: expected a finite number, got {value}")
    if isinstance(value, dict):
        for k, v in value.items():
            _finite(v, f"{path}.{k}" if path else str(k))
    elif isinstance(value, list):
        for i, v in enumerate(value):
            _finite(v, f"{path}.{i}")


def read_mapping(path: str | os.PathLike[str], what: str) -> dict:
    """The mapping in YAML file `path` ({} when empty); `what` names the file in errors ("policy file")."""
    try:
        raw = Path(path).read_bytes()
    except OSError as e:
        raise YamlFileError(f"cannot read {what} {path}: {e.strerror}") from None
    try:
        # Bytes, so PyYAML reads a UTF-16 file by its byte-order mark and names a byte that is not UTF-8.
        data = yaml.load(raw, Loader=_StrictLoader) or {}  # noqa: S506 - a SafeLoader subclass  # nosec B506
    except yaml.reader.ReaderError as e:
        byte = e.character if isinstance(e.character, int) else ord(e.character)
        raise YamlFileError(f"{what} {path} is not UTF-8 text: byte 0x{byte:02x} at offset {e.position}") from None
    except yaml.YAMLError as e:
        mark = getattr(e, "problem_mark", None)
        where = f"line {mark.line + 1}, column {mark.column + 1}: " if mark is not None else ""
        problem = getattr(e, "problem", None) or str(e)
        raise YamlFileError(f"{what} {path} is not valid YAML: {where}{problem}") from None
    if not isinstance(data, dict):
        raise YamlFileError(f"{what} {path} must hold a mapping of keys, not a {type(data).__name__}")
    try:
        _finite(data, "")
    except YamlFileError as e:
        raise YamlFileError(f"{what} {path}: {e}") from None
    return data
