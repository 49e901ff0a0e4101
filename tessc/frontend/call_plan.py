"""
A jitted function's steady-state call, written out as Python for one signature.

`jit`'s planned path (`_FastPath`) matches a call's arguments against the structure of
the last signature, checks every array leaf, calls the program and rebuilds the output
nest. Done by walking the structure, that is ~5 us of Python per call (a recursive match,
a flags object per array, closures per output node), which an MLP train step of ~60 us
notices. `compile_call_plan` writes the same steps for one structure as straight-line
code and `exec`s it once:

    def plan(a0, a1, a2):
        try:
            if type(a0) is not dict or len(a0) != 4: return MISS
            v0 = a0['b1']
            if type(v0) is not ndarray or v0.shape != S0 or v0.dtype is not D0 or (
                    v0.strides != T0 and not v0.flags.c_contiguous): return MISS
            ...
        except (KeyError, IndexError):
            return MISS
        o = run(v0, v1, ..., C0)
        return ({'b1': o[0], ...}, o[4])

Same checks as `_FastPath.leaves` (a dtype that is equal but not the identical object, or
strides that differ while the array is C-contiguous, are a miss or pass on the slower
flags check: a miss only sends the call down the general path). Structures with traced
Python numbers, non-simple static values or device arrays get no plan (`None`). A plan
with donated leaves or `BULK_LEAVES` leaves checks them together instead
(`call_checks.LeafChecks`: an optimizer step's hundreds), and takes back as donated the
views its program returned (views of its arenas), which the general path would check
pairwise.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from tessc.frontend.call_checks import LeafChecks, row_strides
from tessc.frontend.donation import DONATED
from tessc.frontend.pytree import SIMPLE_STATICS, make_object, object_fields, static_key

MISS = object()
"""What a plan returns when the call does not have its signature."""

BULK_LEAVES = 32
"""From this many array leaves (or any donated), a plan checks them together
(`call_checks.LeafChecks`) rather than a line each."""


class _Writer:
    def __init__(self, bulk: bool = False) -> None:
        self.lines: list[str] = []
        self.globals: dict[str, Any] = {"ndarray": np.ndarray, "MISS": MISS}
        self.leaves: list[str] = []
        self.bulk = bulk
        """Leaves checked together (`call_checks.LeafChecks`), not a line each."""

    def constant(self, prefix: str, value: Any) -> str:
        name = f"{prefix}{len(self.globals)}"
        self.globals[name] = value
        return name

    def match(self, node: tuple[Any, ...], expr: str, types: Sequence[Any]) -> bool:
        """Lines checking that `expr` has structure `node`; False if not plannable."""
        kind = node[0]
        if kind == "leaf":
            if len(self.leaves) >= len(types):
                return False
            shape, dtype = types[len(self.leaves)]
            name = f"v{len(self.leaves)}"
            self.leaves.append(name)
            if self.bulk:
                self.lines.append(f"{name} = {expr}")
                return True
            s = self.constant("S", tuple(shape))
            d = self.constant("D", np.dtype(dtype))
            t = self.constant("T", row_strides(tuple(shape), np.dtype(dtype).itemsize))
            v = name
            self.lines.append(f"{v} = {expr}")
            self.lines.append(
                f"if type({v}) is not ndarray or {v}.shape != {s} or {v}.dtype is not {d} or "
                f"({v}.strides != {t} and not {v}.flags.c_contiguous): return MISS"
            )
            return True
        if kind == "static":
            if node[1] not in SIMPLE_STATICS:
                return False
            value = self.constant("K", node[2])
            same = f"{expr} == {value}"
            if len(node) == 4:  # a float or complex: its bits (`pytree.static_key`)
                same += f" and key({expr}) == {self.constant('B', node[3])}"
                self.globals["key"] = static_key
            self.lines.append(
                f"if type({expr}) is not {self.constant('Y', node[1])} or "
                f"not ({expr} is {value} or ({same})): return MISS"
            )
            return True
        if kind is dict:
            if not all(type(key) in (str, int) for key in node[1]):
                return False
            self.lines.append(
                f"if type({expr}) is not dict or len({expr}) != {len(node[1])}: return MISS"
            )
            return all(
                self.match(child, f"{expr}[{key!r}]", types)
                for key, child in zip(node[1], node[2], strict=True)
            )
        if kind in (tuple, list):
            typ = self.constant("Y", kind)
            self.lines.append(
                f"if type({expr}) is not {typ} or len({expr}) != {len(node[1])}: return MISS"
            )
            if self.bulk and node[1] and all(child == ("leaf",) for child in node[1]):
                if len(self.leaves) + len(node[1]) > len(types):
                    return False
                names = [f"v{len(self.leaves) + i}" for i in range(len(node[1]))]
                self.leaves.extend(names)
                self.lines.append(f"{', '.join(names)}, = {expr}")  # unpacked in C
                return True
            return all(self.match(child, f"{expr}[{i}]", types) for i, child in enumerate(node[1]))
        if kind == "object":  # its attributes, read at every call
            if not isinstance(node[2], tuple) or not all(name.isidentifier() for name in node[2]):
                return False
            typ, names = self.constant("Y", node[1]), self.constant("N", node[2])
            self.globals["fields"] = object_fields
            self.lines.append(
                f"if type({expr}) is not {typ} or fields({expr}) != {names}: return MISS"
            )
            return all(
                self.match(child, f"{expr}.{name}", types)
                for name, child in zip(node[2], node[3], strict=True)
            )
        return False  # traced numbers, named tuples, anything rarer: the general path

    def build(self, node: tuple[Any, ...], counter: list[int]) -> str | None:
        """The expression rebuilding output nest `node` from the outputs `o`."""
        kind = node[0]
        if kind == "leaf":
            counter[0] += 1
            return f"o[{counter[0] - 1}]"
        if kind is dict:
            if not all(type(key) in (str, int) for key in node[1]):
                return None
            items = [
                (key, self.build(child, counter)) for key, child in zip(*node[1:3], strict=True)
            ]
            if any(v is None for _, v in items):
                return None
            return "{" + ", ".join(f"{key!r}: {v}" for key, v in items) + "}"
        if kind == "object":
            parts = [self.build(child, counter) for child in node[3]]
            if any(p is None for p in parts):
                return None
            self.globals["make_object"] = make_object
            cls, names = self.constant("Y", node[1]), self.constant("N", node[2])
            return f"make_object({cls}, {names}, [{', '.join(parts)}])"
        if kind in (tuple, list):
            if len(node[1]) > 8 and all(child == ("leaf",) for child in node[1]):
                start = counter[0]
                counter[0] += len(node[1])
                return f"{kind.__name__}(o[{start}:{counter[0]}])"
            parts = [self.build(child, counter) for child in node[1]]
            if any(p is None for p in parts):
                return None
            inner = ", ".join(parts) + ("," if kind is tuple and len(parts) == 1 else "")
            return f"({inner})" if kind is tuple else f"[{inner}]"
        return None


def compile_call_plan(
    argument_trees: Sequence[tuple[Any, ...]],
    array_types: Sequence[tuple[tuple[int, ...], Any]],
    constants: Sequence[Any],
    output_tree: tuple[Any, ...],
    run: Callable[..., Sequence[Any]],
    donated: Sequence[int] = (),
    returned: frozenset[int] | None = None,
    function: str = "",
) -> Callable[..., Any] | None:
    """`plan(*args)`: the call's result, or `MISS` (module docstring); None when the
    structure is one a plan does not cover.

    `donated` leaves (`tessc.frontend.donation`): a call passing an array donated before,
    or a donated array that is a view or another argument too, is a `MISS` (the general
    path raises or copies); after the run, a donated array not returned as an output is
    marked, statically where `returned` (the donated leaves the program returns as
    themselves) is known, else by identity against the outputs."""
    bulk = bool(donated) or len(array_types) >= BULK_LEAVES
    writer = _Writer(bulk)
    params = [f"a{i}" for i in range(len(argument_trees))]
    if not all(
        writer.match(t, p, array_types) for t, p in zip(argument_trees, params, strict=True)
    ):
        return None
    if len(writer.leaves) != len(array_types):
        return None
    result = writer.build(output_tree, [0])
    if result is None:
        return None
    writer.globals["run"] = run
    names = [*writer.leaves, *(writer.constant("C", c) for c in constants)]
    leaves = writer.leaves
    checks = LeafChecks(array_types, donated, returned, function)
    after: list[str] = []
    if bulk:
        writer.globals["accept"], writer.globals["after"] = checks.accept, checks.after
        writer.lines.append(f"leaves = ({''.join(f'{v}, ' for v in leaves)})")
        writer.lines.append("if not accept(leaves): return MISS")
        if donated:
            after.append("after(leaves, o)")
    else:
        writer.globals["DONATED"] = DONATED
        writer.lines.append(
            f"if DONATED and ({' or '.join(f'id({v}) in DONATED' for v in leaves)}): return MISS"
        )
    body = "\n".join(f"        {line}" for line in writer.lines)
    source = (
        f"def plan({', '.join(params)}):\n"
        f"    try:\n{body}\n"
        "    except (KeyError, IndexError, AttributeError):\n"
        "        return MISS\n"
        f"    o = run({', '.join(names)})\n"
        + "".join(f"    {line}\n" for line in after)
        + f"    return {result}\n"
    )
    namespace = dict(writer.globals)
    exec(compile(source, "<tessc call plan>", "exec"), namespace)
    plan = namespace["plan"]
    plan.source = source  # type: ignore[attr-defined]
    plan.trust = checks.trusted.update  # type: ignore[attr-defined]
    return plan


__all__ = ["BULK_LEAVES", "MISS", "compile_call_plan"]
