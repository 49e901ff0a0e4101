"""
Nests of tuples, lists and dicts around array leaves: how `jit` and `grad` take a call's
arguments apart and put results back together (JAX's pytrees, for the containers tessc
accepts).

A `TreeDef` is the structure without the leaves: `("leaf",)`, `("weak", type)` for a Python
int or float traced as a weakly typed 0-d array, `("static", type, value)` for a hashable
value that is part of the signature (`("static", type, value, key)` for a float or complex:
its bits, so `-0.0` and `0.0` are different signatures), and the container nodes. `flatten_tree` and
`unflatten_tree` convert both ways; `match_tree` checks a call's arguments against a known
structure in one walk and `tree_builder` turns a structure into a closure that rebuilds it,
both for `jit`'s steady-state call.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any, TypeAlias

import numpy as np

from tessc.runtime.cuda import is_device_array

TreeDef: TypeAlias = tuple[Any, ...]
"""The structure of nested tuples/lists/dicts around the leaves, and the static values."""
CONTAINERS = (tuple, list, dict)


def is_weak_scalar(obj: Any) -> bool:
    """A Python int (in int64's range) or float: traced as a weakly typed 0-d array."""
    if type(obj) is float:
        return True
    return type(obj) is int and -(2**63) <= obj < 2**63


def flatten_tree(
    obj: Any, is_leaf: Callable[[Any], bool], path: str, scalars: bool = False
) -> tuple[TreeDef, list]:
    """(structure, [(path, leaf), ...]) of a nest of tuples, lists and dicts; with
    `scalars`, Python ints and floats are leaves too (`("weak", type)` nodes)."""
    if is_leaf(obj):
        return ("leaf",), [(path, obj)]
    if scalars and is_weak_scalar(obj):
        return ("weak", type(obj)), [(path, obj)]
    if isinstance(obj, tuple | list):
        children = [
            flatten_tree(item, is_leaf, f"{path}_{i}", scalars) for i, item in enumerate(obj)
        ]
        return (type(obj), tuple(c[0] for c in children)), [x for c in children for x in c[1]]
    if isinstance(obj, dict):
        keys = sorted(obj, key=repr)
        children = [flatten_tree(obj[k], is_leaf, f"{path}_{k}", scalars) for k in keys]
        tree = (dict, tuple(keys), tuple(c[0] for c in children))
        return tree, [x for c in children for x in c[1]]
    try:
        hash(obj)
    except TypeError:
        raise TypeError(
            f"argument `{path}` of type {type(obj).__name__} is neither an array nor hashable"
        ) from None
    if type(obj) in (float, complex):
        return ("static", type(obj), obj, static_key(obj)), []
    return ("static", type(obj), obj), []


def static_key(value: float | complex) -> str | tuple[str, str]:
    """What tells apart equal floats a program can tell apart: `-0.0 == 0.0`, but `1 / x`
    differs. Their exact bits (`float.hex`)."""
    if isinstance(value, complex):
        return value.real.hex(), value.imag.hex()
    return value.hex()


def unflatten_tree(tree: TreeDef, leaves: list[Any]) -> Any:
    """The nest `tree` describes, its leaves taken in order from `leaves`."""
    iterator = iter(leaves)

    def build(node: TreeDef) -> Any:
        kind = node[0]
        if kind in ("leaf", "weak"):
            return next(iterator)
        if kind == "static":
            return node[2]
        if kind is dict:
            return {k: build(child) for k, child in zip(node[1], node[2], strict=True)}
        if kind == "arguments":
            return [build(child) for child in node[2]]
        children = [build(child) for child in node[1]]
        return kind(*children) if hasattr(kind, "_fields") else kind(children)

    return build(tree)


SIMPLE_STATICS = (int, float, complex, str, bytes, bool, type(None))
"""Static types whose `==` is cheap and plain, so a fast-path match may use it."""


def match_tree(node: TreeDef, obj: Any, leaves: list[np.ndarray]) -> bool:
    """Whether `obj` has exactly structure `node` (same container types, keys, static
    values) with plain ndarrays or device arrays at its leaves; appends those leaves in
    flatten order."""
    kind = node[0]
    if kind == "leaf":
        if type(obj) is not np.ndarray and not is_device_array(obj):
            return False
        leaves.append(obj)
        return True
    if kind == "weak":
        if type(obj) is not node[1] or not is_weak_scalar(obj):
            return False
        leaves.append(np.asarray(obj, node[2]))
        return True
    if kind == "static":
        # Identity implies equality in the Signature's tuple comparison, too.
        return type(obj) is node[1] and (
            obj is node[2]
            or (
                node[1] in SIMPLE_STATICS
                and obj == node[2]
                and (len(node) == 3 or static_key(obj) == node[3])
            )
        )
    if kind is dict:
        if type(obj) is not dict or len(obj) != len(node[1]):
            return False
        for key, child in zip(node[1], node[2], strict=True):
            if key not in obj or not match_tree(child, obj[key], leaves):
                return False
        return True
    if type(obj) is not kind or len(obj) != len(node[1]):
        return False
    return all(match_tree(child, item, leaves) for child, item in zip(node[1], obj, strict=True))


def tree_builder(node: TreeDef) -> Callable[[Iterator[Any]], Any]:
    """`unflatten_tree(node, ...)` as a closure over the structure, built once."""
    kind = node[0]
    if kind in ("leaf", "weak"):
        return next
    if kind == "static":
        value = node[2]
        return lambda _: value
    if kind is dict:
        keys = node[1]
        dict_children = [tree_builder(child) for child in node[2]]
        return lambda it: {k: build(it) for k, build in zip(keys, dict_children, strict=True)}
    children = [tree_builder(child) for child in node[1]]
    if hasattr(kind, "_fields"):
        return lambda it: kind(*[build(it) for build in children])
    return lambda it: kind([build(it) for build in children])
