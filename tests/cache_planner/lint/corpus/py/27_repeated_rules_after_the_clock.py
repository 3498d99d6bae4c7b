"""Support bot whose rules are built with a repeated literal: the clock comes first, and `"..." * 40` is static
text after it (read as an unknown value, it hid the rules behind the clock and the finding with them)."""
import datetime

import anthropic

client = anthropic.Anthropic()
RULES = "You are the parcel desk's support agent.\n" + "=" * 40 + "\n" + "Refunds follow the policy below. " * 40


def answer(question: str) -> str:
    reply = client.messages.create(model="claude-sonnet-5-5", max_tokens=512,
                                   # prefixgate: expect=PG001
                                   system=f"Current time: {datetime.datetime.now()}.\n" + RULES,
                                   messages=[{"role": "user", "content": question}])
    return reply.content[0].text
