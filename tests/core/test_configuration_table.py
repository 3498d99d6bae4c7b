"""docs/configuration.md's settings table against `Settings`: every setting a row, with its variable and its default.
`vertex_base_url` (PREFIXGATE_VERTEX_BASE_URL, the way to point the gateway at a proxy or the mock providers for
Vertex AI) had none, so a reader of the table could not find it."""

from __future__ import annotations

import re
from pathlib import Path

from prefixgate.config import Settings

TABLE = (Path(__file__).resolve().parents[2] / "docs" / "configuration.md").read_text(encoding="utf-8")
ROW = re.compile(r"^\| `(\w+)` \| `(\w+)` \| (empty|`[^`]*`) \|", re.M)


def documented_default(cell: str, default: object) -> object:
    """The table's default cell read as the type of the setting's own default."""
    value = "" if cell == "empty" else cell.strip("`")
    if isinstance(default, bool):
        return {"true": True, "false": False}.get(value, value)
    if isinstance(default, int | float):
        return type(default)(value)
    return {"[]": []}.get(value, value)


def test_every_setting_has_a_row_with_its_variable_and_default() -> None:
    rows = {name: (variable, default) for name, variable, default in ROW.findall(TABLE)}
    assert set(rows) == set(Settings.model_fields), set(rows) ^ set(Settings.model_fields)
    for name, field in Settings.model_fields.items():
        variable, cell = rows[name]
        assert variable == f"PREFIXGATE_{name.upper()}", name
        assert documented_default(cell, field.default) == field.default, (name, cell, field.default)
