"""Random numbers keyed by (seed, absolute position, stream, index): the same values on every device.

SpecExec emits exactly the tokens of plain sequential sampling when the draw for absolute position t depends
only on (seed, t): both then sample every token from the target's distribution with the same number. A
counter-based generator gives that draw directly, with no generator state to carry or replay: the value for
(seed, t, stream, index) is a fixed function of those integers.

The function is Philox4x32-10 (Salmon, Moraes, Dror, Shaw: "Parallel random numbers: as easy as 1, 2, 3",
SC 2011; the generator cuRAND and PyTorch's CUDA backend use), computed with torch integer ops so that it runs
on the device where the draws are needed, in one batch per pass:

    counter = (index, position mod 2^32, position div 2^32, stream), key = (seed mod 2^32, seed div 2^32 mod 2^32)

Every word is held in an int64 tensor as a value in [0, 2^32). The only products are a 32-bit word times a
16-bit half of a Philox multiplier (< 2^48), so no int64 operation can overflow and every step is exact
integer arithmetic on any device. The result is one float64 uniform per counter, from the first two output
words: m = (w0 << 20) | (w1 >> 12), 52 random bits, and u = (2m + 1) * 2^-53. That conversion is exact: 2m + 1
is an odd integer below 2^53, which float64 represents exactly (int64 -> float64 rounds only above 2^53), and
multiplying by a power of two only changes the exponent. So u lies in (0, 1), never 0 or 1, and is the same
bit pattern on a CPU and a GPU.

The draws are made on the host (core.decoding.sampling.position_noise). A small batch there (one acceptance test,
a few positions of a tiny vocabulary) costs Philox's ~200 integer operations in dispatch alone, ~7 us each as
torch operations and ~1 us as numpy's: batches up to NUMPY_BATCH counters run on numpy arrays of uint64
(exact integer arithmetic too, so the same bits, with one multiply where torch's int64 needs the 16-bit
split), larger ones stay in torch, which spreads them over threads. The smallest, up to PYTHON_BATCH counters
(SpecInfer's acceptance tests and chains draw one to a few values per call, hundreds of calls an answer), run
through the same philox4x32 on Python's integers, ~10 us a counter with no per-operation dispatch.
"""

from __future__ import annotations

import numpy as np
import torch

MASK32 = 0xFFFFFFFF
# Philox4x32 round multipliers and Weyl key increments (Random123, philox.h).
PHILOX_M0 = 0xD2511F53
PHILOX_M1 = 0xCD9E8D57
PHILOX_W0 = 0x9E3779B9
PHILOX_W1 = 0xBB67AE85
PHILOX_ROUNDS = 10
NUMPY_BATCH = 4096  # host batches up to this many counters: numpy's lower per-operation cost wins
PYTHON_BATCH = 16  # ... and up to this many: Python's integers, whose cost is per counter, not per operation

# Streams: independent families of draws at the same (seed, position).
STREAM_TOKEN = 0  # the token sampled at a position (every method)
STREAM_SPECINFER_DRAFT = 1  # SpecInfer's draft chains (index = chain)
STREAM_SPECINFER_ACCEPT = 2  # SpecInfer's acceptance tests (index = round at the node)
STREAM_SPECINFER_RESIDUAL = 3  # SpecInfer's residual sample


def _mulhilo(a, multiplier: int):
    """(high, low) 32-bit words of a * multiplier for words a in [0, 2^32) (a Python int, an int64 torch
    tensor, or a uint64 numpy array) and a 32-bit constant.

    Python's ints and numpy's uint64 hold the whole product (below 2^64): one multiply. torch has no uint64
    arithmetic on every device, so there a * M = a * M_hi * 2^16 + a * M_lo with 16-bit halves; each partial
    product is below 2^48.
    """
    if isinstance(a, int):
        product = a * multiplier
        return product >> 32, product & MASK32
    if isinstance(a, np.ndarray):
        product = a * np.uint64(multiplier)
        return product >> np.uint64(32), product & np.uint64(MASK32)
    p_hi = a * (multiplier >> 16)
    s = a * (multiplier & 0xFFFF) + ((p_hi & 0xFFFF) << 16)  # < 2^49
    return (p_hi >> 16) + (s >> 32), s & MASK32


