"""
The functions of a module: find one by name, list them, and the set of functions called.

Every level keeps its program as `func.func`s in one `builtin.module` (hosts and their
outlined `tess.kernel`s from the buffer level on), and the front, the passes and the
reference interpreter all look functions up by name and ask which are called (a called
function's signature must not change; only uncalled hosts are cached on disk). These are
those questions, answered once. Errors stay with the callers: each layer words its own
diagnostic (a pass failure, a `tessc-run` error, a `KeyError` in the interpreter).
"""

from __future__ import annotations

from xdsl.dialects import func
from xdsl.dialects.builtin import FunctionType, MemRefType, ModuleOp, i8
from xdsl.ir import Operation, SSAValue

from tessc.dialects import contract


def module_functions(module: ModuleOp) -> list[func.FuncOp]:
    """The module's top-level `func.func`s, in order."""
    return [op for op in module.ops if isinstance(op, func.FuncOp)]


def lookup_function(module: ModuleOp, name: str) -> func.FuncOp | None:
    """The top-level `func.func @name` of `module`, or None."""
    for op in module.ops:
        if isinstance(op, func.FuncOp) and op.sym_name.data == name:
            return op
    return None


def called_functions(root: Operation) -> set[str]:
    """The names of the functions a `func.call` anywhere under `root` calls."""
    return {op.callee.root_reference.data for op in root.walk() if isinstance(op, func.CallOp)}


def add_workspace_argument(function: func.FuncOp, size: int) -> SSAValue:
    """A trailing `tess.workspace` argument of `size` bytes (`memref<size x i8>`) for
    `function`, recorded in `tess.workspace_bytes` (`tess-memory-plan` makes it; hosts
    given scratch later, by `tess-hoist-scratch`, too)."""
    block = function.body.block
    arena = block.insert_arg(MemRefType(i8, [size]), len(block.args))
    arena.name_hint = "workspace"
    inputs = [*function.function_type.inputs.data, arena.type]
    function.properties["function_type"] = FunctionType.from_lists(
        inputs, list(function.function_type.outputs.data)
    )
    contract.WORKSPACE.set_arg(function, len(inputs) - 1)
    contract.WORKSPACE_BYTES.set(function, size)
    return arena


__all__ = ["add_workspace_argument", "called_functions", "lookup_function", "module_functions"]
