"""The user's query is formatted into a template's first line, ahead of the rules."""
# prefixgate: expect=PG001
PROMPT_TEMPLATE = """Question: {query}
Rewrite the question into up to three search queries for the product catalogue. Keep brand names exactly,
expand abbreviations, and drop filler words. Return one query per line, most specific first, and nothing
else: no numbering, no quotes, no explanations.
"""


def build(query: str) -> str:
    return PROMPT_TEMPLATE.format(query=query)
