"""Long temporaries freed a slice at a time (prefixgate/slices.py), and the C pipeline over a big body's
segments run a chunk at a time (`ir.touched`), so that a worker thread lets the GIL go in between."""

from __future__ import annotations

import weakref

from prefixgate import ir, slices
from prefixgate.ir import Block, Segment


class Item:
    pass


def test_a_long_list_only_the_caller_holds_is_emptied_a_slice_at_a_time(monkeypatch) -> None:
    items = [Item() for _ in range(slices.LONG)]
    alive = [weakref.ref(x) for x in items]
    left_at_each_turn: list[int] = []

    class Clock:
        thread_time = staticmethod(lambda: 0.0)     # every slice takes no time: the next is twice as long

        @staticmethod
        def sleep(seconds: float) -> None:
            left_at_each_turn.append(sum(r() is not None for r in alive))

    monkeypatch.setattr(slices, "time", Clock)
    slices.let_go(items)
    assert items == [] and all(r() is None for r in alive)
    # 16,384 items: slices of 512, 1,024, 2,048, 4,096, 8,192, then the last 512, with a turn after each.
    assert left_at_each_turn == [15872, 14848, 12800, 8704, 512, 0]


def test_a_list_held_elsewhere_or_short_is_left_as_it_is() -> None:
    kept = [Item() for _ in range(slices.LONG)]
    holder = {"plan": kept}
    slices.let_go(kept)
    assert len(kept) == slices.LONG and holder["plan"] is kept
    short = [Item() for _ in range(slices.LONG - 1)]
    slices.let_go(short)
    assert len(short) == slices.LONG - 1


def _segments(n: int) -> list[Segment]:
    out = []
    for i in range(n):
        seg = Segment("user", [Block("text", {"type": "text", "text": f"turn {i}"}, f"turn {i}")])
        seg.mark_parsed()
        out.append(seg)
    return out


def test_touched_over_a_big_body_is_found_a_chunk_at_a_time_with_the_same_answer(monkeypatch) -> None:
    n = 3 * ir._IN_ONE_GO + 5
    segments = _segments(n)
    changed = [0, ir._IN_ONE_GO - 1, ir._IN_ONE_GO, 2 * ir._IN_ONE_GO + 7, n - 1]     # chunk edges among them
    for i in changed:       # a segment never marked as parsed counts as touched
        segments[i] = Segment("user", [Block("text", {"type": "text", "text": "edited"}, "edited")])
    calls: list[int] = []
    real = ir.touched

    def counted(segs: list[Segment]) -> list[int]:
        calls.append(len(segs))
        return real(segs)

    monkeypatch.setattr(ir, "touched", counted)
    assert ir.touched(segments) == changed
    assert calls[0] == n and calls[1:] == [ir._IN_ONE_GO] * 3 + [5]     # the call, then one per chunk
