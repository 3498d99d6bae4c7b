"""Dense layers whose CPU float32 weights are also kept prepacked for MKL's GEMM.

A decode step multiplies a few rows (one per running sequence) by every weight matrix. MKL's sgemm repacks
the weight matrix on every call, which at 16 rows costs about as much as the multiply itself: packing once at
load time halves the matmul time of a 16-sequence decode step of SmolLM2-135M on a 2-core Xeon (86 -> 41 ms).
For a prefill chunk of hundreds of rows the repacking is amortised, yet the packed copy still wins when it is
packed for 128 rows (MKL's batch-size hint, which only tunes the layout): the four matmuls of a SmolLM2-135M
layer take 1.4-1.6 ms at 42 rows (1.8-2.0 packed for 16 rows) and 17.1 ms at 512 (18.2 ms plain).
The price is a second copy of the weights in memory.
"""

from __future__ import annotations

import os

import torch
import torch.nn.functional as F
from torch import nn

# The batch size MKL packs for (a hint: any row count works), and the most rows measured to gain from it.
PACK_FOR_ROWS = 128
PACKED_MAX_ROWS = 512


def packing_available(device: torch.device, dtype: torch.dtype) -> bool:
    return (device.type == "cpu" and dtype == torch.float32 and torch.backends.mkl.is_available()
            and hasattr(torch.ops.mkl, "_mkl_linear"))


def worth_packing(weight_bytes: int) -> bool:
    """Whether a packed copy of `weight_bytes` of weights fits comfortably: under a quarter of the memory
    the kernel says is available (a 135M model: 0.5 GB; a 7B one in float32 would need 28 GB more)."""
    try:
        with open("/proc/meminfo") as f:
            available = next(int(line.split()[1]) * 1024 for line in f if line.startswith("MemAvailable:"))
    except (OSError, StopIteration, ValueError):
        try:
            available = os.sysconf("SC_AVPHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")
        except (ValueError, OSError, AttributeError):
            return weight_bytes < 2**30
    return weight_bytes < available / 4


def pack(weight: torch.Tensor) -> torch.Tensor:
    """MKL's packed form of an [out, in] float32 weight."""
    return torch.ops.mkl._mkl_reorder_linear_weight(weight, PACK_FOR_ROWS)


def linear(x: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor | None,
           packed: torch.Tensor | None) -> torch.Tensor:
    """x @ weight.T + bias for x of shape [rows, in], through the packed weight when it pays."""
    rows = x.shape[0]
    if packed is not None and rows <= PACKED_MAX_ROWS:
        # The last argument tells MKL which batch size the packing is used for: the actual one, so it always is.
        return torch.ops.mkl._mkl_linear(x.contiguous(), packed, weight, bias, rows)
    return F.linear(x, weight, bias)


class Linear(nn.Linear):
    """nn.Linear that can keep a packed copy of its weight (`pack_weight`, once the weight is final)."""

    packed: torch.Tensor | None = None

    def pack_weight(self) -> None:
        self.packed = pack(self.weight.detach())

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return linear(x, self.weight, self.bias, self.packed)
