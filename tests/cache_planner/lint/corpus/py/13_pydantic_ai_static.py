"""pydantic-ai style agent with a constant system prompt and a dynamic user prompt: no warning."""
from pydantic_ai import Agent

SYSTEM_PROMPT = (
    "You extract invoice fields. Return JSON with vendor, invoice_number, issue_date, due_date, currency and "
    "total. Dates are ISO 8601. If a field is missing, use null; never guess a total from line items."
)

agent = Agent("openai:gpt-4o", system_prompt=SYSTEM_PROMPT)


def extract(invoice_text: str, received_at: str) -> str:
    return agent.run_sync(f"Received {received_at}.\n\n{invoice_text}").output
