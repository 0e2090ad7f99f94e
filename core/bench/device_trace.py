"""What a GPU's host would wait for, launch and copy, counted on any device (the GPU proxies).

A run on the CPU cannot tell by itself what would stall a GPU: every tensor is in host memory and every
read is free. `DeviceTrace` therefore tags every tensor as device- or host-resident, the way it would be on a
GPU, and counts, per site in the code:

- host syncs: reading a device tensor's value (`.item()`, `int/float/bool/index` of a tensor, `tolist`,
  `.cpu()`, `.numpy()`), data-dependent shapes (`nonzero`, one-argument `where`, boolean-mask indexing,
  `masked_select`, `unique`, `bincount`, tensor `repeat_interleave`), `torch.equal`, blocking host-to-device
  copies (a `.to(device)`/`copy_` without `non_blocking=True`, `torch.tensor(..., device=...)`, a host tensor
  used as an operand of a device op), and whole-device waits (`core.decoding.timing.synchronize`);
- kernels: dispatched ATen ops that touch a device tensor, less views, allocations and scalar reads (each
  would be at least one device kernel launched from Python);
- bytes copied host-to-device;
- attention shapes: every distinct (query, key, mask) shape sent to `scaled_dot_product_attention`, with its
  calls (on a GPU each new shape may cost a plan or a compile: cuDNN attention builds one per shape, and a CUDA
  graph holds one shape).

Tagging is by storage (views and parameters share their tensor's residency): the tensors named by
`mark_device` (a model's weights, a KV cache, an offloaded model's ring slots and resident block) are on the
device; so is the output of any op with a device operand, of a factory called with an explicit `device=`,
and of `.to(device)` of a host tensor (counted as a copy; on a CPU run the trace makes it a new storage).
Everything else is on the host. So `.to(device)` always means "to the compute device" and the code is expected never to move a
device tensor back with `.to(...)` (it reads values instead, which counts). A non_blocking copy counts as
asynchronous: the loop's host data goes through core.decoding.device_io.to_device, which pins it on CUDA.
`HostEmbedding` (an offloaded target's embedding table in host RAM) is accounted as what it does: one read
of the ids, one copy of the looked-up rows.

While a trace is active the loops also take their GPU path (core.decoding.device_io.gpu_semantics): no early exits
on host reads. `watch_draft(model)` attributes counts to the draft model's forwards and `watch_search()` to
the draft search; `snapshot()` returns the totals so far, so a caller can difference them per pass.
"""

from __future__ import annotations

import copy
import sys
import weakref
from collections import Counter
from contextlib import ExitStack
from dataclasses import dataclass, field, fields
from pathlib import Path

import torch
from torch.overrides import TorchFunctionMode
from torch.utils._python_dispatch import TorchDispatchMode

from core.decoding.device_io import gpu_semantics

_VALUE_READS = {"item", "__int__", "__float__", "__bool__", "__index__", "tolist", "cpu", "numpy", "__array__"}
_DATA_DEPENDENT = {"nonzero", "argwhere", "masked_select", "unique", "unique_consecutive", "bincount", "equal"}
_FACTORIES_FROM_DATA = {"tensor", "as_tensor"}
# ATen ops that launch no kernel of their own (views are recognised by their schema)
_NO_KERNEL = {
    "empty",
    "empty_like",
    "empty_strided",
    "new_empty",
    "new_empty_strided",
    "_local_scalar_dense",
    "lift_fresh",
    "detach",
    "alias",
    "_unsafe_view",
    "is_pinned",
    "_pin_memory",
    "set_",
    "resize_",
    "_record_function_enter_new",
    "_record_function_exit",
    "record_stream",
}
_TORCH_DIR = str(Path(torch.__file__).parent)
_THIS_FILE = __file__


@dataclass
class TraceCounts:
    """Totals of one trace (or the difference of two snapshots). syncs: sites -> count; draft_*: the part
    inside the watched draft forwards; search_*: inside the watched draft search (its forwards included)."""

    syncs: Counter = field(default_factory=Counter)
    kernels: int = 0
    h2d_bytes: int = 0
    draft_forwards: int = 0
    draft_syncs: int = 0
    draft_kernels: int = 0
    search_syncs: int = 0
    search_kernels: int = 0
    search_draft_kernels: int = 0  # draft kernels inside the search (a shadow search's run after it)
    step_forwards: int = 0  # one-token steps of a target that streams no layer (captured_forward.run_step_forward)
    step_graph_kernels: int = 0  # kernels inside them that a CUDA graph replays as one launch on CUDA
    attention_shapes: Counter = field(default_factory=Counter)  # "q [..] k [..] mask [..] dtype" -> calls

    @property
    def sync_count(self) -> int:
        return sum(self.syncs.values())

    def __add__(self, other: "TraceCounts") -> "TraceCounts":
        return TraceCounts(**{f.name: getattr(self, f.name) + getattr(other, f.name) for f in fields(self)})

    def __sub__(self, other: "TraceCounts") -> "TraceCounts":
        return TraceCounts(**{f.name: getattr(self, f.name) - getattr(other, f.name) for f in fields(self)})


