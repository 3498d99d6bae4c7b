"""Environment details fixed for an agent's session (platform, working directory, shell): no warning."""
import os
import platform

ENV_TEMPLATE = """Environment:
- platform: {platform}
- working directory: {cwd}
- shell: {shell}
You are a coding agent. Read files before editing them, make the smallest change that works, and run the
project's tests after each change. Never commit or push unless the user asks.
"""


def system_prompt() -> str:
    # prefixgate: quiet=PG001 (fixed for the session)
    return ENV_TEMPLATE.format(platform=platform.system(), cwd=os.getcwd(), shell=os.environ.get("SHELL", "sh"))
