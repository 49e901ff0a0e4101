"""
tess-fuse-epilogue and the kernel.group it makes, down to one kernel with a shared row loop:

- the `kernel` dialect: custom and generic forms round-trip, the verifier;
- the grouping decisions and the kernel counts after outlining (matmul + bias + relu,
  softmax, layer norm, an MLP forward) in the cpu pipeline;
- nest fusion in tess-linalg-to-loops: the legality test on its own, and on kernels;
- the cpu pipeline against the reference interpreter on hypothesis-drawn shapes and on
  `random_program` programs (derandomized, so the kernel cache makes reruns cheap).
"""

from __future__ import annotations

from collections.abc import Callable

import pytest
from hypothesis import given
from hypothesis import strategies as st
from xdsl.dialects import func, scf
from xdsl.dialects.builtin import ModuleOp, StringAttr
from xdsl.dialects.linalg.ops import GenericOp
from xdsl.ir import SSAValue
from xdsl.ir.affine import AffineMap
from xdsl.parser import Parser
from xdsl.utils.exceptions import VerifyException

from tessc.compiler import compile_module, lower_module, print_module
from tessc.context import make_context
from tessc.dialects import contract
from tessc.dialects.builder import TessBuilder, build_function, build_module
from tessc.dialects.kernel import GroupOp
from tessc.lowering.buffers.outline_kernels import is_kernel
from tessc.lowering.fusion.fuse_epilogue import TessFuseEpiloguePass
from tessc.lowering.linalg.loop_nests import Access, LoopNestPlan, NestSummary, shared_outer_loops
from tessc.lowering.loops.linalg_to_loops import TessLinalgToLoopsPass
from tessc.pipelines import get_pipeline, run_passes
from tessc.reference import interpret

from helpers import (
    assert_results_match,
    compiled_examples,
    random_inputs,
    random_program,
    tensor_type,
)

DTYPES = ["f32", "f64"]


def parse(text: str) -> ModuleOp:
    return Parser(make_context(), text).parse_module()


def entry(module: ModuleOp) -> func.FuncOp:
    return next(op for op in module.ops if isinstance(op, func.FuncOp))


def check(module: ModuleOp, seed: int = 0, **codegen: int) -> None:
    """The cpu pipeline's results equal the reference interpreter's."""
    function = entry(module)
    name = function.sym_name.data
    args = random_inputs(function, seed)
    expected = interpret(module, name, args)
    assert_results_match(compile_module(module, name, "cpu", **codegen)(*args), expected)


def kernels(module: ModuleOp, pipeline: str = "cpu") -> list[func.FuncOp]:
    """The kernel functions `pipeline` outlines from `module`."""
    lowered = lower_module(module, "loops", pipeline=pipeline)
    return [op for op in lowered.ops if isinstance(op, func.FuncOp) and is_kernel(op)]


GROUP_TO_LOOPS = (
    "tess-to-linalg,tess-fuse,tess-fuse-epilogue,tess-bufferize,tess-outline-kernels,"
    "tess-linalg-to-loops"
)
"""The passes that make and lower groups, without the cpu pipeline's tiling and cleanups."""


def untiled_kernels(module: ModuleOp) -> list[func.FuncOp]:
    lowered = module.clone()
    run_passes(lowered, GROUP_TO_LOOPS)
    lowered.verify()
    return [op for op in lowered.ops if isinstance(op, func.FuncOp) and is_kernel(op)]


def grouped(module: ModuleOp, **options: bool) -> ModuleOp:
    lowered = lower_module(module, "fused", pipeline="cpu-unfused")
    run_passes(lowered, "tess-fuse")
    TessFuseEpiloguePass(**options).apply(make_context(), lowered)
    lowered.verify()
    return lowered


def groups(module: ModuleOp) -> list[GroupOp]:
    return [op for op in module.walk() if isinstance(op, GroupOp)]


def parallel_loops(function: func.FuncOp) -> list[scf.ParallelOp]:
    return [op for op in function.walk() if isinstance(op, scf.ParallelOp)]


# ---------------------------------------------------------------------------------------
# programs
# ---------------------------------------------------------------------------------------

Body = Callable[..., SSAValue]


