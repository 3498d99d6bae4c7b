"""`python -m prefixgate.cli`: the `prefixgate` command."""

from prefixgate.cli import main

main()
