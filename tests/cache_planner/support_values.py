"""Prompts whose fixed instructions follow values that change per request (issue 38): the value kinds real
prompts carry, placed before the instructions on the same line or on their own, and value patterns drawn
at random (`random_kind`), so a test shows the method is not tuned to the kinds it was developed on."""

from __future__ import annotations

import json
import random
import string
from collections.abc import Callable, Iterator

FIRST = ("Jane", "Omar", "Li", "Priya", "Carlos", "Ngozi", "Sven", "Aiko", "Mateus", "Fatima")
LAST = ("Doe", "Haddad", "Wei", "Natarajan", "Ruiz", "Okafor", "Berg", "Tanaka", "Silva", "Kowalski")
_TOPICS = ("refund", "exchange", "warranty", "delivery", "invoice", "account", "subscription", "repair")
_RECORDS = ("order history", "payment ledger", "shipping manifest", "support notes", "contract", "audit trail")


def _name(rng: random.Random) -> str:
    return f"{rng.choice(FIRST)} {rng.choice(LAST)}"


KINDS: dict[str, Callable[[random.Random], str]] = {
    "ticket": lambda r: f"Ticket {r.randint(1000, 99999)}.",
    "name_account": lambda r: f"The customer is {_name(r)} (account {r.randint(10**5, 10**6)}).",
    "order": lambda r: f"Order number: ORD-{r.randint(10**6, 10**7)}",
    "email": lambda r: f"Reply to {r.choice(FIRST).lower()}.{r.choice(LAST).lower()}@example.{r.choice(['com', 'org'])}.",
    "date": lambda r: f"Today is {r.choice(['March', 'April', 'May', 'June'])} {r.randint(1, 28)}, 2026.",
    "amount": lambda r: f"The disputed amount is ${r.randint(1, 999)}.{r.randint(10, 99)}.",
    "json": lambda r: json.dumps({"customer": _name(r), "tier": r.choice(["gold", "silver", "bronze"]),
                                  "open_orders": r.randint(0, 9)}),
}


def random_kind(seed: int) -> Callable[[random.Random], str]:
    """A value pattern made up from `seed`: a random label and a random mix of letters, digits and marks
    (or a random phrase), nothing the detectors know by shape."""
    shape = random.Random(seed)
    label = "".join(shape.choice(string.ascii_lowercase) for _ in range(shape.randint(3, 9))).capitalize()
    pieces = [shape.choice([string.ascii_uppercase, string.ascii_lowercase, string.digits]) for _ in range(shape.randint(3, 8))]
    sep = shape.choice(["-", "_", "/", ".", ":"])
    as_phrase = shape.random() < 0.3
    words = ["".join(shape.choice(string.ascii_lowercase) for _ in range(shape.randint(2, 8))) for _ in range(12)]

    def value(r: random.Random) -> str:
        if as_phrase:
            return f"{label} says: " + " ".join(r.choice(words) for _ in range(r.randint(2, 5))) + "."
        code = sep.join("".join(r.choice(p) for _ in range(r.randint(1, 4))) for p in pieces)
        return f"{label} {code}."
    return value


def changing(value_of: Callable[[random.Random], str], rng: random.Random) -> Iterator[str]:
    """Values of a kind, each unlike the one before (a value that repeats has not been seen to change)."""
    last = None
    while True:
        value = value_of(rng)
        if value != last:
            last = value
            yield value


def instructions(seed: int, tokens_per_rule: int = 36, rules: int = 200, one_line: bool = False) -> str:
    """About `rules * tokens_per_rule` tokens of fixed instructions, different per `seed` (so each case is
    its own route), one rule per line or all on one line."""
    r = random.Random(seed)
    brand = "".join(r.choice(string.ascii_lowercase) for _ in range(8)).capitalize()
    lines = [f"You are the support assistant of {brand}. Follow every rule below, in order."]
    for i in range(1, rules + 1):
        topic, record = r.choice(_TOPICS), r.choice(_RECORDS)
        lines.append(f"Rule {i}: when a {brand} customer asks about a {topic}, read the {record} first, "
                     f"quote the matching section of the {topic} policy, and never promise more than it allows.")
    return (" " if one_line else "\n").join(lines)


def system_prompt(value: str, fixed: str, where: str) -> str:
    """`value` before `fixed`: on the same line as its first sentence, or on a line of its own."""
    return f"{value} {fixed}" if where == "same_line" else f"{value}\n{fixed}"