def module_of(name: str, shapes: list[tuple[int, ...]], body: Body, dtype: str = "f32") -> ModuleOp:
    types = [tensor_type(shape, dtype) for shape in shapes]
    return build_module(build_function(name, types, body))


def dense_relu(n: int, k: int, m: int, dtype: str = "f32") -> ModuleOp:
    def body(b: TessBuilder, x: SSAValue, w: SSAValue, bias: SSAValue) -> SSAValue:
        return b.relu(b.add(b.matmul(x, w), bias))

    return module_of("dense_relu", [(n, k), (k, m), (m,)], body, dtype)


def softmax(shape: tuple[int, ...], dim: int, dtype: str = "f32") -> ModuleOp:
    def body(b: TessBuilder, x: SSAValue) -> SSAValue:
        e = b.exp(b.sub(x, b.reduce_max(x, dim, keepdim=True)))
        return b.div(e, b.sum(e, dim, keepdim=True))

    return module_of("softmax", [shape], body, dtype)


def layer_norm(rows: int, cols: int, dtype: str = "f32") -> ModuleOp:
    def body(b: TessBuilder, x: SSAValue, gamma: SSAValue) -> SSAValue:
        centred = b.sub(x, b.mean(x, 1, keepdim=True))
        variance = b.mean(b.mul(centred, centred), 1, keepdim=True)
        return b.mul(b.div(centred, b.sqrt(b.add(variance, 1e-5))), gamma)

    return module_of("layer_norm", [(rows, cols), (cols,)], body, dtype)


def mlp(batch: int, features: int, hidden: int, classes: int, dtype: str = "f32") -> ModuleOp:
    """Two dense layers (relu between them), then a softmax over the classes."""

    def body(b: TessBuilder, x: SSAValue, *params: SSAValue) -> SSAValue:
        w1, b1, w2, b2 = params
        logits = b.add(b.matmul(b.relu(b.add(b.matmul(x, w1), b1)), w2), b2)
        e = b.exp(b.sub(logits, b.reduce_max(logits, 1, keepdim=True)))
        return b.div(e, b.sum(e, 1, keepdim=True))

    shapes = [(batch, features), (features, hidden), (hidden,), (hidden, classes), (classes,)]
    return module_of("mlp", shapes, body, dtype)


def batched_matmul_sigmoid(batch: int, n: int, k: int, m: int, dtype: str = "f32") -> ModuleOp:
    def body(b: TessBuilder, x: SSAValue, w: SSAValue) -> SSAValue:
        return b.sigmoid(b.matmul(x, w))

    return module_of("bmm", [(batch, n, k), (k, m)], body, dtype)


# ---------------------------------------------------------------------------------------
# the kernel dialect
# ---------------------------------------------------------------------------------------

GROUP_TEXT = """
#id = affine_map<(d0, d1) -> (d0, d1)>
func.func @f(%x: tensor<4x8xf32>) -> tensor<4x8xf32> {
  %r = kernel.group -> (tensor<4x8xf32>) attributes {tess.grouped = ["tess.neg"]} {
    %e = tensor.empty() : tensor<4x8xf32>
    %n = linalg.generic {indexing_maps = [#id, #id], iterator_types = ["parallel", "parallel"]}
        ins(%x : tensor<4x8xf32>) outs(%e : tensor<4x8xf32>) {
    ^bb0(%a: f32, %o: f32):
      %v = arith.negf %a : f32
      linalg.yield %v : f32
    } -> tensor<4x8xf32>
    kernel.yield %n : tensor<4x8xf32>
  }
  func.return %r : tensor<4x8xf32>
}

func.func @g(%x: memref<4x8xf32>, %out: memref<4x8xf32>) {
  kernel.group {
    linalg.generic {indexing_maps = [#id, #id], iterator_types = ["parallel", "parallel"]}
        ins(%x : memref<4x8xf32>) outs(%out : memref<4x8xf32>) {
    ^bb0(%a: f32, %o: f32):
      linalg.yield %a : f32
    }
  }
  func.return
}
"""


def generic_form(module: ModuleOp) -> str:
    from io import StringIO

    from xdsl.printer import Printer

    stream = StringIO()
    Printer(stream=stream, print_generic_format=True).print_op(module)
    return stream.getvalue()


