"""Calendar agent: the tool description carries the clock (tools come first in Anthropic's prefix),
read on every request. (A clock read at import is fixed for the process's life: a session value.)"""
from datetime import datetime

import anthropic

client = anthropic.Anthropic()


def answer(question: str) -> str:
    tools = [{"name": "search_calendar",
              # prefixgate: expect=PG001
              "description": f"Search the user's calendar. The current time is {datetime.now().isoformat()}. "
                             "Use ISO dates. Return at most 20 events, sorted by start time, with titles and attendees.",
              "input_schema": {"type": "object", "properties": {"query": {"type": "string"}}, "required": ["query"]}}]
    reply = client.messages.create(model="claude-sonnet-5-5", max_tokens=1024, tools=tools,
                                   system="You are a scheduling assistant. Be concise and confirm before booking.",
                                   messages=[{"role": "user", "content": question}])
    return reply.content[0].text
