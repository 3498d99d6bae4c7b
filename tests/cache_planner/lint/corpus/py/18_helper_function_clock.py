"""The clock hidden behind a module helper, then formatted into the prompt's first line."""
from datetime import UTC, datetime

from openai import OpenAI


def current_timestamp() -> str:
    return datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


GUIDE = """You write incident updates for a status page. Use the template: what is affected, what we know,
what we are doing, when the next update comes. No speculation about causes; no blame. Plain English, at most
80 words, and never mention individual customers or employees by name.
"""


def update(notes: str) -> str:
    stamp = current_timestamp()
    # prefixgate: expect=PG001
    system = f"As of {stamp}:\n{GUIDE}"
    client = OpenAI()
    return client.chat.completions.create(model="gpt-4o-mini", messages=[
        {"role": "system", "content": system}, {"role": "user", "content": notes}]).choices[0].message.content
