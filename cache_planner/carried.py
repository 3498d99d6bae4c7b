"""Planning work carried over from the request this one resends (`ir.Carry`).

An agent's request repeats the last one's blocks (`dialects.resent` finds which request it resends, and
shares its parsed segments). So a step that computes something per block (token counts, where a checkpoint
may go) or checks something per segment (documents already ahead of the question) takes the last
request's answers for the leading blocks or segments both share, and computes only the rest: the step's
cost follows what changed, not the prompt's length. A conversation without a carry (a body given as a
dict, the first request of a session) computes everything, as the step would alone.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from prefixgate.ir import Conversation, equal_run


def per_block(conv: Conversation, name: str, keys: list[Any], extend: Callable[[list[Any], int], None]) -> list[Any]:
    """A list with one value per block, each following from its block and those before it alone: the
    earlier request's values (under `name`) for the leading blocks whose `keys` (what the value depends
    on: `Conversation.block_keys`, with the role where it matters) equal its, then `extend(values, start)`
    appends the rest."""
    carry = conv.carry
    earlier = carry.earlier.get(name) if carry is not None else None
    values: list[Any] = []
    if earlier is not None:
        values = earlier[1][:equal_run(earlier[0], keys)]
    extend(values, len(values))
    if carry is not None:
        carry.mine[name] = (keys, values)
    return values


def settled_segments(conv: Conversation, step: str) -> int:
    """How many leading segments have the same blocks, in the same order, as when `step` last ran on the
    request this one resends (`remember_segments`): the step found those as it wants them."""
    carry = conv.carry
    earlier = carry.earlier.get(step) if carry is not None else None
    if earlier is None:
        return 0
    # List comparison tries identity first, element by element: cheap for shared blocks.
    return equal_run(earlier, [seg.blocks for seg in conv.segments])


def remember_segments(conv: Conversation, step: str) -> None:
    """After `step` left every segment as it wants it: what `settled_segments` compares the next request
    with. The lists are the segments' own; a later change to one only makes the next request check
    that segment again."""
    if conv.carry is not None:
        conv.carry.mine[step] = [seg.blocks for seg in conv.segments]