def test_group_round_trips_in_custom_and_generic_form() -> None:
    module = parse(GROUP_TEXT)
    module.verify()
    text = print_module(module)
    assert "kernel.group -> (tensor<4x8xf32>) attributes {" in text
    assert "kernel.yield %n : tensor<4x8xf32>" in text
    # On memrefs the group yields nothing and its terminator is implicit.
    assert "kernel.group {" in text and text.count("kernel.yield") == 1
    assert print_module(parse(text)) == text
    generic = generic_form(module)
    assert '"kernel.group"() ({' in generic and '"kernel.yield"() : () -> ()' in generic
    assert print_module(parse(generic)) == text


@pytest.mark.parametrize(
    "body, message",
    [
        (
            "kernel.yield %x : tensor<4x8xf32>",
            None,  # yielding a value from outside is allowed
        ),
        ("kernel.yield", "yields () but its results are (tensor<4x8xf32>)"),
        (
            '%t = "tensor.extract_slice"(%x) <{static_offsets = array<i64: 0, 0>, '
            "static_sizes = array<i64: 4, 8>, static_strides = array<i64: 1, 1>, "
            "operandSegmentSizes = array<i32: 1, 0, 0, 0>}> : (tensor<4x8xf32>) -> "
            "tensor<4x8xf32>\n kernel.yield %t : tensor<4x8xf32>",
            "may hold only linalg ops, tensor.empty and arith.constant, not 'tensor.extract_slice'",
        ),
    ],
)
def test_group_verifier(body: str, message: str | None) -> None:
    module = parse(
        f"""
func.func @f(%x: tensor<4x8xf32>) -> tensor<4x8xf32> {{
  %r = kernel.group -> (tensor<4x8xf32>) {{
    {body}
  }}
  func.return %r : tensor<4x8xf32>
}}"""
    )
    if message is None:
        module.verify()
        return
    with pytest.raises(VerifyException, match=message.replace("(", r"\(").replace(")", r"\)")):
        module.verify()


def test_yield_outside_a_group_is_rejected() -> None:
    module = parse(
        """
func.func @f(%x: tensor<4xf32>) -> tensor<4xf32> {
  "kernel.yield"(%x) : (tensor<4xf32>) -> ()
}"""
    )
    with pytest.raises(VerifyException, match="kernel.group"):
        module.verify()


# ---------------------------------------------------------------------------------------
# grouping decisions and kernel counts
# ---------------------------------------------------------------------------------------


def test_cpu_pipeline_runs_the_pass_after_tess_fuse() -> None:
    # After tess-fuse; only tess-attention-views (attention kernels reading and writing
    # through the transposing copies around them, which it removes), tess-pack-narrow (a
    # transposed copy of a narrow matmul operand) and tess-cse-generics (merging the copies
    # it repeats) may run between them.
    passes = get_pipeline("cpu").spec.split(",")
    between = passes[passes.index("tess-fuse") + 1 : passes.index("tess-fuse-epilogue")]
    assert set(between) <= {"tess-attention-views", "tess-pack-narrow", "tess-cse-generics"}


def test_matmul_bias_relu_is_one_kernel() -> None:
    module = dense_relu(6, 5, 7)
    assert len(kernels(module, "cpu-unfused")) == 4  # fill, matmul, add, relu
    assert len(kernels(module)) == 1
    (kernel,) = untiled_kernels(module)
    # One scf.parallel over rows holding, for row i, the fill, the matmul's k-j nest and
    # the bias + relu: three loop nests, nothing else.
    (loop,) = parallel_loops(kernel)
    assert len(loop.body.block.args) == 1
    nests = [op for op in loop.body.block.ops if isinstance(op, scf.ForOp)]
    assert len(nests) == 3
    others = [op.name for op in loop.body.block.ops if op not in nests]
    assert set(others) <= {"arith.constant", "scf.reduce"}
    epilogue = [op.name for op in nests[2].walk()]
    assert "arith.addf" in epilogue and "arith.maximumf" in epilogue


def test_kernel_counts() -> None:
    assert len(kernels(dense_relu(6, 5, 7))) == 1
    assert len(kernels(softmax((5, 9), 1))) == 1
    assert len(kernels(layer_norm(5, 9))) == 1
    assert len(kernels(mlp(8, 5, 7, 3))) == 1
    assert len(kernels(batched_matmul_sigmoid(2, 3, 4, 5))) == 1


