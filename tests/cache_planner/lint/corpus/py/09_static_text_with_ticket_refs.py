"""Fixed instructions that mention issue numbers and a date: static text, no warning."""
import anthropic

SYSTEM_PROMPT = """You maintain the payments service. Known problems you must keep in mind:
- Refund webhooks can arrive twice (see issue #123); make handlers idempotent.
- PAY-4512: currency rounding differs between the ledger and the invoice PDF for JPY.
- Since 2024-06-01 all card data goes through the vault; never log a PAN.
Answer with the file to change, the change as a diff, and the test that proves it.
"""


def ask(q: str) -> str:
    client = anthropic.Anthropic()
    return client.messages.create(model="claude-sonnet-4-6", max_tokens=1024, system=SYSTEM_PROMPT,
                                  messages=[{"role": "user", "content": q}]).content[0].text
