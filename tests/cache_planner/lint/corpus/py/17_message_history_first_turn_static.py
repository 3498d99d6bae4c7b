"""Few-shot examples as early turns (fixed), the user's input in the last turn: no warning."""
import anthropic

EXAMPLES = [
    {"role": "user", "content": "Translate to French: The meeting is moved to Tuesday."},
    {"role": "assistant", "content": "La réunion est déplacée à mardi."},
]


def translate(text: str) -> str:
    client = anthropic.Anthropic()
    msgs = EXAMPLES + [{"role": "user", "content": f"Translate to French: {text}"}]
    return client.messages.create(model="claude-haiku-4-5", max_tokens=512,
                                  system="You translate English to French. Keep names and numbers unchanged.",
                                  messages=msgs).content[0].text
