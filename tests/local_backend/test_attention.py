"""The forward pass's building blocks against their plain formulas: attention (fused, reference, folded
heads, log-sum-exp merge) against softmax attention over the same keys, RMSNorm against transformers' steps."""

from __future__ import annotations

import pytest
import torch

from prefixgate.local_backend.attention import _attend, _attend_all, _merge, attend_reference
from prefixgate.local_backend.model import RMSNorm


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


def test_folded_heads_attend_every_key_like_plain_grouped_attention() -> None:
    torch.manual_seed(2)
    q, k, v = torch.randn(7, 9, 64), torch.randn(1, 3, 40, 64), torch.randn(1, 3, 40, 64)
    out, lse = _attend_all(q, k, v, 0.125)
    expected = plain(q.transpose(0, 1)[None], k, v, torch.zeros(7, 40))[0].transpose(0, 1)
    torch.testing.assert_close(out, expected, atol=1e-5, rtol=1e-5)
    assert lse.shape == (7, 9)


@pytest.mark.parametrize("shape", [(1, 576), (42, 576), (5, 12, 64)])
def test_rms_norm_fused_path_is_bit_identical_to_transformers_steps(shape: tuple[int, ...]) -> None:
    torch.manual_seed(3)
    norm = RMSNorm(shape[-1], 1e-5)
    norm.weight.copy_(torch.randn(shape[-1]))
    x = torch.randn(shape) * 30
    expected = norm.weight * (x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + 1e-5))
    assert torch.equal(norm(x), expected)
