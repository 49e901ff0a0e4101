"""The gpu level (`cuda` pipeline, stage `gpu`): the contract of lowering/gpu/README.md holds
for programs of every kernel shape, and kernel counts are what the shapes promise."""

from __future__ import annotations

import functools

import numpy as np
import pytest
from gpu_interp import poisoned, run_host
from xdsl.dialects import func, gpu, scf
from xdsl.dialects.builtin import IntegerAttr, ModuleOp
from xdsl.ir import Operation

from tessc.compiler import lower_module, print_module
from tessc.context import make_context
from tessc.dialects import contract
from tessc.dialects.gpu_func import GpuFuncOp
from tessc.dialects.gpu_memory import is_workgroup
from tessc.frontend.tess_lang import parse_tess
from tessc.lowering.codegen.numba_ops import dtype_name
from tessc.pipelines import get_pipeline, run_passes
from tessc.reference import interpret, shape_and_dtype

ALLOWED_KERNEL_OPS = ("arith.", "math.", "scf.for", "scf.if", "scf.yield", "gpu.")


def constant(value) -> int:
    owner = value.owner
    assert owner.name == "arith.constant", f"launch size {value} is not a constant"
    assert isinstance(owner.value, IntegerAttr)
    return owner.value.value.data


def depends_on_thread(value) -> bool:
    """Whether `value` is computed from a thread index (a block index is the same for the
    whole block: `tess-gpu-horizontal` runs each member under a condition on it)."""
    seen, todo = set(), [value]
    while todo:
        owner = todo.pop().owner
        if not isinstance(owner, Operation) or owner in seen:
            continue
        seen.add(owner)
        if isinstance(owner, gpu.ThreadIdOp):
            return True
        todo.extend(owner.operands)
    return False


def under_thread_condition(op: Operation, kernel: gpu.FuncOp) -> bool:
    parent = op.parent_op()
    while parent is not None and parent is not kernel:
        if isinstance(parent, scf.IfOp) and depends_on_thread(parent.cond):
            return True
        parent = parent.parent_op()
    return False


def check_gpu_level(module: ModuleOp) -> dict[str, gpu.FuncOp]:
    """Every rule of lowering/gpu/README.md that a walk can check; the kernels by name."""
    module.verify()
    assert "gpu.container_module" in module.attributes
    kernel_modules = [op for op in module.ops if isinstance(op, gpu.ModuleOp)]
    assert [m.sym_name.data for m in kernel_modules] == ["kernels"]
    kernels = {f.sym_name.data: f for f in kernel_modules[0].body.block.ops}
    hosts = {f.sym_name.data for f in module.ops if isinstance(f, func.FuncOp)}
    for function in module.ops:
        if isinstance(function, func.FuncOp):
            assert "tess.kernel" not in function.attributes
            for call in (op for op in function.walk() if isinstance(op, func.CallOp)):
                assert call.callee.string_value() in hosts, "only hosts call hosts"
    launched: set[str] = set()
    for launch in module.walk():
        if not isinstance(launch, gpu.LaunchFuncOp):
            continue
        name = launch.kernel.nested_references.data[0].data
        assert launch.kernel.root_reference.data == "kernels"
        assert name not in launched, "each kernel is launched once"
        launched.add(name)
        kernel = kernels[name]
        assert kernel.kernel is not None
        grid = [constant(v) for v in (launch.gridSizeX, launch.gridSizeY, launch.gridSizeZ)]
        block = [constant(v) for v in (launch.blockSizeX, launch.blockSizeY, launch.blockSizeZ)]
        assert kernel.known_block_size is not None
        if contract.GRID_STRIDE.has(kernel):
            # Blocks stride over x: the runtime may launch fewer (tessc.runtime.cuda_launch),
            # so no grid is promised.
            assert kernel.known_grid_size is None
        else:
            assert kernel.known_grid_size is not None
            assert list(kernel.known_grid_size.get_values()) == grid
        assert list(kernel.known_block_size.get_values()) == block
        assert 1 <= block[0] * block[1] * block[2] <= 1024
        assert [o.type for o in launch.kernelOperands] == list(kernel.function_type.inputs)
    assert launched == set(kernels)
    for kernel in kernels.values():
        # Shared memory is the gpu.func's workgroup attributions (upstream MLIR's spelling; a
        # memref.alloca there would be per-thread memory upstream).
        assert isinstance(kernel, GpuFuncOp)
        inputs = len(kernel.function_type.inputs)
        assert len(kernel.body.block.args) == inputs + kernel.workgroup_count
        assert all(is_workgroup(a.type) for a in kernel.body.block.args[inputs:])
        for op in kernel.body.walk():
            if op.name.startswith("memref."):
                assert op.name in ("memref.load", "memref.store"), op.name
            else:
                assert op.name.startswith(ALLOWED_KERNEL_OPS), op.name
            if isinstance(op, gpu.BarrierOp):
                assert not under_thread_condition(op, kernel), "barrier under a condition"
    return kernels


