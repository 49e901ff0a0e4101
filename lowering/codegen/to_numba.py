"""
Codegen: loop-level IR (level 5) -> the Python source of one Numba module (level 6).

Kernels become `@njit(parallel=True, fastmath=..., error_model="numpy")` functions (the
outermost `scf.parallel` a `prange`), hosts `@njit(cache=True)` functions that run the
whole sequence of kernel calls, serial kernels emitted into their host's body. Two
exceptions: many serial kernels are compiled on their own and called by name
(`numba_external.py`), and where hosts only call kernels, parallel kernels are threaded
from a plain-Python host (`numba_threads.py`). A literal `TESSC_SIGNATURES`
(`tessc.runtime.signatures`) carries what the runtime needs from the pass contract. This
module emits the module; `numba_function.py` each function, `numba_ops.py` each op. The
performance decisions (error model, fast-math flags, loops from 0, collapsed short
`prange`s, the parallel threshold, huge-page scratch) are in lowering/codegen/README.md.
xDSL has no Python/Numba backend.
"""

from __future__ import annotations

from collections.abc import Iterable

from xdsl.dialects import func, memref, scf
from xdsl.dialects.builtin import ModuleOp

from tessc.dialects import contract
from tessc.dialects.functions import called_functions
from tessc.lowering.codegen import numba_external
from tessc.lowering.codegen.numba_function import (
    FunctionEmitter,
    fresh_name,
    python_function_names,
    signature_entry,
)
from tessc.lowering.codegen.numba_members import (
    MEMBER_POINTER_INTRINSIC,
    MemberEmitter,
    ThreadedMemberEmitter,
    bounds_definition,
    host_member_plan,
    member_plan,
    threaded_member_host,
)
from tessc.lowering.codegen.numba_micro import (
    MMA_IMPORTS,
    MMA_TEMPLATE,
    NUM_THREADS_TEMPLATE,
    MmaKey,
    mma_binding,
)
from tessc.lowering.codegen.numba_source import (
    BITCAST_INTRINSIC,
    FLOAT_MINMAX_INTRINSICS,
    HUGE_PAGES_INTRINSIC,
    NARROW_FLOAT_HELPERS,
    UnsupportedOpError,
    dtype_name,
    global_definition,
    python_identifier,
)
from tessc.lowering.codegen.numba_threads import sole_parallel_kernels, threaded_candidates
from tessc.lowering.codegen.to_llvm import kernel_source as llvm_kernel_text
from tessc.lowering.loops.trip_counts import PARALLEL_WORK, static_work
from tessc.runtime import abi

DEFAULT_FASTMATH: tuple[str, ...] = ("arcp", "contract", "nsz", "reassoc")
DEFAULT_PARALLEL_THRESHOLD = PARALLEL_WORK
"""Kernels with fewer static iterations run serially. A parfor costs Numba 0.4-2 s of cold
compile per kernel (an MLP train step: 5.0 s CPU with its three 128x64x128-class kernels
parallel, 3.8 s serial) and a thread launch per call, which on a loaded machine cost an
MLP step 10x its serial time; below ~2^18 iterations (~0.1 ms of vectorised work) the
second thread cannot win that back."""
# ---------------------------------------------------------------------------------------
# the module
# ---------------------------------------------------------------------------------------


def _has_parallel_loop(fn: func.FuncOp) -> bool:
    return any(isinstance(op, scf.ParallelOp) for op in fn.walk())


def _has_segmented_reduction(module: ModuleOp) -> bool:
    """Whether `module` sums per-segment values (`tess.row_ranges` loops carrying an
    accumulator: an optimizer's per-parameter norms, `tess-fuse-horizontal` step 2b)."""
    return any(
        isinstance(op, scf.ParallelOp)
        and contract.ROW_RANGES.has(op)
        and any(isinstance(inner, scf.ForOp) and inner.results for inner in op.walk())
        for op in module.walk()
    )


