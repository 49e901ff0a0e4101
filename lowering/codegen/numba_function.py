"""
One function of the generated Numba module, for both emitters (`tess-to-numba`'s
`codegen.to_numba` and the CUDA emitter `codegen.cuda_function`, which extends it).

`FunctionEmitter` turns the body of one `func.func` into indented Python lines: `scf.for`
and `scf.parallel` loops (`range`/`prange`, a short leading parallel prefix collapsed into
one `prange`, trip-1 dims bound to their lower bound, chunked arena loops), `scf.if`,
calls (a serial kernel emitted into its caller's body at the call, or called by name), and
between them the arith, math and memref ops, one statement each, by `numba_ops.OpEmitter`.
`signature_entry` writes a host's `TESSC_SIGNATURES` entry (the format is
`tessc.runtime.signatures`'), the only thing the runtime knows of the IR.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

from xdsl.dialects import func, memref, scf
from xdsl.dialects.builtin import MemRefType
from xdsl.ir import Attribute, Block, BlockArgument, Operation, SSAValue, Use
from xdsl.traits import IsTerminator

from tessc.dialects import contract
from tessc.lowering.codegen.numba_ops import OpEmitter
from tessc.lowering.codegen.numba_source import (
    RESERVED_NAMES,
    UnsupportedOpError,
    memref_shape,
    python_identifier,
    signature_dtype_name,
    tuple_literal,
)
from tessc.lowering.loops.index_values import constant_int
from tessc.lowering.loops.trip_counts import static_work_of
from tessc.runtime import abi

PARALLEL_COLLAPSE_MIN = 64
"""Leading static dims of an `scf.parallel` whose product is below this are collapsed into
one `prange` (a short leading dim starves the threads)."""


def trip_count(lb: SSAValue, ub: SSAValue, step: SSAValue) -> int | None:
    """The static trip count of a loop, or None when a bound is not a constant."""
    lo, hi, st = constant_int(lb), constant_int(ub), constant_int(step)
    if lo is None or hi is None or st is None or st <= 0:
        return None
    return max(0, -(-(hi - lo) // st))


def is_memref_index(use: Use) -> bool:
    """Whether `use` is an index operand of a `memref.load` or `memref.store`."""
    if isinstance(use.operation, memref.LoadOp):
        return use.index >= 1
    return isinstance(use.operation, memref.StoreOp) and use.index >= 2


# ---------------------------------------------------------------------------------------
# functions
# ---------------------------------------------------------------------------------------

RESHAPES = (memref.CollapseShapeOp, memref.ExpandShapeOp)


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
        self.renamed: list[str] = []  # an external kernel's argument and array names
        self.addresses: dict[SSAValue, str] = {}  # buffers only kernels called by name see
        self.argument_addresses: list[str] = []  # `x_addr = x.ctypes.data` lines

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
            # A window into the workspace only kernels called by name see: an address.
            shift = constant_int(op.byte_shift)
            if op.sizes:  # `?` dims: its sizes are the view's operands (`dynamic_sizes`)
                base = self.address(op.source)
                self.addresses[op.result] = f"{base} + {self.expr(op.byte_shift)}"
            elif shift is None:
                self.emit_view(op, typed=False)
            else:
                base = self.address(op.source)
                self.addresses[op.result] = f"{base} + {shift}" if shift else base
            return
        if isinstance(op, RESHAPES) and self.only_passed_by_name(op.result):
            self.addresses[op.result] = self.address(op.src)  # the same address: no code
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

    def address(self, value: SSAValue) -> str:
        """The address of buffer `value`'s first element, an integer expression (what a
        kernel called by name takes): no array is built for a window or a reshape."""
        found = self.addresses.get(value)
        if found is not None:
            return found
        if isinstance(value, BlockArgument) and value.owner is self.fn.body.block:
            # An argument's address is read once, at the top (`emit_body`).
            name = self.addresses[value] = self.names.hinted(f"{self.expr(value)}_addr")
            self.argument_addresses.append(f"{name} = {self.expr(value)}.ctypes.data")
            return name
        return f"{self.expr(value)}.ctypes.data"

    def dynamic_sizes(self, value: SSAValue) -> list[str]:
        """The sizes of the `?` dims of buffer `value`, integer expressions (what a kernel
        called by name takes after the pointers), from an array's shape or, for a window
        or reshape with no array, from the op that made it."""
        typ = value.type
        assert isinstance(typ, MemRefType)
        shape = memref_shape(typ)
        if all(size >= 0 for size in shape):
            return []
        owner = value.owner
        if isinstance(owner, memref.ViewOp) and value in self.addresses:
            return [self.expr(size) for size in owner.sizes]
        if isinstance(owner, memref.ExpandShapeOp) and value in self.addresses:
            return [self.expr(size) for size in owner.output_shape]
        if isinstance(owner, memref.CollapseShapeOp) and value in self.addresses:
            source = iter(self.dynamic_sizes(owner.src))
            source_shape = memref_shape(owner.src.type)
            sizes: list[str] = []
            for group, size in zip(owner.reassociation.data, shape, strict=True):
                factors = [source_shape[d.value.data] for d in group.data]  # type: ignore[attr-defined]
                terms = [str(f) if f >= 0 else next(source) for f in factors]
                if size < 0:
                    sizes.append(" * ".join(t for t in terms if t != "1") or "1")
            return sizes
        if value in self.addresses and not isinstance(value, BlockArgument):
            raise UnsupportedOpError(owner, "a `?` dim a kernel called by name cannot read")  # type: ignore[arg-type]
        array = self.expr(value)
        return [f"{array}.shape[{k}]" for k, size in enumerate(shape) if size < 0]

    def only_passed_by_name(self, value: SSAValue) -> bool:
        """Whether every use of `value` is an argument of a kernel called by name, or
        reshapes it for such uses only (a pointer is a pointer whatever its shape)."""
        return bool(value.uses) and all(
            (
                isinstance(use.operation, func.CallOp)
                and use.operation.callee.root_reference.data in self.externals
            )
            or (
                isinstance(use.operation, RESHAPES)
                and self.only_passed_by_name(use.operation.result)
            )
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
        if block is self.fn.body.block and self.argument_addresses:
            self.lines[start:start] = ["    " * self.indent + a for a in self.argument_addresses]
        terminator = block.last_op
        if yielded:
            assert terminator is not None
            values = [self.expr(v) for v in terminator.operands]
            pairs = [(t, v) for t, v in zip(yielded, values, strict=True) if t != v]
            if pairs:
                targets = ", ".join(t for t, _ in pairs)
                self.line(f"{targets} = {', '.join(v for _, v in pairs)}")
        # A body of comments only (a kernel emitted at its call whose loops never run: a
        # zero-size tensor) is no Python block.
        if all(line.lstrip().startswith("#") for line in self.lines[start:]):
            self.line("pass")
        self.indent -= 1

    def range_call(self, lb: SSAValue, ub: SSAValue, step: SSAValue, loop: str) -> str:
        lo, st = constant_int(lb), constant_int(step)
        if lo == 0 and st == 1:
            return f"{loop}({self.expr(ub)})"
        if st == 1:
            return f"{loop}({self.expr(lb)}, {self.expr(ub)})"
        return f"{loop}({self.expr(lb)}, {self.expr(ub)}, {self.expr(step)})"

    def bind_carried(self, op: scf.ForOp) -> list[str]:
        """Name `op`'s loop-carried values (one name for the block argument and the
        result) and assign their initial values before the loop; the names, in order."""
        block = op.body.block
        names: list[str] = []
        for arg, init, result in zip(block.args[1:], op.iter_args, op.res, strict=True):
            hint = arg.name_hint or result.name_hint
            name = self.names.hinted(hint) if hint else self.names.numbered("acc")
            self.exprs[arg] = self.exprs[result] = name
            self.line(f"{name} = {self.expr(init)}")
            names.append(name)
        return names

    def emit_for(self, op: scf.ForOp) -> None:
        block = op.body.block
        iv = block.args[0]
        names = self.bind_carried(op)
        header = self.range_call(op.lb, op.ub, op.step, "range")
        parent = op.parent_op()
        if (
            parent is not None
            and contract.ROW_RANGES.has(parent)
            and constant_int(op.step) == 1
            and all(is_memref_index(use) for use in iv.uses)
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
                    unsigned = all(is_memref_index(use) for use in iv.uses)
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
        if constant_int(step) != 1 or not all(is_memref_index(use) for use in iv.uses):
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
        name = self.function_names[callee]
        if callee in self.externals:
            sizes = [size for arg in op.arguments for size in self.dynamic_sizes(arg)]
            self.line(f"{name}({', '.join([*map(self.address, op.arguments), *sizes])})")
            return
        args = [self.expr(a) for a in op.arguments]
        if callee in self.launches:
            self.line(f"parallel_for({', '.join([name, str(self.launches[callee]), *args])})")
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
# the TESSC_SIGNATURES entry of a host
# ---------------------------------------------------------------------------------------


def _shape_literal(shape: Sequence[int]) -> str:
    """A shape in `TESSC_SIGNATURES`: `None` for a dynamic dimension."""
    return tuple_literal([None if d < 0 else d for d in shape])


def signature_entry(
    fn: func.FuncOp,
    pyname: str,
    arg_names: Sequence[str],
    member_form: tuple[str, Sequence[int]] | None = None,
) -> str | None:
    """The `TESSC_SIGNATURES` entry of a host function: memref args in, no results;
    `member_form`: the name of its form reading the given input arenas through tables
    (`codegen.numba_members`), if it has one.

    An argument whose element type has no NumPy dtype is an `UnsupportedOpError` located
    at `fn`, for the CPU and CUDA emitters alike."""
    arg_types = fn.function_type.inputs.data
    if fn.function_type.outputs.data or not all(isinstance(t, MemRefType) for t in arg_types):
        return None
    num_outputs = contract.NUM_OUTPUTS.get(fn) or 0
    try:
        specs = [
            f'({_shape_literal(memref_shape(t))}, "{signature_dtype_name(t.element_type)}")'
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
        extra += f'        "{abi.WORKSPACE_BYTES}": {workspace},\n'
    split = len(specs) - num_outputs
    aliases = [contract.ALIASES_INPUT.get_arg(fn, k) for k in range(split, len(specs))]
    if any(a is not None for a in aliases):
        extra += f'        "{abi.OUTPUT_ALIASES}": [{", ".join(str(a) for a in aliases)}],\n'
    extra += _arena_layout_entry(fn, arg_types, split)
    if member_form is not None:
        name, tabled = member_form
        extra += f'        "{abi.MEMBER_TABLES}": ("{name}", {tuple_literal(list(tabled))}),\n'
    return (
        f'    "{fn.sym_name.data}": {{\n'
        f'        "{abi.FUNCTION}": "{pyname}",\n'
        f'        "{abi.INPUTS}": [{", ".join(specs[:split])}],\n'
        f'        "{abi.INPUT_NAMES}": [{", ".join(names[:split])}],\n'
        f'        "{abi.OUTPUTS}": [{", ".join(specs[split:])}],\n'
        f'        "{abi.OUTPUT_NAMES}": [{", ".join(names[split:])}],\n'
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
            dtype = signature_dtype_name(host_type.element_type)
            shape = _shape_literal(slot.shape)
            items.append(f'({shape}, "{dtype}", {slot.host}, {slot.offset})')
        return ", ".join(items)

    names = ", ".join(f'"{n}"' for n in layout.input_names)
    return (
        f'        "{abi.ARENAS}": {{\n'
        f'            "{abi.INPUTS}": [{entries(layout.inputs, 0)}],\n'
        f'            "{abi.INPUT_NAMES}": [{names}],\n'
        f'            "{abi.OUTPUTS}": [{entries(layout.outputs, split)}],\n'
        "        },\n"
    )


def fresh_name(name: str, taken: set[str]) -> str:
    """`name`, or with trailing underscores, so that it is no name in `taken` (then is)."""
    while name in taken:
        name += "_"
    taken.add(name)
    return name


def python_function_names(functions: Sequence[func.FuncOp]) -> dict[str, str]:
    taken = set(RESERVED_NAMES)
    return {
        fn.sym_name.data: fresh_name(python_identifier(fn.sym_name.data), taken) for fn in functions
    }