def group_labels(module: ModuleOp) -> list[list[str]]:
    return [labels for g in groups(module) if (labels := contract.GROUPED.get(g)) is not None]


def test_groups_of_an_mlp() -> None:
    fill = "linalg.fill"
    layer1 = [fill, "tess.matmul", "tess.relu"]
    softmax_ops = [fill, "tess.reduce_max", "tess.exp", fill, "tess.sum", "tess.div"]
    module = grouped(mlp(8, 5, 7, 3), report=True)
    assert group_labels(module) == [[*layer1, fill, "tess.matmul", *softmax_ops]]
    # Without chained reductions every reduction roots its own group; the second layer's
    # bias add went into the max and the exp (tess-fuse duplicates a cheap producer).
    module = grouped(mlp(8, 5, 7, 3), chain_reductions=False, report=True)
    assert group_labels(module) == [
        layer1,
        [fill, "tess.matmul"],
        softmax_ops[:3],
        softmax_ops[3:],
    ]
    refused = [op for op in module.walk() if contract.GROUP_REFUSED.has(op)]
    assert [str(op.attributes[contract.GROUP_REFUSED.name]) for op in refused] == [
        '"not grouped with tess.matmul: a further matmul (chain-reductions=false)"',
        '"not grouped with tess.matmul: a further reduction (chain-reductions=false)"',
        '"not grouped with tess.reduce_max: a further reduction (chain-reductions=false)"',
    ]


def test_softmax_over_the_leading_dim_shares_no_rows() -> None:
    # A column max (the reduction loop outside the parallel one) has no rows to share; its
    # consumers, which have parallel loops, stay kernels of their own. Each reduction's
    # constant fill (the max's -inf, the sum's zeros), read by it alone, runs in its kernel.
    module = grouped(softmax((5, 9), 0), report=True)
    assert group_labels(module) == [
        ["linalg.fill", "tess.reduce_max"],
        ["linalg.fill", "tess.sum"],
    ]
    reasons = [
        op.attributes[contract.GROUP_REFUSED.name]
        for op in module.walk()
        if isinstance(op, GenericOp) and contract.GROUP_REFUSED.has(op)
    ]
    assert reasons and all(
        isinstance(r, StringAttr) and "has parallel loops" in r.data for r in reasons
    )


def test_consumer_reading_other_rows_is_refused() -> None:
    def body(b: TessBuilder, x: SSAValue, w: SSAValue) -> SSAValue:
        product = b.matmul(x, w)
        return b.add(product, b.transpose(product))

    module = grouped(module_of("sym", [(4, 6), (6, 4)], body), report=True)
    assert group_labels(module) == [["linalg.fill", "tess.matmul"]]
    (refused,) = [op for op in module.walk() if contract.GROUP_REFUSED.has(op)]
    assert "shares 0 of the group's 1 outer parallel loops" in str(refused.attributes)


def test_ops_between_members_that_read_nothing_of_the_group_stay_before_it() -> None:
    def body(b: TessBuilder, x: SSAValue, w: SSAValue, y: SSAValue) -> SSAValue:
        product = b.matmul(x, w)
        row_sums = b.sum(y, 1, keepdim=True)  # reads nothing of the matmul's group
        return b.add(product, row_sums)

    module = module_of("between", [(4, 6), (6, 5), (4, 5)], body)
    fused = grouped(module, report=True)
    assert group_labels(fused) == [
        ["linalg.fill", "tess.sum"],
        ["linalg.fill", "tess.matmul", "tess.add"],
    ]
    check(module)


def test_group_result_read_by_a_later_op_in_place() -> None:
    # The group's result is the init of a later reduction (writable in place) and is
    # returned as well.
    def body(b: TessBuilder, x: SSAValue, w: SSAValue) -> tuple[SSAValue, SSAValue]:
        hidden = b.relu(b.matmul(x, w))
        return hidden, b.sum(hidden, 0)

    check(module_of("reuse", [(4, 6), (6, 5)], body))


def allocs(module: ModuleOp, in_place: bool) -> int:
    lowered = module.clone()
    spec = f"tess-to-linalg,tess-fuse,tess-fuse-epilogue{{in-place={str(in_place).lower()}}}"
    run_passes(lowered, f"{spec},tess-bufferize")
    return sum(op.name == "memref.alloc" for op in lowered.walk())


