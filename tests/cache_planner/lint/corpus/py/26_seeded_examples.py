"""Few-shot examples sampled once with a seeded generator: the same text on every request, no warning."""
import random

EXAMPLES = [
    "Q: What is the capital of France? A: Paris",
    "Q: How many legs does a spider have? A: Eight",
    "Q: What gas do plants absorb? A: Carbon dioxide",
    "Q: Who wrote Hamlet? A: Shakespeare",
]
_rng = random.Random(42)
SHOTS = "\n".join(_rng.sample(EXAMPLES, 3))

SYSTEM_PROMPT = f"""{SHOTS}
Answer trivia questions in the same format: one short answer, no explanation, no punctuation at the end.
If you are not sure, answer "Unknown" rather than guessing. Never answer questions about living people.
"""
