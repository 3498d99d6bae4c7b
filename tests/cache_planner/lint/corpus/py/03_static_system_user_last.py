"""The right shape: fixed system prompt, the date and the question in the latest user turn."""
import datetime

import anthropic

SYSTEM_PROMPT = """You are a careful research assistant for a law firm.
Cite the statute or case for every legal claim, quote the relevant passage, and say when the law differs
between jurisdictions. If the question is outside US federal law, say so and stop. Never give advice on a
specific case; explain the general rule and recommend speaking to an attorney.
"""


def ask(question: str) -> str:
    client = anthropic.Anthropic()
    today = datetime.date.today().isoformat()
    msg = client.messages.create(
        model="claude-sonnet-4-6", max_tokens=2048, system=SYSTEM_PROMPT,
        messages=[{"role": "user", "content": f"Today is {today}.\n\n{question}"}],
    )
    return msg.content[0].text