def test_epilogue_overwrites_the_matmul_result_in_place() -> None:
    module = dense_relu(6, 5, 7)
    assert allocs(module, in_place=False) == 1  # the matmul's result
    assert allocs(module, in_place=True) == 0  # all three write the out-param
    labels = group_labels(grouped(module, report=True))
    assert labels == [["linalg.fill", "tess.matmul", "tess.relu"]]
    (group,) = groups(grouped(module, report=True))
    assert contract.IN_PLACE.get(group) == ["tess.relu"]


def test_no_in_place_when_the_input_is_read_elsewhere() -> None:
    def body(b: TessBuilder, x: SSAValue, w: SSAValue, bias: SSAValue) -> tuple[SSAValue, ...]:
        product = b.matmul(x, w)
        return b.relu(b.add(product, bias)), product

    module = module_of("both", [(4, 6), (6, 5), (5,)], body)
    (group,) = groups(grouped(module, report=True))
    assert not contract.IN_PLACE.has(group)
    assert len(group.res) == 2
    check(module)


# ---------------------------------------------------------------------------------------
# nest fusion: the legality test
# ---------------------------------------------------------------------------------------


def nest(
    order: tuple[int, ...], num_parallel: int, ranges: tuple[int, ...], *accesses: Access
) -> NestSummary:
    return NestSummary(LoopNestPlan(order, num_parallel), ranges, accesses)


def amap(function: Callable[..., tuple[object, ...]]) -> AffineMap:
    return AffineMap.from_callable(function)


def test_shared_outer_loops_rows_of_a_matmul_and_its_epilogue() -> None:
    c_write = Access("C", amap(lambda i, j, k: (i, j)), True)
    matmul = nest((0, 2, 1), 1, (4, 5, 6), c_write)
    epilogue = nest((0, 1), 2, (4, 5), Access("C", amap(lambda i, j: (i, j)), False))
    assert shared_outer_loops(matmul, epilogue, 8) == 1
    transposed = nest((0, 1), 2, (5, 4), Access("C", amap(lambda i, j: (j, i)), False))
    assert shared_outer_loops(matmul, transposed, 8) == 0
    other_rows = nest((0, 1), 2, (4, 5), Access("C", amap(lambda i, j: (0, j)), False))
    assert shared_outer_loops(matmul, other_rows, 8) == 0
    longer = nest((0, 1), 2, (3, 5), Access("C", amap(lambda i, j: (i, j)), False))
    assert shared_outer_loops(matmul, longer, 8) == 0  # extents differ


def test_shared_outer_loops_needs_a_writer() -> None:
    reads_x = nest((0, 1), 2, (4, 5), Access("X", amap(lambda i, j: (i, j)), False))
    reads_x_transposed = nest((0, 1), 2, (4, 5), Access("X", amap(lambda i, j: (j, i)), False))
    assert shared_outer_loops(reads_x, reads_x_transposed, 8) == 2
    # A later write of what an earlier nest reads at other rows is a conflict as well.
    writes_x_transposed = nest((0, 1), 2, (4, 5), Access("X", amap(lambda i, j: (j, i)), True))
    assert shared_outer_loops(reads_x, writes_x_transposed, 8) == 0
    assert shared_outer_loops(reads_x, writes_x_transposed, 0) == 0


def test_outer_loops_skip_unit_extents() -> None:
    init = nest((1, 0), 2, (4, 1), Access("M", amap(lambda i, j: (i, j)), True))
    assert init.outer_loops == (0,)


TWO_NEST_KERNEL = """
#read = affine_map<(d0, d1) -> (d1, d0)>
#id = affine_map<(d0, d1) -> (d0, d1)>
func.func private @k(%a: memref<4x5xf32>, %t: memref<4x5xf32>, %out: memref<5x4xf32>)
    attributes {tess.kernel} {
  linalg.generic {indexing_maps = [#id, #id], iterator_types = ["parallel", "parallel"]}
      ins(%a : memref<4x5xf32>) outs(%t : memref<4x5xf32>) {
  ^bb0(%x: f32, %o: f32):
    %y = arith.negf %x : f32
    linalg.yield %y : f32
  }
  linalg.generic {indexing_maps = [#read, #id], iterator_types = ["parallel", "parallel"]}
      ins(%t : memref<4x5xf32>) outs(%out : memref<5x4xf32>) {
  ^bb0(%x: f32, %o: f32):
    linalg.yield %x : f32
  }
  func.return
}
"""