def philox4x32(counter: tuple, key: tuple[int, int], rounds: int = PHILOX_ROUNDS) -> tuple:
    """Philox4x32-R on words in [0, 2^32): Python ints, or int64 torch tensors or uint64 numpy arrays
    broadcast together; key: two 32-bit ints."""
    x0, x1, x2, x3 = counter
    k0, k1 = key
    for round_index in range(rounds):
        if round_index:
            k0, k1 = (k0 + PHILOX_W0) & MASK32, (k1 + PHILOX_W1) & MASK32
        hi0, lo0 = _mulhilo(x0, PHILOX_M0)
        hi1, lo1 = _mulhilo(x2, PHILOX_M1)
        x0, x1, x2, x3 = hi1 ^ x1 ^ k0, lo1, hi0 ^ x3 ^ k1, lo0
    return x0, x1, x2, x3


def keyed_uniforms(seed: int, positions: torch.Tensor, stream: int, index: torch.Tensor | int = 0) -> torch.Tensor:
    """float64 uniforms in (0, 1), one per element of `positions` and `index` broadcast together, on their
    device. positions, index: long tensors of absolute positions (>= 0) and indices in [0, 2^32)."""
    seed %= 1 << 64
    positions = positions.long()
    index = torch.full_like(positions, index) if isinstance(index, int) else index.long()
    positions, index = torch.broadcast_tensors(positions, index)
    key = (seed & MASK32, seed >> 32)
    if positions.device.type == "cpu" and positions.numel() <= PYTHON_BATCH:
        counters = zip(index.flatten().tolist(), positions.flatten().tolist())
        words = (philox4x32((number, where & MASK32, where >> 32, stream), key) for number, where in counters)
        values = [(2 * ((w0 << 20) | (w1 >> 12)) + 1) * 2.0**-53 for w0, w1, _, _ in words]  # exact, as below
        return torch.tensor(values, dtype=torch.float64).reshape(positions.shape)
    if positions.device.type == "cpu" and positions.numel() <= NUMPY_BATCH:
        where, number = positions.numpy().astype(np.uint64), index.numpy().astype(np.uint64)  # both >= 0
        w0, w1, _, _ = philox4x32((number, where & MASK32, where >> 32, np.full_like(where, stream)), key)
        mantissa = (w0 << np.uint64(20)) | (w1 >> np.uint64(12))  # 52 random bits
        return torch.from_numpy((2 * mantissa + 1).astype(np.float64) * 2.0**-53)  # exact, as below
    counter = (index, positions & MASK32, positions >> 32, torch.full_like(positions, stream))
    w0, w1, _, _ = philox4x32(counter, key)
    mantissa = (w0 << 20) | (w1 >> 12)  # 52 random bits
    return (2 * mantissa + 1).double() * 2.0**-53  # exact: an odd integer below 2^53, scaled by a power of two


def keyed_gumbels(
    seed: int, positions: torch.Tensor, stream: int, slots: int, draws: torch.Tensor | int = 0
) -> torch.Tensor:
    """Standard Gumbel noise -log(-log u), float64 [n, slots]: row i holds slots 0 .. slots-1 of draw
    `draws` (an int, or long [n]) at absolute position positions[i] (long [n]).

    Slot j of draw d is the keyed uniform with index d * slots + j, so every noise value is a fixed function
    of (seed, position, stream, draw, slot), whatever else is drawn in the same batch. The uniforms are the
    same bits on every device; the two logarithms may differ in the last bit between a CPU's and a GPU's
    math library, which moves a draw only where two perturbed scores tie to that bit.
    """
    positions = positions.long().reshape(-1, 1)
    draws = draws.long().reshape(-1, 1) if isinstance(draws, torch.Tensor) else draws
    return gumbels_at(seed, positions, stream, draws * slots + torch.arange(slots, device=positions.device))


def gumbels_at(seed: int, positions: torch.Tensor, stream: int, index: torch.Tensor) -> torch.Tensor:
    """Standard Gumbel noise -log(-log u) of the keyed uniforms at `positions` and `index` (long tensors,
    broadcast together), float64, on their device."""
    return -torch.log(-torch.log(keyed_uniforms(seed, positions, stream, index)))
