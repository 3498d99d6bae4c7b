"""Support bot whose system prompt opens with the user id and the time, ahead of the fixed rules."""
from datetime import datetime

from openai import OpenAI

RULES = """You are the support assistant for Acme Outdoor Gear.
1. Refunds are accepted within 30 days of purchase when the item is unused and in its original packaging.
2. Shipping is free over $50; express shipping costs $15 and arrives in two business days.
3. Never promise a delivery date; point to the tracking page instead.
4. Escalate to a human when the customer mentions a safety issue, a chargeback or a lawyer.
"""


def build_system_prompt(user_id: str) -> str:
    now = datetime.now().strftime("%Y-%m-%d %H:%M")
    # prefixgate: expect=PG001
    return f"""User: {user_id}
Current time: {now}
{RULES}"""


def reply(user_id: str, question: str) -> str:
    client = OpenAI()
    out = client.chat.completions.create(model="gpt-4o", messages=[
        {"role": "system", "content": build_system_prompt(user_id)},
        {"role": "user", "content": question},
    ])
    return out.choices[0].message.content
