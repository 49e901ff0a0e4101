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
from xdsl.dialects.builtin import ModuleOp
from xdsl.ir import Operation


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


__all__ = ["called_functions", "lookup_function", "module_functions"]
