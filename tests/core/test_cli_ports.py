"""A port outside 1-65535 is a usage error naming --port (exit 2), for every command that listens: uvicorn
used to bind `--port 70000` as 70000 % 65536 (4464) and serve there, on a port nobody asked for."""

from __future__ import annotations

import pytest
from click.testing import CliRunner

from prefixgate.cli import main


@pytest.mark.parametrize("command", ["serve", "backend", "mock-providers"])
@pytest.mark.parametrize("port", ["70000", "0", "-5"])
def test_a_port_out_of_range_is_refused(command: str, port: str) -> None:
    result = CliRunner().invoke(main, [command, "--port", port])
    assert result.exit_code == 2, result.output
    assert f"Invalid value for '--port': {port} is not in the range 1<=x<=65535" in result.output
