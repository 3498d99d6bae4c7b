"""The attention building blocks against plain softmax attention over the same keys."""

from __future__ import annotations

import pytest
import torch

from prefixgate.local_backend.attention import _attend, _merge, attend_reference


def plain(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    group = q.shape[1] // k.shape[1]
    k, v = k.repeat_interleave(group, dim=1), v.repeat_interleave(group, dim=1)
    scores = (q @ k.transpose(-1, -2)) * 0.125 + mask
    return torch.softmax(scores, dim=-1) @ v


@pytest.mark.parametrize("causal", [False, True])
def test_fused_kernel_and_reference_agree_with_plain_attention_on_grouped_heads(causal: bool) -> None:
    torch.manual_seed(0)
    q, k, v = torch.randn(2, 6, 20, 64), torch.randn(2, 3, 20, 64), torch.randn(2, 3, 20, 64)
    bias = None if causal else torch.where(torch.rand(2, 1, 20, 20) < 0.3, float("-inf"), 0.0)
    bias = None if causal else bias.index_fill_(-1, torch.tensor([0]), 0.0)  # every row sees a key
    mask = torch.zeros(20, 20).masked_fill_(torch.ones(20, 20, dtype=torch.bool).triu(1), float("-inf")) \
        if causal else bias
    expected = plain(q, k, v, mask)
    for attend in (_attend, attend_reference):
        out, lse = attend(q, k, v, bias, causal, 0.125)
        torch.testing.assert_close(out, expected, atol=1e-5, rtol=1e-5)
        assert lse.shape == (2, 6, 20)


def test_two_partial_attentions_merge_into_attention_over_all_keys() -> None:
    torch.manual_seed(1)
    q, k, v = torch.randn(1, 4, 5, 32), torch.randn(1, 2, 30, 32), torch.randn(1, 2, 30, 32)
    first = _attend(q, k[:, :, :18], v[:, :, :18], None, False, 0.125)
    rest = _attend(q, k[:, :, 18:], v[:, :, 18:], None, False, 0.125)
    merged = _merge(first[0], first[1], rest[0], rest[1])
    torch.testing.assert_close(merged, plain(q, k, v, torch.zeros(5, 30)), atol=1e-5, rtol=1e-5)
