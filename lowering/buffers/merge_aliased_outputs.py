"""
`tess-merge-aliased-outputs`: a host's out-param that reuses a donated input's storage
(`tess.aliases_input`) is used under that input's name (level 4, after `tess-memory-plan`).

The runtime passes the donated input's array as such an out-param, so the two names are one
buffer. Left as two, an in-place update (`b = 0.9 * b + g` writing `out1` over `b`) becomes
a kernel of two arguments that the generated code cannot tell apart: LLVM vectorises its
loop behind a runtime check that stores through one pointer do not overlap loads through
the other, which fails for equal pointers, so a serial or threaded kernel ran its scalar
loop on every call (W4's SGD step, 1.24x the bandwidth limit); a parfor's arguments are
marked `noalias`, which two names of one buffer are not. With the host's uses of the
out-param replaced by the input, `tess-outline-kernels` gives the kernel one argument for
both, its loads and stores go through one array, and LLVM sees distance 0. The out-param
itself stays in the signature (the runtime's calling convention). `cpu` pipelines only;
the gpu passes read the aliases themselves (`gpu_overlap.py`).
"""

from __future__ import annotations

from dataclasses import dataclass

from xdsl.context import Context
from xdsl.dialects import func
from xdsl.dialects.builtin import ModuleOp
from xdsl.passes import ModulePass

from tessc.dialects import contract


def merge_aliased_outputs(host: func.FuncOp) -> int:
    """Replace `host`'s uses of each aliasing out-param by its donor; the count merged."""
    args = host.body.block.args if host.body.blocks else ()
    merged = 0
    for index, arg in enumerate(args):
        donor = contract.ALIASES_INPUT.get_arg(host, index)
        if donor is None or not arg.uses:
            continue
        if not 0 <= donor < len(args) or args[donor].type != arg.type:
            continue  # the planner aliases equal types only; anything else is left alone
        arg.replace_all_uses_with(args[donor])
        merged += 1
    return merged


@dataclass(frozen=True)
class TessMergeAliasedOutputsPass(ModulePass):
    name = "tess-merge-aliased-outputs"

    def apply(self, ctx: Context, op: ModuleOp) -> None:
        for function in op.walk():
            if isinstance(function, func.FuncOp) and not contract.KERNEL.has(function):
                merge_aliased_outputs(function)