def gpu_level(source: str) -> ModuleOp:
    module = parse_tess(source)
    lowered = lower_module(module, "gpu", pipeline="cuda")
    text = print_module(lowered)
    from xdsl.parser import Parser

    reparsed = Parser(make_context(), text).parse_module()
    assert print_module(reparsed) == text, "the gpu level prints and parses back alike"
    return lowered


def launch_grid(module: ModuleOp, kernel: str) -> list[int | None]:
    """The grid (x, y, z) of the launch of `kernel`."""
    launch = next(
        op
        for op in module.walk()
        if isinstance(op, gpu.LaunchFuncOp) and op.kernel.nested_references.data[0].data == kernel
    )
    return [constant(v) for v in (launch.gridSizeX, launch.gridSizeY, launch.gridSizeZ)]


def launches(module: ModuleOp, host: str) -> list[str]:
    function = next(f for f in module.ops if isinstance(f, func.FuncOp) and f.sym_name.data == host)
    return [
        op.kernel.nested_references.data[0].data
        for op in function.walk()
        if isinstance(op, gpu.LaunchFuncOp)
    ]


def test_pipeline_stages() -> None:
    cuda = get_pipeline("cuda")
    assert cuda.stages == ("tess", "fused", "buffers", "gpu", "numba")
    assert cuda.ir_stage == "gpu"
    assert "tess-gpu-map" in cuda.passes_to("gpu")
    assert get_pipeline("cpu").stages == ("tess", "fused", "buffers", "loops", "numba")
    with pytest.raises(ValueError, match="does not reach stage 'loops'"):
        cuda.passes_to("loops")


ELEMENTWISE = """
def chain(x: f32[33, 31], y: f32[31]) -> f32[33, 31]:
    return sigmoid(x * y) - 0.5 * x
"""


def test_elementwise_chain_is_one_grid_stride_kernel() -> None:
    module = gpu_level(ELEMENTWISE)
    kernels = check_gpu_level(module)
    assert launches(module, "chain") == ["chain_kernel_0"]
    (kernel,) = kernels.values()
    loops = [op for op in kernel.walk() if isinstance(op, scf.ForOp)]
    assert len(loops) == 1 and loops[0].step.owner.name == "arith.muli"  # grid-stride
    assert not any(isinstance(op, gpu.BarrierOp) for op in kernel.walk())


# -- running the gpu level (tests/gpu_interp.py) against the reference ------------------


@functools.cache
def lowered_source(source: str) -> tuple[ModuleOp, ModuleOp]:
    """A `.tess` source and its gpu level (checked), once per test session."""
    module = parse_tess(source)
    lowered = lower_module(module, "gpu", pipeline="cuda")
    check_gpu_level(lowered)
    return module, lowered


def run_gpu_level(lowered: ModuleOp, entry: str, inputs: list[np.ndarray]) -> list[np.ndarray]:
    """`entry` of a gpu-level module run by the gpu-level interpreter."""
    host = next(f for f in lowered.ops if isinstance(f, func.FuncOp) and f.sym_name.data == entry)
    num_outputs = host.attributes["tess.num_outputs"].value.data
    types = list(host.function_type.inputs)
    outputs = [
        poisoned(t.get_shape(), dtype_name(t.element_type))
        for t in types[len(inputs) : len(inputs) + num_outputs]
    ]
    args = [*inputs, *outputs]
    if "tess.workspace_bytes" in host.attributes:
        args.append(np.zeros(host.attributes["tess.workspace_bytes"].value.data, np.uint8))
    run_host(lowered, entry, args)
    return outputs


