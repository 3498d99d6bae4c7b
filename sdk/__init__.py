"""prefixgate.wrap(client): client-side planning for openai, anthropic and google-genai clients.

`ledger` is the default in-process ledger every wrapped client records to unless given its own.
"""

from prefixgate.ledger import LedgerRecord
from prefixgate.sdk.gateway_client import client
from prefixgate.sdk.usage_ledger import DEFAULT_LEDGER, Ledger
from prefixgate.sdk.wrap import wrap

ledger: Ledger = DEFAULT_LEDGER

__all__ = ["Ledger", "LedgerRecord", "client", "ledger", "wrap"]
