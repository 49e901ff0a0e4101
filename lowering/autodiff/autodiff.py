"""
`tess-autodiff`: reverse-mode automatic differentiation of a `tess` function (level 1 -> 2).

`tess-autodiff{func=f wrt=0,1}` adds, right after `@f`,

    func.func @f_grad(<f's arguments>..., <one seed per non-scalar result>...)
        -> (<f's results>..., <the gradient of each argument in wrt>...)

in the same dialect, so gradients go through the same fusion and lowering as any other code.
A one-element differentiated result has seed 1; `results=...` picks the differentiated
results (the others are returned unchanged, like JAX's auxiliary outputs). Textbook reverse
mode on straight-line SSA (inline calls, activity analysis, adjoints walked backwards through
`vjp_rules.VJP_RULES`, then dce and cse); the steps are in lowering/autodiff/README.md.
Applying it to `@f_grad` differentiates again. xDSL has no automatic differentiation.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import NoReturn

from xdsl.builder import Builder
from xdsl.context import Context
from xdsl.dialects import func
from xdsl.dialects.builtin import ModuleOp, TensorType
from xdsl.ir import Block, Operation, Region, SSAValue
from xdsl.passes import ModulePass
from xdsl.rewriter import InsertPoint
from xdsl.traits import SymbolTable
from xdsl.transforms.common_subexpression_elimination import cse
from xdsl.transforms.dead_code_elimination import region_dce
from xdsl.utils.exceptions import PassFailedException

from tessc.dialects.functions import lookup_function, module_functions
from tessc.dialects.tess_base import is_float
from tessc.lowering.autodiff.grad_emitter import GradEmitter
from tessc.lowering.autodiff.vjp_rules import VJP_RULES, ZERO_GRADIENT_OPS


def _fail(message: str, op: Operation | None = None) -> NoReturn:
    """Raise the pass's error, located at `op` when there is one (tessc-opt prints where)."""
    message = f"tess-autodiff: {message}"
    if op is not None:
        op.emit_error(message, PassFailedException(message))
    raise PassFailedException(message)


def is_scalar(value: SSAValue) -> bool:
    """One element: the adjoint of such a result defaults to 1 (no seed argument)."""
    assert isinstance(value.type, TensorType)
    count = 1
    for dim in value.type.get_shape():
        count *= dim
    return count == 1


def find_function(module: ModuleOp, name: str | None) -> func.FuncOp:
    """`@name`, or the module's only function when `name` is None."""
    functions = module_functions(module)
    if name is None:
        if len(functions) != 1:
            # Located at the second function: the one that makes the choice ambiguous.
            _fail(
                f"the module has {len(functions)} functions: name one with `func=<name>`",
                functions[1] if len(functions) > 1 else None,
            )
        return functions[0]
    found = lookup_function(module, name)
    if found is None:
        _fail(f"no function @{name} in the module")
    return found


class _PrimalCloner:
    """Copies a function body into one block, inlining calls to functions of the module."""

    def __init__(self, module: ModuleOp, builder: Builder):
        self.module = module
        self.builder = builder
        self.ops: list[Operation] = []

    def clone(
        self, function: func.FuncOp, arguments: Sequence[SSAValue], call_stack: tuple[str, ...]
    ) -> list[SSAValue]:
        """Clone `function`'s body applied to `arguments`; return its returned values."""
        name = function.sym_name.data
        if function.is_declaration or len(function.body.blocks) != 1:
            _fail(f"@{name} must have a body of exactly one block", function)
        block = function.body.block
        mapping: dict[SSAValue, SSAValue] = dict(zip(block.args, arguments, strict=True))
        for op in block.ops:
            if isinstance(op, func.ReturnOp):
                return [mapping[value] for value in op.arguments]
            if isinstance(op, func.CallOp):
                callee = SymbolTable.lookup_symbol(self.module, op.callee)
                if not isinstance(callee, func.FuncOp):
                    _fail(f"@{name} calls @{op.callee.string_value()}, not in the module", op)
                if callee.sym_name.data in (*call_stack, name):
                    _fail(f"cannot differentiate the recursive call of @{callee.sym_name.data}", op)
                operands = [mapping[value] for value in op.arguments]
                results = self.clone(callee, operands, (*call_stack, name))
                mapping.update(zip(op.results, results, strict=True))
                continue
            if type(op) not in VJP_RULES:
                _fail(f"no gradient rule for '{op.name}' (in @{name})", op)
            self.ops.append(self.builder.insert(op.clone(value_mapper=mapping)))
        _fail(f"@{name} has no func.return", function)


def _is_float_tensor(value: SSAValue) -> bool:
    typ = value.type
    return isinstance(typ, TensorType) and is_float(typ.element_type)


def _active_values(ops: Sequence[Operation], differentiated: Sequence[SSAValue]) -> set[SSAValue]:
    """The values that depend differentiably on the `differentiated` arguments (integer
    and bool values never do)."""
    active = set(differentiated)
    for op in ops:
        if isinstance(op, ZERO_GRADIENT_OPS):
            continue
        if any(operand in active for operand in op.operands):
            active.update(r for r in op.results if _is_float_tensor(r))
    return active


