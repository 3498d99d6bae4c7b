"""A request id minted per call and formatted into the top of the system prompt."""
import uuid

import anthropic

# prefixgate: expect=PG001
TEMPLATE = """Request {request_id}.
You are a triage assistant for an IT help desk. Classify each ticket as hardware, software, access or other,
give a priority from P1 to P4 with one sentence of reasoning, and list the information still missing.
Never ask the user for passwords. Reply in JSON with the keys category, priority, reason and missing.
"""


def triage(ticket: str) -> str:
    client = anthropic.Anthropic()
    system = TEMPLATE.format(request_id=uuid.uuid4())
    msg = client.messages.create(model="claude-haiku-4-5", max_tokens=512, system=system,
                                 messages=[{"role": "user", "content": ticket}])
    return msg.content[0].text
