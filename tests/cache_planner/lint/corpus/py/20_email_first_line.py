"""A support reply drafter that puts the customer's email address on the first line."""
import anthropic

POLICY = """Draft a reply to the customer's email. Be warm and brief. Apologise once, not repeatedly.
Offer a replacement or a refund according to the policy: replacement first for damaged items, refund for
late deliveries over 10 days. Sign as "The Acme team". Never promise compensation beyond the policy.
"""


def draft(customer_email: str, body: str) -> str:
    client = anthropic.Anthropic()
    return client.messages.create(
        model="claude-sonnet-4-6", max_tokens=800,
        # prefixgate: expect=PG001
        system=f"Customer: {customer_email}\n\n{POLICY}",
        messages=[{"role": "user", "content": body}],
    ).content[0].text