def _site() -> str:
    """The innermost caller outside torch and this file: 'path:line function'."""
    frame = sys._getframe(2)
    while frame is not None and (
        frame.f_code.co_filename.startswith(_TORCH_DIR) or frame.f_code.co_filename == _THIS_FILE
    ):
        frame = frame.f_back
    if frame is None:
        return "?"
    path = Path(frame.f_code.co_filename)
    parts = path.parts
    short = "/".join(parts[parts.index("core") :]) if "core" in parts else "/".join(parts[-2:])
    return f"{short}:{frame.f_lineno} {frame.f_code.co_name}"


def _tensors(*values) -> list[torch.Tensor]:
    """The tensors in `values`, through tuples, lists and dicts (the containers an op's arguments and results,
    a cache layer's or a block's attributes hold). Written out rather than torch's pytree flatten, which the
    trace ran twice per op and which was half the run time of a traced answer."""
    found: list[torch.Tensor] = []
    pending = list(values)
    while pending:
        value = pending.pop()
        if isinstance(value, torch.Tensor):
            found.append(value)
        elif isinstance(value, (tuple, list)):
            pending.extend(value)
        elif isinstance(value, dict):
            pending.extend(value.values())
    return found


def _is_bool_index(index) -> bool:
    return any(t.dtype == torch.bool for t in _tensors(index))


def _device_argument(args, kwargs) -> bool:
    """Whether a .to()/.cuda() call names a destination device (not only a dtype)."""
    if "device" in kwargs and kwargs["device"] is not None:
        return True
    return any(isinstance(a, (torch.device, str, torch.Tensor)) for a in args[1:])


