"""The streaming schedule as pure data: which layer is copied into which ring slot, in host-issue order.

A pass computes layers 0..L-1 in order. Resident layers are always on the device. The other ("streamed")
layers go through a ring of k slots: the m-th streamed layer of a pass uses slot m % k. The host issues:

    Copy(first k streamed layers)                      (skipped if a prefetch already issued them)
    for each layer:  Compute(layer, slot)  then  Copy(the streamed layer k positions later, same slot)

On the device a Copy into slot s waits for the event recorded after the last Compute that used s, and a
Compute waits for the event recorded after the Copy of its own layer. Because the host issues a slot's
Copy only after issuing the Compute that frees it, every event is recorded before anything waits on it,
and no host sync is needed anywhere in a pass. `check_plan` states these invariants; the CUDA and CPU
executors (core.offload.streaming) follow the plan verbatim, and `pass_timeline` predicts a pass's time
from per-layer copy and compute times with the same rules.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass


@dataclass(frozen=True)
class Copy:
    """Host-to-device copy of `layer` into ring slot `slot` (issued on the copy stream)."""

    layer: int
    slot: int


@dataclass(frozen=True)
class Compute:
    """Run `layer`; `slot` is its ring slot, or None for a resident layer."""

    layer: int
    slot: int | None


Action = Copy | Compute


def streamed_layers(n_layers: int, resident: Iterable[int]) -> tuple[int, ...]:
    keep = set(resident)
    return tuple(i for i in range(n_layers) if i not in keep)


def ring_size(n_slots: int, n_streamed: int) -> int:
    """Slots actually used: never more than there are streamed layers."""
    return min(n_slots, n_streamed)


def plan_prefetch(n_layers: int, resident: Iterable[int], n_slots: int, depth: int | None = None) -> tuple[Copy, ...]:
    """Copies that start the next pass early (issued after a pass, while the draft model searches)."""
    streamed = streamed_layers(n_layers, resident)
    k = ring_size(n_slots, len(streamed))
    depth = k if depth is None else min(depth, k)
    return tuple(Copy(streamed[m], m % k) for m in range(depth))


def plan_pass(n_layers: int, resident: Iterable[int], n_slots: int, prefetched: int = 0) -> tuple[Action, ...]:
    """Host-issue order of one pass; `prefetched`: how many leading copies `plan_prefetch` already issued."""
    resident = frozenset(resident)
    streamed = streamed_layers(n_layers, resident)
    k = ring_size(n_slots, len(streamed))
    if streamed and k < 1:
        raise ValueError("streaming needs at least one ring slot")
    position = {layer: m for m, layer in enumerate(streamed)}
    actions: list[Action] = [Copy(streamed[m], m % k) for m in range(min(prefetched, k), k)]
    for layer in range(n_layers):
        if layer in resident:
            actions.append(Compute(layer, None))
            continue
        m = position[layer]
        actions.append(Compute(layer, m % k))
        if m + k < len(streamed):
            actions.append(Copy(streamed[m + k], (m + k) % k))
    return tuple(actions)


def check_plan(actions: Sequence[Action], n_layers: int, initially_loaded: dict[int, int] | None = None) -> None:
    """Raise ValueError unless the plan is safe and complete.

    - every layer is computed exactly once, in order 0..L-1;
    - a streamed Compute(layer, s) finds `layer` copied into s, and nothing copied over it since;
    - a Copy into s never overwrites a layer that was copied but not yet computed.
    `initially_loaded`: slot -> layer already copied by a prefetch.
    """
    holding: dict[int, int] = dict(initially_loaded or {})  # slot -> layer copied in, not yet computed
    computed: list[int] = []
    for action in actions:
        if isinstance(action, Copy):
            if action.slot in holding:
                raise ValueError(
                    f"copy of layer {action.layer} overwrites layer {holding[action.slot]} in slot {action.slot} before it ran"
                )
            holding[action.slot] = action.layer
        else:
            if action.slot is not None:
                if holding.get(action.slot) != action.layer:
                    raise ValueError(
                        f"layer {action.layer} computed from slot {action.slot}, which holds {holding.get(action.slot)}"
                    )
                del holding[action.slot]
            computed.append(action.layer)
    if computed != list(range(n_layers)):
        raise ValueError(f"layers computed in order {computed}, expected 0..{n_layers - 1}")


def pass_timeline(
    actions: Sequence[Action],
    copy_seconds: Sequence[float],
    compute_seconds: Sequence[float],
    ready: dict[int, float] | None = None,
) -> float:
    """Predicted wall time of one pass on two streams (copy, compute) following the plan's event rules.

    copy_seconds[i] / compute_seconds[i]: time to copy / run layer i alone. `ready`: slot -> time its
    prefetched copy completes (0 = already there). Returns when the last Compute ends.
    """
    copy_free = 0.0  # when the copy stream is idle
    compute_free = 0.0
    loaded: dict[int, float] = dict(ready or {})  # slot -> time its current copy completes
    released: dict[int, float] = {}  # slot -> time the last compute using it ended
    for action in actions:
        if isinstance(action, Copy):
            start = max(copy_free, released.get(action.slot, 0.0))
            copy_free = start + copy_seconds[action.layer]
            loaded[action.slot] = copy_free
        else:
            start = compute_free if action.slot is None else max(compute_free, loaded[action.slot])
            compute_free = start + compute_seconds[action.layer]
            if action.slot is not None:
                released[action.slot] = compute_free
    return compute_free