def check_against_reference(source: str, entry: str, seed: int = 0, dtype=np.float32) -> ModuleOp:
    module, lowered = lowered_source(source)
    function = next(
        f for f in module.ops if isinstance(f, func.FuncOp) and f.sym_name.data == entry
    )
    rng = np.random.default_rng(seed)
    inputs = [
        rng.standard_normal(t.get_shape()).astype(dtype) for t in function.function_type.inputs
    ]
    expected = interpret(module, entry, inputs)
    got = run_gpu_level(lowered, entry, inputs)
    tolerance = 1e-5 if dtype == np.float32 else 1e-12
    for e, g in zip(expected, got, strict=True):
        np.testing.assert_allclose(g, e, rtol=tolerance * 10, atol=tolerance * 10)
    return module


def test_elementwise_runs_like_the_reference() -> None:
    check_against_reference(ELEMENTWISE, "chain")


REDUCTIONS = """
def seed(a: f32[3, 5, 1], b: f32[1, 5, 4]) -> f32[3, 4]:
    return sum(a * b, dim=1)

def rows(x: f32[7, 33]) -> f32[7]:
    return sum(exp(x), dim=1)

def columns(x: f32[33, 40]) -> f32[40]:
    return sum(x * x, dim=0)

def column_max(x: f32[64, 5]) -> f32[5]:
    return max(x, dim=0)

def middle(x: f32[3, 32, 4]) -> f32[3, 4]:
    return mean(x, dim=1)

def column_mean(x: f32[33, 7]) -> f32[7]:
    return mean(exp(x), dim=0)

def tall(x: f32[1100, 3]) -> f32[3]:
    return mean(x, dim=0)

def whole(x: f32[513]) -> f32[]:
    return sum(x)

def whole_max(x: f32[31, 33]) -> f32[]:
    return max(x)

def one(x: f32[1]) -> f32[]:
    return mean(x)

def short_rows(x: f32[40, 3]) -> f32[40]:
    return max(x * 2.0, dim=1)

def softmax_rows(x: f32[6, 33]) -> f32[6, 33]:
    m = max(x, dim=1, keepdim=True)
    e = exp(x - m)
    return e / sum(e, dim=1, keepdim=True)
"""

REDUCTION_ENTRIES = [
    "seed", "rows", "columns", "column_max", "middle", "column_mean", "tall", "whole",
    "whole_max", "one", "softmax_rows", "short_rows",
]  # fmt: skip


@pytest.mark.parametrize("entry", REDUCTION_ENTRIES)
def test_reductions_run_like_the_reference(entry: str) -> None:
    check_against_reference(REDUCTIONS, entry)


def test_reduction_shapes() -> None:
    module = gpu_level(REDUCTIONS)
    kernels = check_gpu_level(module)
    # A column sum: a 32x8 block (x over 32 consecutive outputs, y over rows), a tree over
    # y in workgroup memory: a barrier after the partials, then one per halving (8 -> 1).
    # (tess-fuse-epilogue leaves a column sum's zero fill a kernel of its own: the
    # partition joins them again.)
    assert launches(module, "columns") == ["columns_kernel_0"]
    columns = kernels["columns_kernel_0"]
    assert list(columns.known_block_size.get_values()) == [32, 8, 1]
    assert sum(isinstance(op, gpu.BarrierOp) for op in columns.walk()) == 4
    # The seed's zip+reduce (a contraction: tess-gpu-contract) is one kernel, no (3,5,4).
    assert launches(module, "seed") == ["seed_kernel_0"]
    assert "3x5x4" not in print_module(module)
    # Softmax over rows (a row-wise CPU kernel): one launch, a block per row.
    assert launches(module, "softmax_rows") == ["softmax_rows_kernel_0"]
    # A column mean: fill, sum and divide, three CPU kernels, are one launch.
    assert launches(module, "column_mean") == ["column_mean_kernel_0"]
    # A tall column mean: 3 shares of 1100 rows (grid y), partials [3, 3], a second pass.
    assert launches(module, "tall") == ["tall_kernel_0_0", "tall_kernel_0_1"]
    assert launch_grid(module, "tall_kernel_0_0") == [1, 3, 1]
    # Three steps per row: one thread per row (tess-gpu-map), no workgroup memory.
    short = kernels[launches(module, "short_rows")[-1]]
    assert short.workgroup_count == 0
    assert not any(isinstance(op, gpu.BarrierOp) for op in short.walk())
    # Row sums: one block of 64 threads per row, a tree over x.
    assert list(kernels["rows_kernel_0"].known_block_size.get_values()) == [64, 1, 1]
    # A whole-tensor sum over 513 elements: partials from 3 blocks, then one block.
    assert launches(module, "whole") == ["whole_kernel_0_0", "whole_kernel_0_1"]
    assert launch_grid(module, "whole_kernel_0_0") == [3, 1, 1]
    assert contract.GRID_STRIDE.has(kernels["whole_kernel_0_0"])  # any grid writes 3 partials