def _check_signature(primal: func.FuncOp, wrt: Sequence[int], results: Sequence[int]) -> None:
    """Differentiated arguments and results are f32/f64 tensors (others may be integer
    or bool tensors), and `wrt`/`results` are in range."""
    name = primal.sym_name.data
    inputs = primal.function_type.inputs.data
    outputs = primal.function_type.outputs.data
    for option, indices, kind, count in (
        ("wrt", wrt, "argument", len(inputs)),
        ("results", results, "result", len(outputs)),
    ):
        for index in indices:
            if not 0 <= index < count:
                counted = f"{count} {kind}" + ("" if count == 1 else "s")
                _fail(f"{option} index {index} is out of range: @{name} has {counted}", primal)
    for kind, types, indices in (("argument", inputs, wrt), ("result", outputs, results)):
        for position in indices:
            typ = types[position]
            if not (isinstance(typ, TensorType) and is_float(typ.element_type)):
                message = f"{kind} {position} of @{name} has type {typ}, not a float tensor"
                _fail(message, primal)


def build_gradient(
    module: ModuleOp,
    primal: func.FuncOp,
    wrt: Sequence[int],
    results: Sequence[int],
    grad_name: str,
) -> func.FuncOp:
    """The function `@grad_name` described in the module docstring (not yet inserted):
    the gradient of the `results` of `primal` with respect to its arguments `wrt`."""
    _check_signature(primal, wrt, results)
    block = Block(arg_types=primal.function_type.inputs.data)
    for new_arg, old_arg in zip(block.args, primal.args, strict=True):
        new_arg.name_hint = old_arg.name_hint
    builder = Builder(InsertPoint.at_end(block))
    cloner = _PrimalCloner(module, builder)
    primal_results = cloner.clone(primal, block.args, ())

    seeds: dict[int, SSAValue] = {}
    for index in dict.fromkeys(results):
        value = primal_results[index]
        if not is_scalar(value):
            seeds[index] = block.insert_arg(value.type, len(block.args))
            seeds[index].name_hint = "grad_out"

    differentiated = [block.args[i] for i in wrt]
    active = _active_values(cloner.ops, differentiated)
    emit = GradEmitter(builder)
    adjoints: dict[SSAValue, SSAValue] = {}

    def accumulate(value: SSAValue, contribution: SSAValue) -> None:
        assert contribution.type == value.type, (contribution.type, value.type)
        previous = adjoints.get(value)
        adjoints[value] = contribution if previous is None else emit.add(previous, contribution)

    for index in dict.fromkeys(results):
        value = primal_results[index]
        if value in active:
            seed = seeds.get(index)
            accumulate(value, seed if seed is not None else emit.full_like(value, 1.0))

    for op in reversed(cloner.ops):
        grad = adjoints.get(op.results[0])
        if grad is None:
            continue
        needs = tuple(operand in active for operand in op.operands)
        if not any(needs):
            continue
        contributions = VJP_RULES[type(op)](emit, op, grad, needs)
        for operand, needed, contribution in zip(op.operands, needs, contributions, strict=True):
            if needed and contribution is not None:
                accumulate(operand, contribution)

    gradients = [
        adjoints[arg] if arg in adjoints else emit.zeros_like(arg) for arg in differentiated
    ]
    builder.insert(func.ReturnOp(*primal_results, *gradients))

    grad_func = func.FuncOp(
        grad_name,
        ([arg.type for arg in block.args], [v.type for v in (*primal_results, *gradients)]),
        Region(block),
    )
    region_dce(grad_func.body)
    cse(grad_func)
    return grad_func


@dataclass(frozen=True)
class TessAutodiffPass(ModulePass):
    """
    Add `@<func>_grad`, the reverse-mode gradient of `@<func>`.

    Options: `func` names the function (default: the module's only one); `wrt` lists the
    positions of the arguments to differentiate (default: all); `results` lists the
    positions of the results to differentiate (default: all; the others are still
    returned, as auxiliary values, and take no seed); `grad-name` names the new function
    (default: `<func>_grad`).
    """

    name = "tess-autodiff"

    func: str | None = None
    wrt: tuple[int, ...] | None = None
    results: tuple[int, ...] | None = None
    grad_name: str | None = None

    def apply(self, ctx: Context, op: ModuleOp) -> None:
        primal = find_function(op, self.func)
        name = primal.sym_name.data
        grad_name = self.grad_name or f"{name}_grad"
        if SymbolTable.lookup_symbol(op, grad_name) is not None:
            _fail(f"the module already has a symbol @{grad_name}")
        wrt = self.wrt if self.wrt is not None else tuple(range(len(primal.args)))
        outputs = primal.function_type.outputs.data
        results = self.results if self.results is not None else tuple(range(len(outputs)))
        grad_func = build_gradient(op, primal, wrt, results, grad_name)
        op.body.block.insert_op_after(grad_func, primal)
