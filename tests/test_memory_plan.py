"""tess-memory-plan: plans checked independently of the pass, and planned programs run.

- Random straight-line hosts (allocs, views, copies and calls of opaque functions) are
  planned, then replayed byte by byte beside the unplanned host: whenever a buffer is used
  again, its bytes must still be its own, one op never sees two buffers overlap, the
  arguments survive, offsets are aligned, and the byte counts add up.
- Random `tess` programs and an MLP's forward and backward pass go through the cpu
  pipeline with the plan, Numba codegen and the runtime, and must equal the reference
  interpreter, twice in a row on different inputs (the arena is reused across calls and
  holds the last call's data).
- Donated inputs: an SGD step updates its parameters in place, and the runtime copies a
  donated array that must not change.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from xdsl.dialects import arith, func, memref
from xdsl.dialects.builtin import IntegerAttr, MemRefType, ModuleOp, f32
from xdsl.ir import Block, Region, SSAValue

from tessc.context import make_context
from tessc.lowering.buffers.arena_layout import memref_bytes
from tessc.lowering.buffers.memory_plan import TessMemoryPlanPass
from tessc.lowering.codegen.to_numba import emit_numba
from tessc.pipelines import get_pipeline, run_passes
from tessc.reference import find_func, interpret, parse_module
from tessc.runtime.abi import ALIGNMENT
from tessc.runtime.cache import load_source
from tessc.runtime.executor import Executable

from helpers import assert_results_match, random_inputs, random_program

TO_LINALG = "tess-to-linalg,tess-fuse"
LOOPS = "tess-linalg-to-loops,canonicalize,cse"
PLAN_BEFORE_OUTLINE = f"{TO_LINALG},tess-bufferize,tess-memory-plan,tess-outline-kernels,{LOOPS}"
PLAN_AFTER_OUTLINE = f"{TO_LINALG},tess-bufferize,tess-outline-kernels,tess-memory-plan,{LOOPS}"


def attribute(function: func.FuncOp, name: str) -> int:
    attr = function.attributes[f"tess.{name}"]
    assert isinstance(attr, IntegerAttr)
    return int(attr.value.data)


# ---------------------------------------------------------------------------------------
# random hosts, and an independent check of their plans
# ---------------------------------------------------------------------------------------


@st.composite
def random_host(draw: st.DrawFn) -> str:
    """A host over one input and one out-param: allocs of a few shapes, views of them,
    copies, and calls of opaque functions on random sets of live buffers."""
    shapes = [(16,), (4, 4), (3,), (2, 8), (5, 5)]
    out_shape = draw(st.sampled_from(shapes))
    block = Block(arg_types=[MemRefType(f32, [16]), MemRefType(f32, list(out_shape))])
    module = ModuleOp([])
    buffers: list[SSAValue] = [block.args[0]]
    callees: dict[tuple[MemRefType, ...], str] = {}

    def call(operands: Sequence[SSAValue]) -> None:
        types_ = tuple(v.type for v in operands)
        if types_ not in callees:
            callees[types_] = f"opaque_{len(callees)}"
            module.body.block.add_op(func.FuncOp.external(callees[types_], list(types_), []))
        block.add_op(func.CallOp(callees[types_], list(operands), []))

    for _ in range(draw(st.integers(1, 12))):
        step = draw(st.sampled_from(["alloc", "alloc", "call", "call", "view", "copy"]))
        if step == "alloc":
            shape = draw(st.sampled_from(shapes))
            alloc = memref.AllocOp([], [], MemRefType(f32, list(shape)))
            block.add_op(alloc)
            # Its first use, often also some other buffer's last.
            sources = draw(st.permutations(buffers))[: draw(st.integers(1, 2))]
            buffers.append(alloc.memref)
            call([*sources, alloc.memref])
        elif step == "view":
            source = draw(st.sampled_from(buffers[1:] or buffers))
            typ = source.type
            assert isinstance(typ, MemRefType)
            if len(typ.get_shape()) == 2:
                view = memref.CollapseShapeOp(
                    operands=[source],
                    result_types=[MemRefType(f32, [typ.get_shape()[0] * typ.get_shape()[1]])],
                    properties={"reassociation": _reassociation()},
                )
                block.add_op(view)
                buffers.append(view.result)
        elif step == "copy":
            same = [(a, b) for a in buffers for b in buffers[1:] if a is not b and a.type == b.type]
            if same:
                source, target = draw(st.sampled_from(same))
                block.add_op(memref.CopyOp(source, target))
        else:
            count = draw(st.integers(1, min(3, len(buffers))))
            chosen = draw(st.permutations(buffers))[:count]
            call(chosen)
    call([*buffers[-2:], block.args[1]])
    block.add_op(func.ReturnOp())
    host = func.FuncOp("host", ([a.type for a in block.args], []), Region(block))
    host.attributes["tess.num_outputs"] = IntegerAttr(1, 64)
    module.body.block.add_op(host)
    module.verify()
    return str(module)


def _reassociation():
    from xdsl.dialects.builtin import ArrayAttr, IntegerAttr, i64

    return ArrayAttr([ArrayAttr([IntegerAttr(0, i64), IntegerAttr(1, i64)])])


def logical_buffer(value: SSAValue) -> SSAValue:
    """The alloc or argument behind `value` in the unplanned host (through views)."""
    while isinstance(value.owner, memref.CollapseShapeOp):
        value = value.owner.src
    return value


def physical_bytes(value: SSAValue) -> tuple[int, int, int]:
    """(argument index, first byte, end byte) of `value` in the planned host."""
    owner = value.owner
    while isinstance(owner, memref.CollapseShapeOp):
        value, owner = owner.src, owner.src.owner
    nbytes = memref_bytes(value.type)
    assert nbytes is not None
    if isinstance(owner, memref.ViewOp):
        offset_op = owner.byte_shift.owner
        assert isinstance(offset_op, arith.ConstantOp)
        offset = int(offset_op.value.value.data)  # type: ignore[union-attr]
        assert offset % ALIGNMENT == 0
        space, _, _ = physical_bytes(owner.source)
        return space, offset, offset + nbytes
    assert isinstance(owner, Block), f"a planned buffer made by {owner}"
    return owner.args.index(value), 0, nbytes


def check_plan(unplanned: func.FuncOp, planned: func.FuncOp) -> None:
    """Replay both hosts side by side, each call or copy reading and writing every operand,
    and track which buffer of the unplanned host last wrote each planned byte: a buffer
    must find its bytes as it left them whenever it is used again, and the inputs and
    outputs theirs at the end."""
    touching = (func.CallOp, memref.CopyOp)
    before = [op for op in unplanned.body.block.ops if isinstance(op, touching)]
    after = [op for op in planned.body.block.ops if isinstance(op, touching)]
    assert len(before) == len(after)
    assert not any(isinstance(op, memref.AllocOp) for op in planned.body.block.ops)
    spaces = [np.full(memref_bytes(a.type) or 0, -1) for a in planned.body.block.args]
    arguments = list(unplanned.body.block.args)
    inputs = len(arguments) - attribute(unplanned, "num_outputs")
    ids: dict[SSAValue, int] = {arg: k for k, arg in enumerate(arguments[:inputs])}
    for k in range(inputs):
        spaces[k][:] = k  # out-params hold nothing until they are written
    for old, new in zip(before, after, strict=True):
        touched = [
            (logical_buffer(o), physical_bytes(n))
            for o, n in zip(old.operands, new.operands, strict=False)
        ]
        for k, (buffer, (space, lo, hi)) in enumerate(touched):
            if buffer in ids:  # used before: nobody may have written its bytes since
                assert (spaces[space][lo:hi] == ids[buffer]).all(), f"{buffer} was clobbered"
            for other, (other_space, other_lo, other_hi) in touched[:k]:
                # Two buffers one op touches (opaque calls: no in-place partners).
                if other is not buffer and other_space == space:
                    assert hi <= other_lo or other_hi <= lo, "one op sees two buffers overlap"
        for buffer, (space, lo, hi) in touched:
            ids.setdefault(buffer, len(ids))
            spaces[space][lo:hi] = ids[buffer]
    for k, arg in enumerate(arguments):
        if arg in ids:
            assert (spaces[k] == ids[arg]).all(), f"argument {k} was clobbered"
    workspace = planned.body.block.args[-1]
    arena = memref_bytes(workspace.type) if "tess.workspace_bytes" in planned.attributes else 0
    assert attribute(planned, "arena_bytes") == arena
    assert attribute(planned, "peak_bytes") == attribute(planned, "output_bytes") + arena
    assert attribute(planned, "live_peak_bytes") <= attribute(planned, "peak_bytes")


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(text=random_host())
def test_random_hosts_never_share_live_bytes(text: str) -> None:
    module, unplanned = parse_module(text), parse_module(text)
    TessMemoryPlanPass().apply(make_context(), module)
    module.verify()
    host, before = find_func(module, "host"), find_func(unplanned, "host")
    check_plan(before, host)
    sizes = [
        memref_bytes(op.memref.type) or 0
        for op in before.body.block.ops
        if isinstance(op, memref.AllocOp)
    ]
    assert attribute(host, "unplanned_bytes") == sum(sizes) + attribute(host, "output_bytes")
    # Reuse never costs more than alignment padding.
    assert attribute(host, "arena_bytes") <= sum(-(-n // ALIGNMENT) * ALIGNMENT for n in sizes)


@settings(max_examples=20, deadline=None)
@given(text=random_host())
def test_a_second_run_changes_nothing(text: str) -> None:
    module = parse_module(text)
    TessMemoryPlanPass().apply(make_context(), module)
    text = str(module)
    TessMemoryPlanPass().apply(make_context(), module)
    assert str(module) == text


# ---------------------------------------------------------------------------------------
# codegen and runtime with the proposal patch
# ---------------------------------------------------------------------------------------


def compile_planned(module: ModuleOp, entry: str, spec: str) -> Executable:
    lowered = module.clone()
    run_passes(lowered, spec)
    lowered.verify()
    return Executable(load_source(emit_numba(lowered)), entry)


def check_against_reference(module: ModuleOp, entry: str, spec: str) -> Executable:
    program = compile_planned(module, entry, spec)
    for seed in (0, 1):  # the second call finds the first call's data in the arena
        args = random_inputs(find_func(module, entry), seed)
        expected = interpret(module, entry, [a.copy() for a in args])
        assert_results_match(program(*args), expected)
    return program


@pytest.mark.parametrize("spec", [PLAN_BEFORE_OUTLINE, PLAN_AFTER_OUTLINE])
@settings(max_examples=12, deadline=None, derandomize=True, suppress_health_check=list(HealthCheck))
@given(program=random_program(max_ops=7, max_side=3))
def test_random_programs_run_like_the_reference(program: tuple[ModuleOp, str], spec: str) -> None:
    module, entry = program
    check_against_reference(module, entry, spec)


MLP = """
func.func @loss(%x: tensor<8x4xf32>, %w1: tensor<4x16xf32>, %b1: tensor<16xf32>,
                %w2: tensor<16x3xf32>, %b2: tensor<3xf32>, %labels: tensor<8x3xf32>)
    -> tensor<f32> {
  %0 = tess.matmul %x, %w1 : tensor<8x4xf32>, tensor<4x16xf32> -> tensor<8x16xf32>
  %1 = tess.add %0, %b1 : tensor<8x16xf32>, tensor<16xf32> -> tensor<8x16xf32>
  %h = tess.relu %1 : tensor<8x16xf32>
  %2 = tess.matmul %h, %w2 : tensor<8x16xf32>, tensor<16x3xf32> -> tensor<8x3xf32>
  %logits = tess.add %2, %b2 : tensor<8x3xf32>, tensor<3xf32> -> tensor<8x3xf32>
  %m = tess.reduce_max %logits dims = [1] keepdim : tensor<8x3xf32> -> tensor<8x1xf32>
  %shifted = tess.sub %logits, %m : tensor<8x3xf32>, tensor<8x1xf32> -> tensor<8x3xf32>
  %e = tess.exp %shifted : tensor<8x3xf32>
  %z = tess.sum %e dims = [1] keepdim : tensor<8x3xf32> -> tensor<8x1xf32>
  %lz = tess.log %z : tensor<8x1xf32>
  %logp = tess.sub %shifted, %lz : tensor<8x3xf32>, tensor<8x1xf32> -> tensor<8x3xf32>
  %3 = tess.mul %labels, %logp : tensor<8x3xf32>, tensor<8x3xf32> -> tensor<8x3xf32>
  %4 = tess.sum %3 dims = [1] : tensor<8x3xf32> -> tensor<8xf32>
  %5 = tess.mean %4 dims = [0] : tensor<8xf32> -> tensor<f32>
  %loss = tess.neg %5 : tensor<f32>
  func.return %loss : tensor<f32>
}
"""


@pytest.mark.parametrize("fuse", [True, False])
def test_mlp_gradient_runs_planned_and_peaks_lower(fuse: bool) -> None:
    module = parse_module(MLP)
    run_passes(module, "tess-autodiff{func=loss wrt=1,2,3,4}")
    to_linalg = TO_LINALG if fuse else "tess-to-linalg"
    spec = f"{to_linalg},tess-bufferize,tess-memory-plan,tess-outline-kernels,{LOOPS}"
    check_against_reference(module, "loss_grad", spec)
    planned = module.clone()
    run_passes(planned, f"{to_linalg},tess-bufferize,tess-memory-plan")
    grad = find_func(planned, "loss_grad")
    assert attribute(grad, "peak_bytes") < attribute(grad, "unplanned_bytes")
    assert attribute(grad, "peak_bytes") >= attribute(grad, "live_peak_bytes")


SEED = """
func.func @seed(%a: tensor<3x5x1xf32>, %b: tensor<1x5x4xf32>) -> tensor<3x4xf32> {
  %z = tess.mul %a, %b : tensor<3x5x1xf32>, tensor<1x5x4xf32> -> tensor<3x5x4xf32>
  %s = tess.sum %z dims = [1] : tensor<3x5x4xf32> -> tensor<3x4xf32>
  func.return %s : tensor<3x4xf32>
}
"""


@pytest.mark.parametrize(("pipeline", "peak"), [("cpu", 3 * 4 * 4), ("cpu-unfused", 288)])
def test_seed_peak_is_the_output_alone_when_fused(pipeline: str, peak: int) -> None:
    # Fused, the broadcast (3,5,4) product is never stored; unfused, it is the arena.
    module = parse_module(SEED)
    run_passes(module, get_pipeline(pipeline).passes_to("loops"))
    assert attribute(find_func(module, "seed"), "peak_bytes") == peak


def test_the_workspace_is_allocated_once_and_aligned() -> None:
    module = parse_module(SEED)
    spec = f"tess-to-linalg,tess-bufferize,tess-memory-plan,tess-outline-kernels,{LOOPS}"
    lowered = module.clone()
    run_passes(lowered, spec)
    source = emit_numba(lowered)
    assert '"workspace_bytes": 240' in source
    assert "workspace[0:240].view(np.float32).reshape((3, 5, 4))" in source
    program = Executable(load_source(source), "seed")
    args = random_inputs(find_func(module, "seed"), 0)
    first = program(*args)
    workspace = program.workspace()
    assert workspace.nbytes == 240 and workspace.ctypes.data % ALIGNMENT == 0
    assert_results_match(program(*args), first)
    assert program.workspace() is workspace


# ---------------------------------------------------------------------------------------
# donation
# ---------------------------------------------------------------------------------------

SGD = """
func.func @sgd(%w: tensor<4x8xf32> {tess.donated}, %g: tensor<4x8xf32>,
               %m: tensor<4x8xf32> {tess.donated}) -> (tensor<4x8xf32>, tensor<4x8xf32>) {
  %m2 = tess.mul %m, %g : tensor<4x8xf32>, tensor<4x8xf32> -> tensor<4x8xf32>
  %m3 = tess.add %m2, %g : tensor<4x8xf32>, tensor<4x8xf32> -> tensor<4x8xf32>
  %n = tess.sub %w, %m3 : tensor<4x8xf32>, tensor<4x8xf32> -> tensor<4x8xf32>
  func.return %n, %m3 : tensor<4x8xf32>, tensor<4x8xf32>
}
"""


def test_donated_parameters_are_updated_in_place() -> None:
    module = parse_module(SGD)
    spec = f"tess-to-linalg,tess-bufferize,tess-memory-plan,tess-outline-kernels,{LOOPS}"
    program = compile_planned(module, "sgd", spec)
    assert program.output_aliases == (0, 2)
    w, g, m = random_inputs(find_func(module, "sgd"), 3)
    expected = interpret(module, "sgd", [w.copy(), g.copy(), m.copy()])
    new_w, new_m = program(w, g, m)
    assert_results_match((new_w, new_m), expected)
    assert new_w is w and new_m is m  # updated in place, returned as the outputs

    frozen = w.copy()
    frozen.flags.writeable = False
    new_w, _ = program(frozen, g, m.copy())
    assert new_w is not frozen
    np.testing.assert_array_equal(frozen, w)

    same = g.copy()  # one array as a donated and a plain input: donation copies it
    expected = interpret(module, "sgd", [same.copy(), same.copy(), m.copy()])
    assert_results_match(program(same, same, m.copy()), expected)