# Small enough for the interpreter (every thread in Python); the 45x33x40 shapes of the
# issue run in the CUDA simulator (tests/cuda). Still: k over three tiles of 16 (a partial
# one), 2x2 output tiles of 64 with partial edges, batches, broadcast operands.
CONTRACTIONS = """
def matmul(a: f32[20, 40], b: f32[40, 19]) -> f32[20, 19]:
    return a @ b

def wide(a: f32[65, 3], b: f32[3, 66]) -> f32[65, 66]:
    return a @ b

def batched(a: f32[2, 5, 33], b: f32[2, 33, 6]) -> f32[2, 5, 6]:
    return a @ b

def dense(x: f32[9, 33], w: f32[33, 20], bias: f32[20]) -> f32[9, 20]:
    return relu(x @ w + bias)

def seed(a: f32[3, 5, 1], b: f32[1, 5, 4]) -> f32[3, 4]:
    return sum(a * b, dim=1)

def small(a: f32[1, 1], b: f32[1, 31]) -> f32[1, 31]:
    return a @ b
"""


@pytest.mark.parametrize("entry", ["matmul", "wide", "batched", "dense", "seed", "small"])
def test_contractions_run_like_the_reference(entry: str) -> None:
    check_against_reference(CONTRACTIONS, entry)


def test_matmul_f64() -> None:
    check_against_reference(CONTRACTIONS.replace("f32", "f64"), "matmul", dtype=np.float64)


def test_contraction_shapes() -> None:
    module = gpu_level(CONTRACTIONS)
    kernels = check_gpu_level(module)
    # The barriers: after the first k tile's loads, one in the loop over the k tiles that
    # have a next one (K > 16), one closing each batch (its next first tile overwrites).
    barriers = {"matmul": 2, "batched": 3, "dense": 2, "seed": 1}
    for entry, count in barriers.items():
        # One launch each: the fill, the contraction and (dense) bias + relu in one kernel.
        assert launches(module, entry) == [f"{entry}_kernel_0"]
        kernel = kernels[f"{entry}_kernel_0"]
        assert list(kernel.known_block_size.get_values()) == [16, 16, 1]
        tiles = kernel.workgroup_buffers
        # Double-buffered [buffer, k, 64 + padding] tiles.
        assert [t.type.get_shape() for t in tiles] == [(2, 16, 68), (2, 16, 68)]
        assert sum(isinstance(op, gpu.BarrierOp) for op in kernel.walk()) == count
    assert list(kernels["wide_kernel_0"].known_grid_size.get_values()) == [2, 2, 1]
    assert list(kernels["batched_kernel_0"].known_grid_size.get_values()) == [1, 1, 2]
    dense = print_module(module).split('sym_name = "dense_kernel_0"')[0].rsplit("gpu.func", 1)[1]
    assert "arith.maximumf" in dense  # relu, fused