@pytest.mark.parametrize("read", ["(d1, d0)", "(d0, d1)"])
def test_kernel_nests_share_loops_only_when_legal(read: str) -> None:
    text = TWO_NEST_KERNEL
    if read == "(d0, d1)":  # the second nest reads row i at row i: legal to share
        text = text.replace("-> (d1, d0)>", "-> (d0, d1)>")
        text = text.replace("memref<5x4xf32>", "memref<4x5xf32>")
    module = parse(text)
    TessLinalgToLoopsPass().apply(make_context(), module)
    module.verify()
    loops = parallel_loops(entry(module))
    assert len(loops) == (1 if read == "(d0, d1)" else 2)
    unfused = parse(text)
    TessLinalgToLoopsPass(fuse_nests=False).apply(make_context(), unfused)
    assert len(parallel_loops(entry(unfused))) == 2


# ---------------------------------------------------------------------------------------
# the cpu pipeline against the reference
# ---------------------------------------------------------------------------------------

SIDES = st.integers(1, 7)


@pytest.mark.parametrize("dtype", DTYPES)
@given(sizes=st.tuples(SIDES, SIDES, SIDES))
@compiled_examples(4)
def test_dense_relu_matches_reference(dtype: str, sizes: tuple[int, int, int]) -> None:
    module = dense_relu(*sizes, dtype)
    check(module, parallel_threshold=0)


@pytest.mark.parametrize("dtype", DTYPES)
@given(data=st.data())
@compiled_examples(4)
def test_softmax_matches_reference(dtype: str, data: st.DataObject) -> None:
    shape = data.draw(st.lists(SIDES, min_size=1, max_size=3).map(tuple), label="shape")
    dim = data.draw(st.integers(0, len(shape) - 1), label="dim")
    check(softmax(shape, dim, dtype), parallel_threshold=0)


@given(sizes=st.tuples(SIDES, SIDES))
@compiled_examples(3)
def test_layer_norm_matches_reference(sizes: tuple[int, int]) -> None:
    check(layer_norm(*sizes, "f64"), parallel_threshold=0)


@given(sizes=st.tuples(SIDES, SIDES, SIDES, SIDES))
@compiled_examples(3)
def test_mlp_matches_reference(sizes: tuple[int, int, int, int]) -> None:
    check(mlp(*sizes), parallel_threshold=0)


@given(sizes=st.tuples(st.integers(1, 3), SIDES, SIDES, SIDES))
@compiled_examples(3)
def test_batched_matmul_epilogue_matches_reference(sizes: tuple[int, int, int, int]) -> None:
    check(batched_matmul_sigmoid(*sizes), parallel_threshold=0)


def test_large_shapes_with_default_codegen() -> None:
    """Above the parallel threshold: the shared row loop is a prange."""
    check(mlp(300, 20, 64, 10))
    check(softmax((257, 300), 1))


@given(program=random_program(min_ops=3, max_ops=8, kinds=("unary", "binary", "reduce", "matmul")))
@compiled_examples(12)
def test_random_reduction_programs(program: tuple[ModuleOp, str]) -> None:
    check(program[0], parallel_threshold=0)


@given(program=random_program(max_ops=7))
@compiled_examples(8)
def test_random_programs(program: tuple[ModuleOp, str]) -> None:
    check(program[0], parallel_threshold=0)


def test_random_programs_form_groups() -> None:
    """The random-program tests above exercise grouping: most such programs have a group."""
    strategy = random_program(min_ops=3, max_ops=8, kinds=("unary", "binary", "reduce", "matmul"))
    found = 0

    @given(program=strategy)
    @compiled_examples(12)
    def count(program: tuple[ModuleOp, str]) -> None:
        nonlocal found
        found += bool(groups(grouped(program[0])))

    count()
    assert found >= 5


def test_lowering_is_deterministic() -> None:
    module = mlp(8, 5, 7, 3)
    assert print_module(lower_module(module, "loops")) == print_module(
        lower_module(module, "loops")
    )