class DeviceTrace:
    """Counts host syncs, kernels and host-to-device bytes as a GPU would see them (see the module docstring).

    Use as a context manager after `mark_device(...)`; `snapshot()` inside or after it.
    """

    def __init__(self) -> None:
        # storage address -> weak references to device tensors on that storage (any alive: the storage is)
        self._on_device: dict[int, list[weakref.ref]] = {}
        self._marks = 0
        self.counts = TraceCounts()
        self._in_draft = 0
        self._in_search = 0
        self._in_step_graph = 0
        self._quiet = 0  # inside an op this trace accounts for as a whole (HostEmbedding)
        self._factory_on_device = 0
        self._stack: ExitStack | None = None
        self._undo: list = []

    # -- what lives where ----------------------------------------------------------------------------------

    # Keyed by the storage's address, with weak references to tensors rather than to the storage: a storage
    # is alive while a tensor on it is, so an address whose tensors are all gone may have been reused. (Weak
    # references to storages kept whole storages alive under a function mode plus a dispatch mode, torch 2.13.)

    def is_on_device(self, tensor: torch.Tensor) -> bool:
        refs = self._on_device.get(tensor.untyped_storage().data_ptr())
        return refs is not None and any(ref() is not None for ref in refs)

    def mark_device(self, *tensors: torch.Tensor) -> None:
        for tensor in _tensors(tensors):
            key = tensor.untyped_storage().data_ptr()
            known = self._on_device.get(key, ())
            if any(ref() is tensor for ref in known):
                continue  # an in-place op's result: marked already (its list would grow by one each time)
            refs = [ref for ref in known if ref() is not None]
            refs.append(weakref.ref(tensor))
            self._on_device[key] = refs
            self._marks += 1
            if self._marks % 100_000 == 0:  # forget addresses whose tensors are all gone
                self._on_device = {k: v for k, v in self._on_device.items() if any(r() is not None for r in v)}

    def mark_model(self, model) -> None:
        """A CausalLM's weights (an offloaded model's too: ring slots and resident block) on the device,
        except an embedding table kept in host RAM (HostEmbedding), whose forward is accounted as a whole."""
        from core.offload.host_embedding import HostEmbedding

        host_tables = {id(m.weight) for m in model.model.modules() if isinstance(m, HostEmbedding)}
        self.mark_device(
            *(t for t in list(model.model.parameters()) + list(model.model.buffers()) if id(t) not in host_tables)
        )
        streamer = getattr(model, "streamer", None)
        if streamer is not None:
            self.mark_device(
                *streamer.slots, *(view for views in streamer._slot_views for group in views.values() for view in group)
            )
            block = getattr(streamer, "_resident_block", None)
            if block is not None:
                self.mark_device(*_tensors(vars(block)))
        for module in model.model.modules():
            if isinstance(module, HostEmbedding):
                self._undo.append(module.register_forward_pre_hook(self._host_embedding_enter).remove)
                self._undo.append(module.register_forward_hook(self._host_embedding_exit).remove)

    def mark_cache(self, cache) -> None:
        """A KV cache's buffers (those allocated already; later ones are made from device tensors)."""
        for layer in cache.layers:
            self.mark_device(*_tensors(vars(layer)))

    def watch_draft(self, model) -> None:
        """Attribute what happens inside `model.forward` to draft forwards (patched on the instance for the
        duration of the trace)."""
        forward = model.forward

        def traced_forward(*args, **kwargs):
            self.counts.draft_forwards += 1
            self._in_draft += 1
            try:
                return forward(*args, **kwargs)
            finally:
                self._in_draft -= 1

        model.forward = traced_forward
        self._undo.append(lambda: vars(model).pop("forward", None))

    def watch_search(self) -> None:
        """Attribute what happens inside `core.decoding.draft_search.build_draft_tree` to the draft search (patched, for
        the duration of the trace, in every module that holds it by name)."""
        import core.decoding.draft_search

        search = core.decoding.draft_search.build_draft_tree

        def traced_search(*args, **kwargs):
            self._in_search += 1
            try:
                return search(*args, **kwargs)
            finally:
                self._in_search -= 1

        self._patch_everywhere(search, traced_search)

    def watch_steps(self) -> None:
        """Attribute what happens inside a one-token step's decoder stack (the part of
        `core.decoding.captured_forward.run_step_forward` a CUDA graph replays on CUDA) to `step_graph_kernels`
        (patched in core.decoding.captured_forward for the duration of the trace)."""
        import core.decoding.captured_forward as captured

        run_step, states = captured.run_step_forward, captured.windowed_states

        def traced_states(*args, **kwargs):
            self._in_step_graph += 1
            try:
                return states(*args, **kwargs)
            finally:
                self._in_step_graph -= 1

        def traced_step(model, cache, ids):
            self.counts.step_forwards += 1
            captured.windowed_states = traced_states
            try:
                return run_step(model, cache, ids)
            finally:
                captured.windowed_states = states

        self._patch_everywhere(run_step, traced_step)

    # -- counting ------------------------------------------------------------------------------------------

    def sync(self, site: str) -> None:
        if self._quiet:
            return
        self.counts.syncs[site] += 1
        if self._in_draft:
            self.counts.draft_syncs += 1
        if self._in_search:
            self.counts.search_syncs += 1

    def _h2d(self, nbytes: int, blocking: bool, site: str) -> None:
        if self._quiet:
            return
        self.counts.h2d_bytes += nbytes
        if blocking:
            self.sync(f"{site} [blocking host-to-device copy]")

    def _kernel(self) -> None:
        if self._quiet:
            return
        self.counts.kernels += 1
        if self._in_draft:
            self.counts.draft_kernels += 1
        if self._in_search:
            self.counts.search_kernels += 1
            if self._in_draft:
                self.counts.search_draft_kernels += 1
        if self._in_step_graph:
            self.counts.step_graph_kernels += 1

    def _host_embedding_enter(self, module, args) -> None:
        if any(self.is_on_device(t) for t in _tensors(args)):
            self.sync(f"{_site()} [HostEmbedding: ids read to the host]")
        self._quiet += 1

    def _host_embedding_exit(self, module, args, output) -> None:
        self._quiet -= 1
        self._h2d(output.numel() * output.element_size(), False, "HostEmbedding rows")
        self.mark_device(output)

    def snapshot(self) -> TraceCounts:
        return copy.deepcopy(self.counts)

    # -- activation ----------------------------------------------------------------------------------------

    def __enter__(self) -> "DeviceTrace":
        self._stack = ExitStack()
        self._stack.enter_context(gpu_semantics())
        self._stack.enter_context(_FunctionLevel(self))
        self._stack.enter_context(_DispatchLevel(self))
        self._patch_device_waits()
        return self

    def __exit__(self, *exc) -> None:
        for undo in reversed(self._undo):
            undo()
        self._undo.clear()
        self._stack.close()

    def _patch_device_waits(self) -> None:
        """Count `core.decoding.timing.synchronize` (a whole-device wait on CUDA, a no-op on the CPU) in every module
        that holds it by name."""
        import core.decoding.timing

        original = core.decoding.timing.synchronize

        def counted(device) -> None:
            self.sync(f"{_site()} [whole-device synchronize]")
            original(device)

        self._patch_everywhere(original, counted)

    def _patch_everywhere(self, original, replacement) -> None:
        """Replace the function `original` by `replacement` in every loaded module that holds it by name."""
        for module in list(sys.modules.values()):
            namespace = getattr(module, "__dict__", {})
            for name, value in list(namespace.items()):
                if value is original:
                    setattr(module, name, replacement)
                    self._undo.append(lambda m=module, n=name: setattr(m, n, original))