# Tall-skinny: one 64 x 64 output tile, K = 256 (16 k tiles, >= 4 x 30): split-K.
TALL = """
def tall(a: f32[20, 256], b: f32[256, 30], c: f32[30]) -> f32[20, 30]:
    return relu(a @ b + c)

def square(a: f32[20, 48], b: f32[48, 30]) -> f32[20, 30]:
    return a @ b
"""


def test_tall_skinny_contractions_split_k() -> None:
    module = gpu_level(TALL)
    kernels = check_gpu_level(module)
    # 4 slices of 4 k tiles over grid z into partials, then their sum with bias and relu.
    assert launches(module, "tall") == ["tall_kernel_0_0", "tall_kernel_0_1"]
    assert launch_grid(module, "tall_kernel_0_0") == [1, 1, 4]
    first = kernels["tall_kernel_0_0"]
    assert [t.type.get_shape() for t in first.workgroup_buffers] == [(2, 16, 68), (2, 16, 68)]
    assert contract.UNSIGNED_INDICES.has(first)
    second = print_module(module).split('sym_name = "tall_kernel_0_1"')[0].rsplit("gpu.func", 1)[1]
    assert "arith.maximumf" in second and "memref<4x20x30xf32>" in second
    # K = 48 is not many times the output's dims: one launch.
    assert launches(module, "square") == ["square_kernel_0"]


GRADIENTS = """
def loss(x: f64[5, 6], w1: f64[6, 7], b1: f64[7], w2: f64[7, 3]) -> f64[]:
    h = relu(x @ w1 + b1)
    z = tanh(h @ w2)
    return mean(sum(z * z, dim=1, keepdim=True) + sum(exp(z), dim=0, keepdim=True))
"""


def test_mlp_gradients_run_like_the_reference() -> None:
    # The autodiff level's @loss_grad lowered like any program: transposed matmuls
    # (contractions with other maps), broadcast gradients summed back (column sums).
    module = parse_tess(GRADIENTS)
    run_passes(module, "tess-autodiff{func=loss wrt=1,2,3}")
    source = print_module(module)
    lowered = lower_module(module, "gpu", pipeline="cuda")
    kernels = check_gpu_level(lowered)
    assert any(list(k.known_block_size.get_values()) == [16, 16, 1] for k in kernels.values())
    rng = np.random.default_rng(1)
    inputs = [rng.standard_normal(s) for s in ((5, 6), (6, 7), (7,), (7, 3))]
    expected = interpret(module, "loss_grad", inputs)
    got = run_gpu_level(lowered, "loss_grad", inputs)
    assert len(got) == 4 and source
    for e, g in zip(expected, got, strict=True):
        np.testing.assert_allclose(g, e, rtol=1e-10, atol=1e-12)


def test_a_program_without_kernels_is_at_the_gpu_level() -> None:
    module = gpu_level("def f(x: f32[4, 5]) -> f32[20]:\n    return reshape(x, [20])\n")
    assert check_gpu_level(module) == {}


@pytest.mark.parametrize("seed", range(4))
def test_random_programs_and_their_gradients(seed: int) -> None:
    """tessc.fuzz's random programs (f64, differentiable), each with its `tess-autodiff`
    gradient, through the gpu level against the reference."""
    import random

    from xdsl.parser import Parser

    from tessc.fuzz.programs import generate

    for k in range(3):
        program = generate(random.Random(100 * seed + k), ops=8, dtype="f64", smooth=True)
        module = Parser(make_context(), program.text()).parse_module()
        function = next(f for f in module.ops if isinstance(f, func.FuncOp))
        entry = function.sym_name.data
        arguments = [shape_and_dtype(t) for t in function.function_type.inputs]
        outputs = [t.get_shape() for t in function.function_type.outputs]
        # Integer arguments (labels, indices) are inputs, not variables: as in tessc.fuzz,
        # the gradient is taken with respect to the float arguments only.
        floats = [i for i, (_, dtype) in enumerate(arguments) if np.dtype(dtype).kind == "f"]
        if not floats:
            continue
        wrt = ",".join(str(i) for i in floats)
        run_passes(module, f"tess-autodiff{{func={entry} wrt={wrt}}}")
        rng = np.random.default_rng(seed)
        inputs = [
            rng.standard_normal(shape)
            if np.dtype(dtype).kind == "f"
            else rng.integers(-6, 7, size=shape).astype(dtype)
            for shape, dtype in arguments
        ]
        seeds = [rng.uniform(-1, 1, size=s) for s in outputs if int(np.prod(s)) != 1]
        lowered = lower_module(module, "gpu", pipeline="cuda")
        for name, args in ((entry, inputs), (f"{entry}_grad", [*inputs, *seeds])):
            expected = interpret(module, name, args)
            got = run_gpu_level(lowered, name, args)
            for e, g in zip(expected, got, strict=True):
                np.testing.assert_allclose(g, e, rtol=1e-9, atol=1e-9, err_msg=program.text())