def emit_numba(
    module: ModuleOp,
    *,
    fastmath: Iterable[str] = DEFAULT_FASTMATH,
    parallel_threshold: int = DEFAULT_PARALLEL_THRESHOLD,
    inline_serial_kernels: bool = True,
    threaded_kernels: bool = True,
    external_kernels: bool = True,
    llvm_kernels: bool = True,
) -> str:
    """The Python source of a Numba module for the loop-level `module` (contract level 6).

    `fastmath` lists LLVM fast-math flags for the kernels; `parallel_threshold` is the static
    iteration count below which a kernel's `scf.parallel` runs as a serial loop;
    `inline_serial_kernels` emits serial kernels into the hosts that call them (one compiled
    function instead of one per kernel: about a third less compile time, measured with ten
    small kernels; and without Numba's `inline="always"`, whose IR copying cost another
    third of an MLP train step's); `threaded_kernels` lets parallel kernels be threaded
    kernels launched by a Python host instead of parfors where the module allows it
    (`codegen.numba_threads`); `external_kernels` compiles the larger serial kernels
    of a host calling several on their own, called by name (`codegen.numba_external`);
    `llvm_kernels` writes those as LLVM IR where every op has an LLVM form
    (`codegen.to_llvm`), else they stay Numba's.
    Raises `UnsupportedOpError` naming the first op without a translation.
    """
    try:
        flags = sorted(set(fastmath))
        if _has_segmented_reduction(module):
            # Per-parameter norms sum in element order: without reassociation the loop
            # vectorizer cannot reorder them by its vector width, which depends on the
            # other operands' types, so a split-bf16 Lamb step's norms are its fp32
            # step's, bit for bit (tests/test_split_lamb.py).
            flags = [f for f in flags if f != "reassoc"]
        return _emit_module(
            module,
            flags,
            parallel_threshold,
            inline_serial_kernels,
            threaded_kernels,
            external_kernels,
            llvm_kernels,
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
    llvm_kernels: bool,
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
    # (`codegen.numba_threads`): no parfor to compile.
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
    if python_hosts and external_kernels:
        # Serial kernels large enough to be called by name keep that form (compiled
        # concurrently by the compile worker), so their module keeps parfors.
        serial = {
            fn.sym_name.data: fn
            for fn in functions
            if contract.KERNEL.has(fn)
            and fn.sym_name.data in called
            and fn.sym_name.data not in launches
        }
        python_hosts = not numba_external.external_kernels(functions, serial)
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
    uses_prange = False
    numba_code: list[FunctionEmitter] = []  # the emitters of what is Numba's: the helpers it uses
    external_bodies: dict[str, str] = {}  # body_key -> the kernel that has that body
    sized_externals = False  # an external kernel takes the sizes of `?` dims
    numba_externals = llvm_externals = False  # external kernels of either form
    uses_members = False
    taken = set(function_names.values())
    threaded = {fn.sym_name.data: fn for fn in functions if fn.sym_name.data in launches}
    own_kernels = {  # kernels compiled as functions of their own that hosts call
        fn.sym_name.data: fn
        for fn in functions
        if contract.KERNEL.has(fn) and fn.sym_name.data not in inlined | threaded
    }
    kernel_members: list[str] = []  # the member forms of kernels of member hosts
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
        if name in externals:
            signature = numba_external.pointer_signature(fn)
            # A kernel identical to an earlier one up to its names is that one (an
            # optimizer's update of every parameter of one shape): compiled once.
            key = numba_external.body_key(signature, emitter.renamed, emitter.lines)
            if key in external_bodies:
                bodies.append(f"{pyname} = {external_bodies[key]}")
                continue
            external_bodies[key] = pyname
            sized_externals |= numba_external.size_count(fn) > 0
            text = llvm_kernel_text(fn, pyname, signature, flags) if llvm_kernels else None
            if text is not None:  # no Numba in it: none of its helpers either
                bodies.append(text)
                llvm_externals = True
                continue
        numba_code.append(emitter)
        # A packed host that reads some input arenas element by element also gets a form
        # reading their members where they lie (`codegen.numba_members`).
        plan = member_plan(fn, threaded) if python_hosts and not is_kernel else None
        host_plan = None
        if not is_kernel and not python_hosts:
            host_plan = host_member_plan(fn, inlined, own_kernels)
        member_form = None
        threaded_members: list[str] = []
        if plan is not None:
            member_name = fresh_name(f"{pyname}_members", taken)
            kernel = ThreadedMemberEmitter(
                plan,
                function_names,
                fresh_name(f"MEMBER_BOUNDS_{pyname}", taken),
                parallel_threshold,
            )
            kernel.emit()
            numba_code.append(kernel)
            kernel_name = fresh_name(f"{function_names[plan.kernel.sym_name.data]}_members", taken)
            host = threaded_member_host(
                plan, function_names, kernel_name, kernel.extent, contract.NUM_OUTPUTS.get(fn) or 0
            )
            tables.append(bounds_definition(kernel.bounds_name, plan.bounds))
            member_form = (member_name, plan.tabled)
            uses_members = True
            decorator = '@njit(nogil=True, cache=True, fastmath=FASTMATH, error_model="numpy")'
            threaded_members = [
                "\n".join([f"def {member_name}({', '.join(host.arg_names)}):", *host.lines]),
                "\n".join(
                    [decorator, f"def {kernel_name}({', '.join(kernel.arg_names)}):", *kernel.lines]
                ),
            ]
        elif host_plan is not None:
            member_name = fresh_name(f"{pyname}_members", taken)
            bounds_name = fresh_name(f"MEMBER_BOUNDS_{pyname}", taken)
            segment_tables: dict[tuple[int, ...], str] = {}
            for _, segments in host_plan.segment_loops:
                if segments not in segment_tables:
                    segment_tables[segments] = fresh_name(f"SEGMENT_MEMBERS_{pyname}", taken)
                    tables.append(bounds_definition(segment_tables[segments], segments))
            member_kernels: dict[str, str] = {}
            for callee, positions in host_plan.kernel_tabled:
                kernel_name = fresh_name(f"{function_names[callee]}_members", taken)
                member_kernels[callee] = kernel_name
                kernel = MemberEmitter(
                    host_plan.of_kernel(own_kernels[callee], positions),
                    function_names,
                    parallel[callee],
                    inlined,
                    bounds_name,
                    parallel_threshold,
                    segment_tables,
                )
                if callee in externals:  # called by name, as the kernel is
                    numba_externals = True
                    kernel.emit_external()
                    signature = numba_external.pointer_signature(own_kernels[callee])
                    decorator = f'@external({signature}, fastmath=FASTMATH, error_model="numpy")'
                else:
                    kernel.emit(0)
                    uses_prange |= kernel.used_prange
                    options = ["parallel=True"] if kernel.used_prange else []
                    options += ["fastmath=FASTMATH", 'error_model="numpy"']
                    decorator = f"@njit({', '.join(options)})"
                numba_code.append(kernel)
                header = f"{decorator}\ndef {kernel_name}"
                kernel_members.append(f"{header}({', '.join(kernel.arg_names)}):")
                kernel_members[-1] = "\n".join([kernel_members[-1], *kernel.lines])
            members = MemberEmitter(
                host_plan,
                function_names,
                emitter.parallel,
                inlined,
                bounds_name,
                parallel_threshold,
                segment_tables,
                member_kernels,
                frozenset(externals),
            )
            members.emit(contract.NUM_OUTPUTS.get(fn) or 0)
            numba_code.append(members)
            tables.append(bounds_definition(bounds_name, host_plan.bounds))
            member_form = (member_name, host_plan.tabled)
            uses_members = True
        if not is_kernel:
            entry = signature_entry(fn, pyname, emitter.arg_names, member_form)
            if entry is not None:
                signatures.append(entry)
        if python_hosts and not is_kernel:
            header = f"def {pyname}({', '.join(emitter.arg_names)}):"
            bodies.append("\n".join([header, *emitter.lines]))
            bodies += threaded_members
            continue
        if name in externals:
            numba_externals = True
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
        if member_form is not None:
            uses_prange |= members.used_prange
            options = [o for o in options if o != "parallel=True"]
            if members.used_prange:
                options.insert(0, "parallel=True")
            decorator = f"@njit({', '.join(options)})"
            header = f"{decorator}\ndef {member_form[0]}({', '.join(members.arg_names)}):"
            bodies.append("\n".join([header, *members.lines]))
            bodies += kernel_members
            kernel_members = []

    uses_math = any(e.uses_math for e in numba_code)
    uses_bitcast = any(e.uses_bitcast for e in numba_code)
    uses_narrow_floats = any(e.uses_narrow_floats for e in numba_code)
    uses_float_minmax = any(e.uses_float_minmax for e in numba_code)
    uses_num_threads = any(e.uses_num_threads for e in numba_code)
    uses_huge_pages = any(e.uses_huge_pages for e in numba_code)
    mma_tiles: set[MmaKey] = set().union(*(e.mma_tiles for e in numba_code))
    numba_names = [
        *(["carray"] if numba_externals or uses_members else []),
        "njit",
        *(["prange"] if uses_prange else []),
        *(
            ["types"]
            if uses_bitcast or mma_tiles or uses_num_threads or uses_huge_pages or uses_members
            else []
        ),
        *(["get_num_threads"] if uses_num_threads else []),
    ]
    imports = ["import math", ""] if uses_math else []
    imports += ["import numpy as np", f"from numba import {', '.join(numba_names)}"]
    if mma_tiles or uses_num_threads or uses_huge_pages or uses_float_minmax:
        imports += MMA_IMPORTS
    elif uses_bitcast or uses_members:
        imports.append("from numba.extending import intrinsic")
    if python_hosts:
        imports.append("from tessc.runtime.threads import parallel_for")
    if externals:
        imports += numba_external.imports(sized_externals, numba_externals, llvm_externals)
    fastmath_text = "{" + ", ".join(f'"{f}"' for f in flags) + "}" if flags else "False"
    signature_text = "{\n" + "\n".join(signatures) + "\n}" if signatures else "{}"
    prologue = [
        "# Generated by tessc (tessc.lowering.codegen.to_numba) from loop-level IR. Do not edit.",
        *imports,
        "",
        f"FASTMATH = {fastmath_text}",
        "",
        f"{abi.SIGNATURES} = {signature_text}",
        *(["", *tables] if tables else []),
    ]
    helpers = [BITCAST_INTRINSIC] if uses_bitcast else []
    if uses_float_minmax:
        helpers.append(FLOAT_MINMAX_INTRINSICS)
    if uses_narrow_floats:
        helpers.append(NARROW_FLOAT_HELPERS.format(decorator='@njit(inline="always")'))
    if mma_tiles:
        helpers += [MMA_TEMPLATE, "\n".join(mma_binding(tile) for tile in sorted(mma_tiles))]
    if uses_num_threads:
        helpers.append(NUM_THREADS_TEMPLATE)
    if uses_huge_pages:
        helpers.append(HUGE_PAGES_INTRINSIC)
    if uses_members:
        helpers.append(MEMBER_POINTER_INTRINSIC)
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
        sizes: list[str] = []
        for name, pointer, typ in zip(
            emitter.arg_names, pointers, fn.function_type.inputs.data, strict=True
        ):
            dims = numba_external.dynamic_dims(typ)  # type: ignore[arg-type]
            own = [emitter.names.hinted(f"{name}_n{k}") for k in dims]
            emitter.line(numba_external.carray_line(name, pointer, typ, own))  # type: ignore[arg-type]
            sizes += own
        emitter.renamed = [*pointers, *sizes, *emitter.arg_names]
        emitter.arg_names = pointers + sizes
    emitter.indent = 0
    emitter.emit_body(fn.body.block)
    return emitter


__all__ = ["UnsupportedOpError", "dtype_name", "emit_numba", "python_identifier"]