class _FunctionLevel(TorchFunctionMode):
    """Value reads, data-dependent ops and copies, seen as the Python code calls them (with their site)."""

    def __init__(self, trace: DeviceTrace) -> None:
        super().__init__()
        self.trace = trace

    def __torch_function__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        trace = self.trace
        name = getattr(func, "__name__", "")
        operands = _tensors(args, kwargs)
        on_device = any(trace.is_on_device(t) for t in operands)
        if on_device and (name in _VALUE_READS or name in _DATA_DEPENDENT):
            trace.sync(f"{_site()} [{name}]")
        elif on_device and name == "where" and len(args) + len(kwargs) == 1:
            trace.sync(f"{_site()} [where(condition)]")
        elif on_device and name == "repeat_interleave" and any(isinstance(a, torch.Tensor) for a in args[1:]):
            trace.sync(f"{_site()} [repeat_interleave]")
        elif (
            on_device
            and name in ("__getitem__", "__setitem__", "index_put", "index_put_")
            and _is_bool_index(args[1:2])
        ):
            trace.sync(f"{_site()} [boolean-mask indexing]")

        if name == "scaled_dot_product_attention" and not trace._quiet:
            trace.counts.attention_shapes[_attention_key(args, kwargs)] += 1

        if name in ("to", "cuda") and isinstance(args[0], torch.Tensor) and _device_argument(args, kwargs):
            return self._to_device(func, args, kwargs)
        if name == "copy_" and len(args) >= 2 and trace.is_on_device(args[0]) and not trace.is_on_device(args[1]):
            source = args[1]
            blocking = not (kwargs.get("non_blocking") or (len(args) > 2 and args[2]))
            trace._h2d(source.numel() * source.element_size(), blocking, _site())
            trace._quiet += 1  # the dispatch level must not count it again as a mixed-operand op
            try:
                return func(*args, **kwargs)
            finally:
                trace._quiet -= 1
        explicit_device = kwargs.get("device") is not None
        if name in _FACTORIES_FROM_DATA and explicit_device:
            result = func(*args, **kwargs)
            trace._h2d(result.numel() * result.element_size(), True, _site())
            trace.mark_device(result)
            return result
        if explicit_device and not on_device:
            trace._factory_on_device += 1
            try:
                result = func(*args, **kwargs)
            finally:
                trace._factory_on_device -= 1
            trace.mark_device(*_tensors(result))
            return result
        return func(*args, **kwargs)

    def _to_device(self, func, args, kwargs):
        trace = self.trace
        source = args[0]
        if trace.is_on_device(source):
            return func(*args, **kwargs)
        blocking = not kwargs.get("non_blocking", False) and not (
            len(args) > 2 and isinstance(args[2], bool) and args[2]
        )
        trace._h2d(source.numel() * source.element_size(), blocking, _site())
        result = func(*args, **kwargs)
        if result.untyped_storage().data_ptr() == source.untyped_storage().data_ptr():
            result = result.clone()  # a CPU run's .to('cpu') returns the tensor itself: the copy gets its own storage
        trace.mark_device(result)
        return result


def _attention_key(args, kwargs) -> str:
    """The shapes (and dtype) of one scaled_dot_product_attention call: query, key, mask."""
    query, key = args[0], args[1] if len(args) > 1 else kwargs["key"]
    mask = args[3] if len(args) > 3 else kwargs.get("attn_mask")
    mask_shape = list(mask.shape) if isinstance(mask, torch.Tensor) else None
    return f"q {list(query.shape)} k {list(key.shape)} mask {mask_shape} {str(query.dtype).removeprefix('torch.')}"


class _DispatchLevel(TorchDispatchMode):
    """Kernels, residency of every op's outputs, and host operands of device ops (implicit copies)."""

    def __init__(self, trace: DeviceTrace) -> None:
        super().__init__()
        self.trace = trace

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        trace = self.trace
        result = func(*args, **kwargs)
        operands = _tensors(args, kwargs)
        resident = [trace.is_on_device(t) for t in operands]
        if not (any(resident) or trace._factory_on_device > 0):
            return result
        name = func.overloadpacket.__name__
        if func.namespace == "aten" and not func.is_view and name not in _NO_KERNEL:
            trace._kernel()
        for host in (t for t, on in zip(operands, resident) if not on and t.dim() > 0):
            trace._h2d(host.numel() * host.element_size(), True, f"{_site()} [host operand of {name}]")
        trace.mark_device(*_tensors(result))
        return result