INDEXING = """
func.func @take(%x: tensor<5x3xf32>, %i: tensor<4xi64>) -> tensor<4x3xf32> {
  %0 = tess.take %x, %i dim = [0] : tensor<5x3xf32>, tensor<4xi64> -> tensor<4x3xf32>
  %1 = tess.exp %0 : tensor<4x3xf32>
  func.return %1 : tensor<4x3xf32>
}
func.func @one_hot_argmax(%x: tensor<4x10xf32>, %l: tensor<4xi32>)
    -> (tensor<4x10xf32>, tensor<4xi64>) {
  %0 = tess.one_hot %l : tensor<4xi32> -> tensor<4x10xf32>
  %1 = tess.sub %x, %0 : tensor<4x10xf32>, tensor<4x10xf32> -> tensor<4x10xf32>
  %2 = tess.argmax %x dim = [1] : tensor<4x10xf32> -> tensor<4xi64>
  func.return %1, %2 : tensor<4x10xf32>, tensor<4xi64>
}
"""


def test_gathers_and_argmax_run_like_the_reference() -> None:
    # A gather's data-dependent loads in a kernel body; argmax, a two-result reduction,
    # through tess-gpu-map's one-thread-per-output fallback.
    from xdsl.parser import Parser

    module = Parser(make_context(), INDEXING).parse_module()
    lowered = lower_module(module, "gpu", pipeline="cuda")
    check_gpu_level(lowered)
    rng = np.random.default_rng(3)
    x = rng.standard_normal((5, 3)).astype(np.float32)
    cases = {
        "take": [x, np.array([4, 0, 2, 2], np.int64)],
        "one_hot_argmax": [
            rng.standard_normal((4, 10)).astype(np.float32),
            np.array([9, 0, 3, 3], np.int32),
        ],
    }
    for entry, inputs in cases.items():
        expected = interpret(module, entry, inputs)
        got = run_gpu_level(lowered, entry, inputs)
        for e, g in zip(expected, got, strict=True):
            np.testing.assert_allclose(g, e, rtol=1e-6)


def index_function(build) -> func.FuncOp:
    """A function whose body `build(body)` emits, its constants at the top."""
    from xdsl.ir import Block, Region

    from tessc.lowering.gpu.gpu_common import Body, Constants

    block, constants = Block(), Constants()
    build(Body(block, constants))
    for op in reversed(constants.ops):
        block.insert_op_before(op, block.first_op) if block.first_op else block.add_op(op)
    block.add_op(func.ReturnOp())
    return func.FuncOp("f", ((), ()), Region(block))


def test_non_negative_indices_proves_ids_and_loops_and_refutes_a_subtraction() -> None:
    from xdsl.dialects import arith

    from tessc.lowering.gpu.gpu_common import non_negative_indices

    def strided(b) -> None:
        tx = b.thread_id("x")

        def body(bl, i, _) -> tuple:
            bl.remui(bl.add(i, tx), bl.c(7))
            return ()

        b.loop(tx, b.c(100), b.c(32), body)

    def subtracted(b) -> None:
        tx = b.thread_id("x")
        b.add_op(arith.SubiOp(tx, b.c(1)))

    def negative_start(b) -> None:
        b.loop(b.c(-1), b.c(100), b.c(1), lambda bl, i, _: ())

    assert non_negative_indices(index_function(strided))
    assert not non_negative_indices(index_function(subtracted))
    assert not non_negative_indices(index_function(negative_start))
