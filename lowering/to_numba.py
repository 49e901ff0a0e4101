"""
Codegen: loop-level IR (contract level 5) -> the Python source of one Numba module (level 6).

The input is what `tess-outline-kernels` and `tess-linalg-to-loops` leave behind: host
functions that allocate buffers and call kernels, and `tess.kernel` functions whose bodies
are `scf.parallel`/`scf.for` nests over `memref.load`/`memref.store`, `arith` and `math`.
The output is a Python module, self-contained but for `tessc.runtime.threads` where it
launches threaded kernels:

- every kernel becomes `@njit(parallel=True, fastmath=FASTMATH, ...)`; the outermost
  `scf.parallel` becomes a `prange` loop and every other loop a `range` loop. Only
  functions nothing else calls get `cache=True`: a host's disk-cache entry holds its
  kernels (see `_emit_module` for the Numba bug that rules out caching callees);
- every host function becomes `@njit(cache=True, ...)` so one compiled call runs the whole
  sequence of kernel launches (Python per kernel launch is the cost to remove); serial
  kernels are emitted into the host's body at their call (`# <kernel>` marks where),
  so Numba compiles one function instead of one per kernel, and so is a parallel kernel
  that is the only function its hosts call;
- except where a host calls many serial kernels (`tessc.lowering.numba_external`): each is
  then `@external(void(voidptr, ...))`, a C callable compiled on its own and called by
  name with pointers (`kernel(x.ctypes, ...)`), which the runtime compiles concurrently
  (`tessc.runtime.external`);
- except where the hosts only call kernels and make buffers and a parallel kernel has one
  parallel loop (`tessc.lowering.numba_threads`): then such kernels are threaded, not
  parfors — `@njit(nogil=True, cache=True, ...)` over a share `range(lo, hi)` of that
  loop — and each host is plain Python launching them (`parallel_for(kernel, extent,
  ...)` of `tessc.runtime.threads`) and calling the other kernels, each cached itself;
- a literal `TESSC_SIGNATURES` (its format is documented once, in
  `tessc.runtime.signatures`; plain Python literals, `None` for "dynamic" and "not
  packed") records each host function's inputs and outputs (its trailing
  `tess.num_outputs` memref arguments), so the runtime never reads IR. From the pass
  contract (`tessc.dialects.contract`) it copies `tess.workspace_bytes` (a planned host's
  last argument, the byte arena of its intermediates) into `"workspace_bytes"`, each
  out-param's `tess.aliases_input` into `"output_aliases"`, and `tess.arena_layout` (a
  host packed by `tess-fuse-horizontal`) into `"arenas"`;
- an `scf.parallel` with `tess.chunk_size = C` (a horizontally fused arena loop) becomes a
  `prange` over chunks of C iterations, each a unit-stride loop with a `uint64` index.

The translation is one walk over the IR: this module emits the structure (functions, loops,
calls, the module's imports and `TESSC_SIGNATURES`); `tessc.lowering.numba_ops` translates
the arith, math and memref ops in between, one Python statement each (constants inlined,
values named after their IR name hints, `memref.view` as a typed window into its arena).

Performance decisions, from DESIGN.md's measurements:

- `error_model="numpy"`: with Numba's default Python error model every float division
  checks for zero (and raises), which blocks vectorisation and disagrees with NumPy.
- `fastmath` defaults to `reassoc, contract, nsz, arcp` — enough to vectorise reductions
  and fuse multiply-adds — but never `nnan`/`ninf`: `-inf` is the init value of max
  reductions and NaN must propagate through `maximumf`.
- Loops count from 0 whenever the IR's lower bound is 0, so the induction variable is
  provably non-negative and Numba's negative-index wraparound check folds away.
- `prange` over a short leading dimension starves the threads, so leading static dims of an
  `scf.parallel` whose product is below `PARALLEL_COLLAPSE_MIN` are collapsed into one
  `prange` over their product (the last dim is never collapsed: it is the unit-stride,
  vectorised one). Dims of trip count 1 are bound to their lower bound, not looped.
- Kernels whose static iteration count is below `parallel_threshold` run serially: a
  parallel launch costs more than a tiny loop nest. A loop over the threads
  (`micro.num_threads`) counts its body's work once.
- A kernel's 1-d scratch of 2 MiB or more starts on a 2 MiB boundary and is advised huge
  pages (`numba_ops.HUGE_PAGE`): packed panels on 4 KiB pages crowd some L2 sets.

xDSL has no Python/Numba backend, hence this module.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence

from xdsl.dialects import func, memref, scf
from xdsl.dialects.builtin import MemRefType, ModuleOp
from xdsl.ir import Attribute, Block, Operation, SSAValue, Use
from xdsl.traits import IsTerminator

# Re-exported: `_EXPRESSIONS` and `_CMPF` for tests that evaluate the templates.
from tessc.dialects import contract
from tessc.dialects.functions import called_functions
from tessc.lowering import numba_external
from tessc.lowering.loop_analysis import PARALLEL_WORK, static_work, static_work_of
from tessc.lowering.numba_micro import (
    MMA_IMPORTS,
    MMA_TEMPLATE,
    NUM_THREADS_TEMPLATE,
    mma_binding,
)
from tessc.lowering.numba_ops import _CMPF as _CMPF
from tessc.lowering.numba_ops import _EXPRESSIONS as _EXPRESSIONS
from tessc.lowering.numba_ops import (
    BITCAST_INTRINSIC,
    HUGE_PAGES_INTRINSIC,
    RESERVED_NAMES,
    OpEmitter,
    UnsupportedOpError,
    constant_int,
    dtype_name,
    global_definition,
    memref_shape,
    python_identifier,
    tuple_literal,
)
from tessc.lowering.numba_ops import constant_expr as constant_expr
from tessc.lowering.numba_threads import sole_parallel_kernels, threaded_candidates

DEFAULT_FASTMATH: tuple[str, ...] = ("arcp", "contract", "nsz", "reassoc")
DEFAULT_PARALLEL_THRESHOLD = PARALLEL_WORK
"""Kernels with fewer static iterations run serially. A parfor costs Numba 0.4-2 s of cold
compile per kernel (an MLP train step: 5.0 s CPU with its three 128x64x128-class kernels
parallel, 3.8 s serial) and a thread launch per call, which on a loaded machine cost an
MLP step 10x its serial time; below ~2^18 iterations (~0.1 ms of vectorised work) the
second thread cannot win that back."""
PARALLEL_COLLAPSE_MIN = 64


def trip_count(lb: SSAValue, ub: SSAValue, step: SSAValue) -> int | None:
    """The static trip count of a loop, or None when a bound is not a constant."""
    lo, hi, st = constant_int(lb), constant_int(ub), constant_int(step)
    if lo is None or hi is None or st is None or st <= 0:
        return None
    return max(0, -(-(hi - lo) // st))


# ---------------------------------------------------------------------------------------
# functions
# ---------------------------------------------------------------------------------------


class FunctionEmitter(OpEmitter):
    """Emits the body of one `func.func` as indented Python lines: its loops, branches and
    calls here, the arith, math and memref ops between them by `OpEmitter`."""

    def __init__(
        self,
        fn: func.FuncOp,
        function_names: dict[str, str],
        parallel: bool,
        inlined: dict[str, func.FuncOp] | None = None,
        serial_below: float = 0.0,
        *,
        threaded: tuple[str, str] | None = None,
        launches: dict[str, int] | None = None,
        externals: frozenset[str] = frozenset(),
    ):
        super().__init__(function_names.values(), parallel)
        self.serial_below = serial_below
        """Loops of less static work than this run serially even in a parallel kernel."""
        self.fn = fn
        self.function_names = function_names
        self.inlined = inlined or {}
        self.used_prange = False
        # A threaded kernel: its parallel loop runs the share `range(lo, hi)` named here,
        # and `extents` records the iteration counts it stands for (one, when it is valid).
        self.threaded = threaded
        self.extents: list[str] = []
        # Threaded kernels the function launches (`parallel_for`), with their extents.
        self.launches = launches or {}
        # Kernels compiled on their own, called by name with pointers (`numba_external`).
        self.externals = externals
        self.arg_names: list[str] = []

    def argument_names(self, num_outputs: int) -> list[str]:
        args = self.fn.body.block.args
        is_kernel = contract.KERNEL.has(self.fn)
        # A planned host's workspace comes after its out-params.
        end = len(args) - (not is_kernel and contract.WORKSPACE_BYTES.has(self.fn))
        names: list[str] = []
        for k, arg in enumerate(args):
            if is_kernel:
                stem = "arg"
            elif k >= end:
                stem = "workspace"
            elif k >= end - num_outputs:
                stem = "out"
            else:
                stem = "in"
            # Unnamed: `in0, in1, out0` like the contract's host signature; kernels `arg0`.
            position = {"out": k - (end - num_outputs), "workspace": ""}.get(stem, k)
            name = self.names.hinted(arg.name_hint or f"{stem}{position}")
            self.exprs[arg] = name
            names.append(name)
        for arg in args:
            self.view_if_scalar(arg)
        return names

    # -- walking ------------------------------------------------------------------------

    def emit_op(self, op: Operation) -> None:
        if isinstance(op, memref.ViewOp) and self.only_passed_by_name(op.result):
            self.emit_view(op, typed=False)
            return
        if self.emit_data_op(op):
            return
        if isinstance(op, scf.ForOp):
            self.emit_for(op)
        elif isinstance(op, scf.ParallelOp):
            self.emit_parallel(op)
        elif isinstance(op, scf.IfOp):
            self.emit_if(op)
        elif isinstance(op, func.CallOp):
            self.emit_call(op)
        elif isinstance(op, func.ReturnOp):
            self.emit_return(op)
        else:
            raise UnsupportedOpError(op)

    def only_passed_by_name(self, value: SSAValue) -> bool:
        """Whether every use of `value` is an argument of a kernel called by name."""
        return bool(value.uses) and all(
            isinstance(use.operation, func.CallOp)
            and use.operation.callee.root_reference.data in self.externals
            for use in value.uses
        )

    # -- control flow -------------------------------------------------------------------

    def emit_body(self, block: Block, yielded: Sequence[str] = ()) -> None:
        """A region's ops one level in, then `yielded[k] = <k-th terminator operand>`."""
        self.indent += 1
        start = len(self.lines)
        for op in block.ops:
            if op is not block.last_op or not op.has_trait(IsTerminator):
                self.emit_op(op)
        terminator = block.last_op
        if yielded:
            assert terminator is not None
            values = [self.expr(v) for v in terminator.operands]
            pairs = [(t, v) for t, v in zip(yielded, values, strict=True) if t != v]
            if pairs:
                targets = ", ".join(t for t, _ in pairs)
                self.line(f"{targets} = {', '.join(v for _, v in pairs)}")
        if len(self.lines) == start:
            self.line("pass")
        self.indent -= 1

    def range_call(self, lb: SSAValue, ub: SSAValue, step: SSAValue, loop: str) -> str:
        lo, st = constant_int(lb), constant_int(step)
        if lo == 0 and st == 1:
            return f"{loop}({self.expr(ub)})"
        if st == 1:
            return f"{loop}({self.expr(lb)}, {self.expr(ub)})"
        return f"{loop}({self.expr(lb)}, {self.expr(ub)}, {self.expr(step)})"

    def emit_for(self, op: scf.ForOp) -> None:
        block = op.body.block
        iv, *carried = block.args
        names: list[str] = []
        for arg, init, result in zip(carried, op.iter_args, op.res, strict=True):
            hint = arg.name_hint or result.name_hint
            name = self.names.hinted(hint) if hint else self.names.numbered("acc")
            self.exprs[arg] = self.exprs[result] = name
            self.line(f"{name} = {self.expr(init)}")
            names.append(name)
        header = self.range_call(op.lb, op.ub, op.step, "range")
        parent = op.parent_op()
        if (
            parent is not None
            and contract.ROW_RANGES.has(parent)
            and constant_int(op.step) == 1
            and all(_is_memref_index(use) for use in iv.uses)
        ):
            # A row's range, its bounds loaded from a table: with a signed index Numba
            # keeps its wraparound check and does not vectorise (see `emit_chunked`).
            # Memref indices are in bounds, so non-negative: counting in uint64 is exact.
            lo, hi = self.expr(op.lb), self.expr(op.ub)
            header = f"range(np.uint64({lo}), np.uint64({hi}))"
        self.line(f"for {self.define(iv, 'i')} in {header}:")
        self.emit_body(block, names)

    def parallel_header(self, index: str, count: str, unsigned: bool = False) -> str:
        """`for <index> in prange(<count>):`, or in a threaded kernel its share of them;
        `unsigned` (for an index that only indexes memrefs) counts in `uint64`: with a
        signed share Numba keeps its negative-index wraparound, 1.5x slower on W1."""
        self.used_prange = True
        if self.threaded is None:
            return f"for {index} in prange({count}):"
        self.extents.append(count)
        lo, hi = self.threaded
        if unsigned:
            lo, hi = f"np.uint64({lo})", f"np.uint64({hi})"
        return f"for {index} in range({lo}, {hi}):"

    def emit_parallel(self, op: scf.ParallelOp) -> None:
        if op.initVals:
            raise UnsupportedOpError(op, "parallel reductions (init values) are not supported")
        block = op.body.block
        dims: list[tuple[SSAValue, SSAValue, SSAValue, SSAValue, int | None]] = []
        for iv, lb, ub, step in zip(block.args, op.lowerBound, op.upperBound, op.step, strict=True):
            trips = trip_count(lb, ub, step)
            if trips == 0:
                return  # the body never runs
            if trips == 1:
                self.exprs[iv] = self.expr(lb)  # a unit dim is no loop
                continue
            dims.append((iv, lb, ub, step, trips))
        # A small loop of a parallel kernel (the per-parameter loops after a segmented
        # reduction) runs serially: as for a whole kernel, a launch would cost more.
        parallel = self.parallel and static_work_of(op) >= self.serial_below
        if parallel and self.emit_chunked(op, dims):
            return
        loop = "prange" if parallel else "range"
        outer_indent = self.indent
        group = dims[:1]
        while (
            parallel
            and len(group) < len(dims) - 1
            and all(d[4] is not None for d in [*group, dims[len(group)]])
            and math.prod(d[4] or 0 for d in group) < PARALLEL_COLLAPSE_MIN
        ):
            group.append(dims[len(group)])
        if len(group) > 1:
            self.emit_collapsed_header(group)
            dims, loop = dims[len(group) :], "range"
        for iv, lb, ub, step, trips in dims:
            name = self.define(iv, "i")
            shifted = self.threaded is not None and constant_int(lb) != 0
            if loop == "prange" and (constant_int(step) != 1 or shifted):
                # prange wants a unit step (a share, a start at 0): count iterations,
                # derive the index.
                flat = self.names.numbered("flat")
                count = trips if trips is not None else self.trip_expr(lb, ub, step)
                self.line(self.parallel_header(flat, str(count)))
                self.indent += 1
                self.line(f"{name} = {self.expr(lb)} + {flat} * {self.expr(step)}")
            elif loop == "prange":
                count = str(trips) if trips is not None else self.expr(ub)
                if constant_int(lb) != 0:  # not threaded: `prange(lb, ub)`
                    self.line(f"for {name} in {self.range_call(lb, ub, step, loop)}:")
                    self.used_prange = True
                else:
                    unsigned = all(_is_memref_index(use) for use in iv.uses)
                    self.line(self.parallel_header(name, count, unsigned))
                self.indent += 1
            else:
                self.line(f"for {name} in {self.range_call(lb, ub, step, loop)}:")
                self.indent += 1
            loop = "range"
        self.indent -= 1  # emit_body indents by one itself
        self.emit_body(block)
        self.indent = outer_indent

    def emit_chunked(
        self,
        op: scf.ParallelOp,
        dims: Sequence[tuple[SSAValue, SSAValue, SSAValue, SSAValue, int | None]],
    ) -> bool:
        """A 1-D loop with `tess.chunk_size = C` (from `tess-fuse-horizontal`) as a `prange`
        over chunks of C iterations, each a unit-stride inner loop; False if not applicable.

        The inner index is `uint64`: with a signed `chunk * C + k`, Numba cannot prove the
        index non-negative, keeps its wraparound check and the loop does not vectorise
        (4x slower, measured). So the index may only index memrefs, not enter arithmetic.
        """
        size = contract.CHUNK_SIZE.get(op)
        if size is None or len(dims) != 1:
            return False
        iv, lb, _, step, trips = dims[0]
        if trips is None or not 0 < size < trips or constant_int(lb) != 0:
            return False
        if constant_int(step) != 1 or not all(_is_memref_index(use) for use in iv.uses):
            return False
        chunk_index = self.names.numbered("chunk")
        start = self.names.numbered("start")
        self.line(self.parallel_header(chunk_index, str(-(-trips // size))))
        self.indent += 1
        self.line(f"{start} = np.uint64({chunk_index}) * np.uint64({size})")
        stop = f"min({start} + np.uint64({size}), np.uint64({trips}))"
        self.line(f"for {self.define(iv, 'i')} in range({start}, {stop}):")
        self.emit_body(op.body.block)
        self.indent -= 1
        return True

    def trip_expr(self, lb: SSAValue, ub: SSAValue, step: SSAValue) -> str:
        lo, hi, st = self.expr(lb), self.expr(ub), self.expr(step)
        return f"({hi} - {lo} + {st} - 1) // {st}"

    def emit_collapsed_header(
        self, group: Sequence[tuple[SSAValue, SSAValue, SSAValue, SSAValue, int | None]]
    ) -> None:
        """One `prange` over the product of short leading dims, then each index from it."""
        trips = [d[4] or 0 for d in group]
        flat = self.names.numbered("flat")
        self.line(self.parallel_header(flat, str(math.prod(trips))))
        self.indent += 1
        for k, (iv, lb, _, step, _) in enumerate(group):
            inner = math.prod(trips[k + 1 :])
            index = f"{flat} // {inner}" if inner > 1 else flat
            if k > 0:
                index = f"({index}) % {trips[k]}" if inner > 1 else f"{index} % {trips[k]}"
            if constant_int(step) != 1:
                index = f"({index}) * {self.expr(step)}"
            if constant_int(lb) != 0:
                index = f"{self.expr(lb)} + {index}"
            self.line(f"{self.define(iv, 'i')} = {index}")

    def emit_if(self, op: scf.IfOp) -> None:
        names = [self.define(r, "res") for r in op.results]
        self.line(f"if {self.expr(op.cond)}:")
        self.emit_body(op.true_region.block, names)
        if op.false_region.blocks:
            self.line("else:")
            self.emit_body(op.false_region.block, names)

    # -- calls --------------------------------------------------------------------------

    def emit_call(self, op: func.CallOp) -> None:
        callee = op.callee.root_reference.data
        if callee not in self.function_names:
            raise UnsupportedOpError(op, f"call to @{callee}, which the module does not define")
        if callee in self.inlined and not op.results:
            self.emit_inlined(self.inlined[callee], op)
            return
        name, args = self.function_names[callee], [self.expr(a) for a in op.arguments]
        if callee in self.launches:
            self.line(f"parallel_for({', '.join([name, str(self.launches[callee]), *args])})")
            return
        if callee in self.externals:
            self.line(f"{name}({', '.join(f'{a}.ctypes' for a in args)})")
            return
        call = f"{name}({', '.join(args)})"
        if not op.results:
            self.line(call)
            return
        targets = [self.define(r, "r") for r in op.results]
        self.line(f"{', '.join(targets)} = {call}")

    def emit_inlined(self, callee: func.FuncOp, op: func.CallOp) -> None:
        """The body of kernel `callee` in place of the call `op`: its arguments are
        the call's operands, its values get fresh names of this function."""
        self.line(f"# {self.function_names[callee.sym_name.data]}")
        for arg, operand in zip(callee.body.block.args, op.arguments, strict=True):
            self.exprs[arg] = self.expr(operand)
            if operand in self.scalar_views:
                self.scalar_views[arg] = self.scalar_views[operand]
        for inner in callee.body.block.ops:
            if isinstance(inner, func.ReturnOp):
                continue
            self.emit_op(inner)

    def emit_return(self, op: func.ReturnOp) -> None:
        if op.arguments:
            self.line(f"return {', '.join(self.expr(a) for a in op.arguments)}")


# ---------------------------------------------------------------------------------------
# the module
# ---------------------------------------------------------------------------------------


def _is_memref_index(use: Use) -> bool:
    """Whether `use` is an index operand of a `memref.load` or `memref.store`."""
    if isinstance(use.operation, memref.LoadOp):
        return use.index >= 1
    return isinstance(use.operation, memref.StoreOp) and use.index >= 2


def _has_parallel_loop(fn: func.FuncOp) -> bool:
    return any(isinstance(op, scf.ParallelOp) for op in fn.walk())


def _shape_literal(shape: Sequence[int]) -> str:
    """A shape in `TESSC_SIGNATURES`: `None` for a dynamic dimension."""
    return tuple_literal([None if d < 0 else d for d in shape])


def signature_entry(fn: func.FuncOp, pyname: str, arg_names: Sequence[str]) -> str | None:
    """The `TESSC_SIGNATURES` entry of a host function: memref args in, no results.

    An argument whose element type has no NumPy dtype is an `UnsupportedOpError` located
    at `fn`, for the CPU and CUDA emitters alike."""
    arg_types = fn.function_type.inputs.data
    if fn.function_type.outputs.data or not all(isinstance(t, MemRefType) for t in arg_types):
        return None
    num_outputs = contract.NUM_OUTPUTS.get(fn) or 0
    try:
        specs = [
            f'({_shape_literal(memref_shape(t))}, "{dtype_name(t.element_type)}")'
            for t in arg_types
            if isinstance(t, MemRefType)
        ]
    except ValueError as error:  # an argument type without a NumPy dtype
        raise UnsupportedOpError(fn, str(error)) from None
    names = [f'"{n}"' for n in arg_names]
    workspace = contract.WORKSPACE_BYTES.get(fn)
    extra = ""
    if workspace is not None:
        specs, names = specs[:-1], names[:-1]
        extra += f'        "workspace_bytes": {workspace},\n'
    split = len(specs) - num_outputs
    aliases = [contract.ALIASES_INPUT.get_arg(fn, k) for k in range(split, len(specs))]
    if any(a is not None for a in aliases):
        extra += f'        "output_aliases": [{", ".join(str(a) for a in aliases)}],\n'
    extra += _arena_layout_entry(fn, arg_types, split)
    return (
        f'    "{fn.sym_name.data}": {{\n'
        f'        "function": "{pyname}",\n'
        f'        "inputs": [{", ".join(specs[:split])}],\n'
        f'        "input_names": [{", ".join(names[:split])}],\n'
        f'        "outputs": [{", ".join(specs[split:])}],\n'
        f'        "output_names": [{", ".join(names[split:])}],\n'
        f"{extra}"
        "    },"
    )


def _arena_layout_entry(fn: func.FuncOp, arg_types: Sequence[Attribute], split: int) -> str:
    """`"arenas"`: the caller's inputs and outputs when `tess-fuse-horizontal` packed some
    into arenas (`tess.arena_layout`): `(shape, dtype, host argument, element offset)` each,
    offset None for an array passed as it is (see `tessc.runtime.signatures`)."""
    layout = contract.ARENA_LAYOUT.get(fn)
    if layout is None:
        return ""

    def entries(slots: Sequence[contract.ArenaSlot], base: int) -> str:
        items: list[str] = []
        for slot in slots:
            host_type = arg_types[base + slot.host]
            assert isinstance(host_type, MemRefType)
            dtype = dtype_name(host_type.element_type)
            shape = _shape_literal(slot.shape)
            items.append(f'({shape}, "{dtype}", {slot.host}, {slot.offset})')
        return ", ".join(items)

    names = ", ".join(f'"{n}"' for n in layout.input_names)
    return (
        '        "arenas": {\n'
        f'            "inputs": [{entries(layout.inputs, 0)}],\n'
        f'            "input_names": [{names}],\n'
        f'            "outputs": [{entries(layout.outputs, split)}],\n'
        "        },\n"
    )


def python_function_names(functions: Sequence[func.FuncOp]) -> dict[str, str]:
    names: dict[str, str] = {}
    taken = set(RESERVED_NAMES)
    for fn in functions:
        name = python_identifier(fn.sym_name.data)
        while name in taken:
            name += "_"
        taken.add(name)
        names[fn.sym_name.data] = name
    return names


def emit_numba(
    module: ModuleOp,
    *,
    fastmath: Iterable[str] = DEFAULT_FASTMATH,
    parallel_threshold: int = DEFAULT_PARALLEL_THRESHOLD,
    inline_serial_kernels: bool = True,
    threaded_kernels: bool = True,
    external_kernels: bool = True,
) -> str:
    """The Python source of a Numba module for the loop-level `module` (contract level 6).

    `fastmath` lists LLVM fast-math flags for the kernels; `parallel_threshold` is the static
    iteration count below which a kernel's `scf.parallel` runs as a serial loop;
    `inline_serial_kernels` emits serial kernels into the hosts that call them (one compiled
    function instead of one per kernel: about a third less compile time, measured with ten
    small kernels; and without Numba's `inline="always"`, whose IR copying cost another
    third of an MLP train step's); `threaded_kernels` lets parallel kernels be threaded
    kernels launched by a Python host instead of parfors where the module allows it
    (`tessc.lowering.numba_threads`); `external_kernels` compiles the larger serial kernels
    of a host calling several on their own, called by name (`tessc.lowering.numba_external`).
    Raises `UnsupportedOpError` naming the first op without a translation.
    """
    try:
        flags = sorted(set(fastmath))
        return _emit_module(
            module,
            flags,
            parallel_threshold,
            inline_serial_kernels,
            threaded_kernels,
            external_kernels,
        )
    except UnsupportedOpError as error:
        error.op.emit_error(str(error), error)


def _emit_module(
    module: ModuleOp,
    flags: list[str],
    parallel_threshold: int,
    inline_serial_kernels: bool,
    threaded_kernels: bool,
    external_kernels: bool,
) -> str:
    functions: list[func.FuncOp] = []
    tables: list[str] = []
    for op in module.ops:
        if isinstance(op, memref.GlobalOp):  # a constant table (`tess-linalg-to-loops`)
            tables.append(global_definition(op))
            continue
        if not isinstance(op, func.FuncOp):
            raise UnsupportedOpError(op, "only func.func is supported at module level")
        if not op.body.blocks:
            raise UnsupportedOpError(op, f"@{op.sym_name.data} is a declaration without body")
        if len(op.body.blocks) > 1:
            raise UnsupportedOpError(op, f"@{op.sym_name.data} has more than one block")
        functions.append(op)
    function_names = python_function_names(functions)
    called = called_functions(module)

    parallel = {
        fn.sym_name.data: contract.KERNEL.has(fn)
        and _has_parallel_loop(fn)
        and static_work(fn.body.block) >= parallel_threshold
        for fn in functions
    }
    # Threaded kernels launched from Python hosts, where the module allows them
    # (`tessc.lowering.numba_threads`): no parfor to compile.
    candidates = threaded_candidates(functions, parallel) if threaded_kernels else None
    emitted: dict[str, FunctionEmitter] = {}
    launches: dict[str, int] = {}
    for fn in functions:
        if candidates is None or fn.sym_name.data not in candidates:
            continue
        emitter = _emit_function(
            fn, function_names, True, {}, serial_below=parallel_threshold, threaded=True
        )
        count = emitter.extents[0] if len(emitter.extents) == 1 else ""
        if count.isdigit():
            emitted[fn.sym_name.data] = emitter
            launches[fn.sym_name.data] = int(count)
    python_hosts = candidates is not None and set(launches) == candidates
    if not python_hosts:  # some kernel cannot be threaded: parfors for all of them
        emitted.clear()
        launches.clear()
    inlined: dict[str, func.FuncOp] = {}
    externals: set[str] = set()
    if not python_hosts:
        # Serial kernels that return nothing are emitted into the body of each host that
        # calls them: one Numba function to compile, and no Numba `inline="always"`, whose
        # IR copying took a third of the compile time of an MLP train step (cProfile).
        inlined = {
            fn.sym_name.data: fn
            for fn in functions
            if inline_serial_kernels
            and fn.sym_name.data in called
            and contract.KERNEL.has(fn)
            and not parallel[fn.sym_name.data]
            and not fn.function_type.outputs.data
        }
        if external_kernels:
            externals = numba_external.external_kernels(functions, inlined)
            inlined = {k: v for k, v in inlined.items() if k not in externals}
        # A parallel kernel that is the only kernel its hosts call is emitted into them
        # too: the host is then that one parallel function, and no cached host links a
        # parallel callee (one function fewer to compile: W2 0.1 s).
        inlined.update(sole_parallel_kernels(functions, parallel))
    bodies: list[str] = []
    signatures: list[str] = []
    uses_math = uses_prange = uses_bitcast = uses_num_threads = uses_huge_pages = False
    mma_tiles: set[tuple[int, int, int]] = set()
    for fn in functions:
        name = fn.sym_name.data
        pyname = function_names[name]
        is_kernel = contract.KERNEL.has(fn)
        if name in inlined:
            continue
        emitter = emitted.get(name)
        if emitter is None:
            in_parallel = parallel[name] or any(
                parallel[callee] for callee in called_functions(fn) if callee in inlined
            )
            emitter = _emit_function(
                fn,
                function_names,
                in_parallel,
                inlined,
                serial_below=parallel_threshold,
                launches=launches if python_hosts else {},
                externals=frozenset(externals),
                external=name in externals,
            )
        uses_math |= emitter.uses_math
        uses_bitcast |= emitter.uses_bitcast
        uses_num_threads |= emitter.uses_num_threads
        uses_huge_pages |= emitter.uses_huge_pages
        mma_tiles |= emitter.mma_tiles
        if not is_kernel:
            entry = signature_entry(fn, pyname, emitter.arg_names)
            if entry is not None:
                signatures.append(entry)
        if python_hosts and not is_kernel:
            header = f"def {pyname}({', '.join(emitter.arg_names)}):"
            bodies.append("\n".join([header, *emitter.lines]))
            continue
        if name in externals:
            signature = numba_external.pointer_signature(fn)
            decorator = f'@external({signature}, fastmath=FASTMATH, error_model="numpy")'
            header = f"{decorator}\ndef {pyname}({', '.join(emitter.arg_names)}):"
            bodies.append("\n".join([header, *emitter.lines]))
            continue
        parallel_loops = emitter.used_prange and emitter.threaded is None
        uses_prange |= parallel_loops
        # Only functions no other function calls are cached on disk. Numba writes a broken
        # cache entry (a segfault when the next process loads it, reproduced with Numba
        # 0.68) for a function compiled against a parallel callee that was itself loaded
        # from the disk cache; so callees are never cached, and a cached host always
        # holds callees compiled with it. Kernels a Python host calls are called by none.
        options = ["cache=True"] if python_hosts or name not in called else []
        if parallel_loops:
            options.insert(0, "parallel=True")
        if emitter.threaded is not None:
            options.insert(0, "nogil=True")
        options += ["fastmath=FASTMATH", 'error_model="numpy"']
        decorator = f"@njit({', '.join(options)})"
        header = f"{decorator}\ndef {pyname}({', '.join(emitter.arg_names)}):"
        bodies.append("\n".join([header, *emitter.lines]))

    numba_names = [
        *(["carray"] if externals else []),
        "njit",
        *(["prange"] if uses_prange else []),
        *(["types"] if uses_bitcast or mma_tiles or uses_num_threads or uses_huge_pages else []),
        *(["get_num_threads"] if uses_num_threads else []),
    ]
    imports = ["import math", ""] if uses_math else []
    imports += ["import numpy as np", f"from numba import {', '.join(numba_names)}"]
    if mma_tiles or uses_num_threads or uses_huge_pages:
        imports += MMA_IMPORTS
    elif uses_bitcast:
        imports.append("from numba.extending import intrinsic")
    if python_hosts:
        imports.append("from tessc.runtime.threads import parallel_for")
    if externals:
        imports += numba_external.IMPORTS
    fastmath_text = "{" + ", ".join(f'"{f}"' for f in flags) + "}" if flags else "False"
    signature_text = "{\n" + "\n".join(signatures) + "\n}" if signatures else "{}"
    prologue = [
        "# Generated by tessc (tessc.lowering.to_numba) from loop-level IR. Do not edit.",
        *imports,
        "",
        f"FASTMATH = {fastmath_text}",
        "",
        f"TESSC_SIGNATURES = {signature_text}",
        *(["", *tables] if tables else []),
    ]
    helpers = [BITCAST_INTRINSIC] if uses_bitcast else []
    if mma_tiles:
        helpers += [MMA_TEMPLATE, "\n".join(mma_binding(tile) for tile in sorted(mma_tiles))]
    if uses_num_threads:
        helpers.append(NUM_THREADS_TEMPLATE)
    if uses_huge_pages:
        helpers.append(HUGE_PAGES_INTRINSIC)
    return "\n\n\n".join(["\n".join(prologue), *helpers, *bodies]) + "\n"


def _emit_function(
    fn: func.FuncOp,
    function_names: dict[str, str],
    parallel: bool,
    inlined: dict[str, func.FuncOp],
    *,
    serial_below: float = 0.0,
    threaded: bool = False,
    launches: dict[str, int] | None = None,
    externals: frozenset[str] = frozenset(),
    external: bool = False,
) -> FunctionEmitter:
    """The emitter of `fn` after emitting its body (`lines`, `arg_names`); a `threaded`
    kernel takes its share `lo, hi` first; an `external` kernel takes pointers and makes
    its arrays from them first."""
    emitter = FunctionEmitter(
        fn, function_names, parallel, inlined, serial_below, launches=launches, externals=externals
    )
    share: list[str] = []
    if threaded:
        share = [emitter.names.hinted("lo"), emitter.names.hinted("hi")]
        emitter.threaded = (share[0], share[1])
    is_kernel = contract.KERNEL.has(fn)
    num_outputs = contract.NUM_OUTPUTS.get(fn) or 0
    emitter.arg_names = share + emitter.argument_names(0 if is_kernel else num_outputs)
    if external:
        emitter.indent = 1
        pointers = [emitter.names.hinted(f"{name}_ptr") for name in emitter.arg_names]
        for name, pointer, typ in zip(
            emitter.arg_names, pointers, fn.function_type.inputs.data, strict=True
        ):
            emitter.line(numba_external.carray_line(name, pointer, typ))  # type: ignore[arg-type]
        emitter.arg_names = pointers
    emitter.indent = 0
    emitter.emit_body(fn.body.block)
    return emitter


__all__ = ["UnsupportedOpError", "dtype_name", "emit_numba", "python_identifier"]
