"""Planning work carried over from the request this one resends (`ir.Carry`).

An agent's request repeats the last one's blocks (`dialects.resent` finds which request it resends, and
shares its parsed segments). So a step that computes something per block (token counts, where a checkpoint
may go) or checks something per segment (documents already ahead of the question) takes the last
request's answers for the leading blocks or segments both share, and computes only the rest: the step's
cost follows what changed, not the prompt's length. A conversation without a carry (a body given as a
dict, the first request of a session) computes everything, as the step would alone.

Answers are typed records (`ir.PerBlock`) under a declared step (`ir.Step`), valid only for equal inputs (the
step's inputs record, `ir.STEP_INPUTS`): a step given another kind of inputs raises rather than reading
answers computed for something else.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from prefixgate.ir import Conversation, PerBlock, Step, equal_run
from prefixgate.reuse import weigh


def per_block(conv: Conversation, step: Step, inputs: Any, keys: list[Any],
              extend: Callable[[list[Any], int], None]) -> list[Any]:
    """A list with one value per block, each following from `inputs`, its block and those before it alone:
    the earlier request's values for `step` (with equal `inputs`) for the leading blocks whose `keys` (what
    the value depends on: `Conversation.block_keys`, with the role where it matters) equal its, then
    `extend(values, start)` appends the rest."""
    carry = conv.carry
    earlier = carry.earlier.steps.get(step) if carry is not None else None
    values: list[Any] = []
    if earlier is not None and earlier.inputs == inputs:
        values = earlier.values[:equal_run(earlier.keys, keys)]
    shared = len(values)
    extend(values, shared)
    if carry is not None:
        # Each new answer holds its key and value and two list slots: one weighed stands for all.
        new = len(values) - shared
        carry.step(step, PerBlock(inputs, keys, values), new * (16 + weigh((keys[shared], values[shared]))) if new else 0)
    return values


def settled_segments(conv: Conversation, step: str) -> int:
    """How many leading segments have the same blocks, in the same order, as when `step` last ran on the
    request this one resends (`remember_segments`): the step found those as it wants them."""
    carry = conv.carry
    earlier = carry.earlier.settled.get(step) if carry is not None else None
    if earlier is None:
        return 0
    # List comparison tries identity first, element by element: cheap for shared blocks.
    return equal_run(earlier, [seg.blocks for seg in conv.segments])


def remember_segments(conv: Conversation, step: str) -> None:
    """After `step` left every segment as it wants it: what `settled_segments` compares the next request
    with. The lists are the segments' own; a later change to one only makes the next request check
    that segment again."""
    if conv.carry is not None:
        lists = [seg.blocks for seg in conv.segments]
        conv.carry.mine.settled[step] = lists
        if conv.carry.charge is not None:
            conv.carry.charge(8 * len(lists) + 56)   # the lists are the segments' own: only the outer one is new
