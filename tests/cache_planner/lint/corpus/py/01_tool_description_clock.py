"""Calendar agent: the tool description carries the clock (tools come first in Anthropic's prefix)."""
from datetime import datetime

import anthropic

client = anthropic.Anthropic()

TOOLS = [
    {
        "name": "search_calendar",
        # prefixgate: expect=PG001
        "description": f"Search the user's calendar. The current time is {datetime.now().isoformat()}. "
                       "Use ISO dates. Return at most 20 events, sorted by start time, with titles and attendees.",
        "input_schema": {"type": "object", "properties": {"query": {"type": "string"}}, "required": ["query"]},
    },
]


def answer(question: str) -> str:
    reply = client.messages.create(model="claude-sonnet-4-5", max_tokens=1024, tools=TOOLS,
                                   system="You are a scheduling assistant. Be concise and confirm before booking.",
                                   messages=[{"role": "user", "content": question}])
    return reply.content[0].text
