"""A raw request dict for the Messages API, with a header value from the incoming HTTP request first."""
import httpx
from flask import request

RULES = """You are a customer-facing assistant for a bank. Never reveal account numbers in full; show the
last four digits only. Do not discuss loan approvals or interest rates; hand those to an advisor. Verify
identity with the security question before any account-specific answer.
"""


def handle() -> dict:
    body = {
        "model": "claude-sonnet-4-6",
        "max_tokens": 1024,
        # prefixgate: expect=PG001
        "system": f"Client locale: {request.headers.get('Accept-Language')}\n{RULES}",
        "messages": [{"role": "user", "content": request.json["message"]}],
    }
    return httpx.post("https://api.anthropic.com/v1/messages", json=body).json()
