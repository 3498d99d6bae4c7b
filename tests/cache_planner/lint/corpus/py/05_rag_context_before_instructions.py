"""RAG: retrieved chunks are pasted ahead of the fixed answering instructions."""
from openai import OpenAI

client = OpenAI()

INSTRUCTIONS = """Answer using only the passages above. Quote the passage you rely on in double quotes and
give its source id in brackets. If the passages do not contain the answer, reply "I don't know" and suggest
a better search query. Never use prior knowledge, and never answer questions about pricing or contracts.
"""


def answer(question: str, retrieved_chunks: list[str]) -> str:
    # prefixgate: expect=PG001
    passages = "\n\n".join(retrieved_chunks)
    system = f"Passages:\n{passages}\n\n{INSTRUCTIONS}"
    out = client.chat.completions.create(
        model="gpt-4o-mini",
        messages=[{"role": "system", "content": system}, {"role": "user", "content": question}],
    )
    return out.choices[0].message.content
