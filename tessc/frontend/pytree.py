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

Objects are nodes too, `("object", type, names, children)`: a dataclass by its fields (as a
NamedTuple), and any other instance that holds arrays by its attributes (`vars`), so that
a jitted method reads `self.w` at every call rather than baking in the array it saw first.
An object holding no array stays a static value (hashed, as before). Rebuilding one makes
an instance without calling `__init__` and sets the attributes, as JAX's dataclass nodes.
A class registered with `register_pytree_node(cls, flatten, unflatten)` (JAX's signature,
`tessc.tree_util`) is a node by its own functions: `("object", cls, CustomNode(aux),
children)`, rebuilt by `unflatten(aux, children)`.
"""

from __future__ import annotations

import dataclasses
import types
from collections.abc import Callable, Iterator
from typing import Any, TypeAlias

import numpy as np

from tessc.runtime.cuda import is_device_array

TreeDef: TypeAlias = tuple[Any, ...]
"""The structure of nested tuples/lists/dicts around the leaves, and the static values."""
CONTAINERS = (tuple, list, dict)


@dataclasses.dataclass(frozen=True)
class CustomNode:
    """The `names` slot of a registered class's object node: the auxiliary data its
    `flatten` returned (hashable: it is part of a jit signature)."""

    aux: Any


REGISTERED: dict[type, tuple[Callable[[Any], tuple[Any, Any]], Callable[[Any, Any], Any]]] = {}
"""The classes of `register_pytree_node`: their flatten and unflatten functions."""


def register_pytree_node(
    cls: type,
    flatten_func: Callable[[Any], tuple[Any, Any]],
    unflatten_func: Callable[[Any, Any], Any],
) -> None:
    """Make `cls` a pytree node, as `jax.tree_util.register_pytree_node`: `flatten_func(obj)`
    returns `(children, aux_data)` (an iterable of subtrees; hashable static data), and
    `unflatten_func(aux_data, children)` rebuilds an instance."""
    if not isinstance(cls, type):
        raise TypeError(f"register_pytree_node expects a class, got {cls!r}")
    if cls in (*CONTAINERS, type(None)):
        raise ValueError(f"{cls.__name__} is a pytree node already")
    REGISTERED[cls] = (flatten_func, unflatten_func)


def _flatten_registered(obj: Any, path: str) -> tuple[tuple[Any, ...], CustomNode]:
    """A registered object's children and aux data, checked."""
    children, aux = REGISTERED[type(obj)][0](obj)
    try:
        hash(aux)
    except TypeError:
        raise TypeError(
            f"`{path}`: the flatten function registered for {type(obj).__name__} returned "
            f"auxiliary data of type {type(aux).__name__}, which is not hashable (jit "
            "compares it between calls)"
        ) from None
    return tuple(children), CustomNode(aux)


def is_weak_scalar(obj: Any) -> bool:
    """A Python int (in int64's range) or float: traced as a weakly typed 0-d array."""
    if type(obj) is float:
        return True
    return type(obj) is int and -(2**63) <= obj < 2**63


def object_fields(obj: Any) -> tuple[str, ...] | None:
    """The attributes an object is flattened by (a dataclass's fields, else its `vars`),
    or None for what is never an object node (functions, types, modules, anything without
    a `__dict__`)."""
    if type(obj) in REGISTERED:
        return None
    if dataclasses.is_dataclass(obj) and not isinstance(obj, type):
        return tuple(field.name for field in dataclasses.fields(obj))
    if callable(obj) or isinstance(obj, types.ModuleType):
        return None
    attributes = getattr(obj, "__dict__", None)
    return tuple(attributes) if type(attributes) is dict else None


def _holds_leaf(obj: Any, is_leaf: Callable[[Any], bool], depth: int = 4) -> bool:
    """Whether a leaf is reachable in `obj` through containers and object attributes."""
    if is_leaf(obj):
        return True
    if depth == 0:
        return False
    if isinstance(obj, tuple | list):
        return any(_holds_leaf(item, is_leaf, depth - 1) for item in obj)
    if isinstance(obj, dict):
        return any(_holds_leaf(item, is_leaf, depth - 1) for item in obj.values())
    names = object_fields(obj)
    return names is not None and any(
        _holds_leaf(getattr(obj, name, None), is_leaf, depth - 1) for name in names
    )


def _flatten_object(
    obj: Any,
    names: tuple[str, ...],
    is_leaf: Callable[[Any], bool],
    path: str,
    ancestors: frozenset,
) -> tuple[TreeDef, list] | None:
    """An `("object", ...)` node for `obj`, or None where it stays a static value: it holds
    no array, or is its own ancestor (a cycle)."""
    if id(obj) in ancestors:
        return None
    inner = ancestors | {id(obj)}
    try:
        children = [
            flatten_tree(getattr(obj, name), is_leaf, f"{path}_{name}", _ancestors=inner)
            for name in names
        ]
    except TypeError as error:
        if not _holds_leaf(obj, is_leaf):
            return None
        raise TypeError(
            f"{error}: `{path}` is a {type(obj).__name__} holding arrays, which jit reads "
            "at every call; its other attributes must be hashable values (or pass the "
            "arrays as arguments)"
        ) from None
    leaves = [x for c in children for x in c[1]]
    if not leaves:  # a static value, compared by `==` as before (an enum member stays itself)
        return None
    return ("object", type(obj), names, tuple(c[0] for c in children)), leaves


def flatten_tree(
    obj: Any,
    is_leaf: Callable[[Any], bool],
    path: str,
    scalars: bool = False,
    *,
    _ancestors: frozenset = frozenset(),
) -> tuple[TreeDef, list]:
    """(structure, [(path, leaf), ...]) of a nest of tuples, lists, dicts and objects
    (module docstring); with `scalars`, Python ints and floats are leaves too (`("weak",
    type)` nodes; never inside an object, whose numbers are static)."""
    if is_leaf(obj):
        return ("leaf",), [(path, obj)]
    if scalars and is_weak_scalar(obj):
        return ("weak", type(obj)), [(path, obj)]
    if isinstance(obj, tuple | list):
        children = [
            flatten_tree(item, is_leaf, f"{path}_{i}", scalars, _ancestors=_ancestors)
            for i, item in enumerate(obj)
        ]
        return (type(obj), tuple(c[0] for c in children)), [x for c in children for x in c[1]]
    if isinstance(obj, dict):
        keys = sorted(obj, key=repr)
        children = [
            flatten_tree(obj[k], is_leaf, f"{path}_{k}", scalars, _ancestors=_ancestors)
            for k in keys
        ]
        tree = (dict, tuple(keys), tuple(c[0] for c in children))
        return tree, [x for c in children for x in c[1]]
    if type(obj) in REGISTERED:
        items, key = _flatten_registered(obj, path)
        children = [
            flatten_tree(item, is_leaf, f"{path}_{i}", scalars, _ancestors=_ancestors)
            for i, item in enumerate(items)
        ]
        tree = ("object", type(obj), key, tuple(c[0] for c in children))
        return tree, [x for c in children for x in c[1]]
    names = object_fields(obj)
    if names is not None:
        node = _flatten_object(obj, names, is_leaf, path, _ancestors)
        if node is not None:
            return node
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


def leaf_count(node: TreeDef) -> int:
    """How many array leaves (`leaf` and `weak`) `node` holds."""
    kind = node[0]
    if kind in ("leaf", "weak"):
        return 1
    if kind == "static":
        return 0
    children = node[3] if kind == "object" else node[2] if kind is dict else node[1]
    return sum(leaf_count(child) for child in children)


def unflatten_tree(tree: TreeDef, leaves: list[Any]) -> Any:
    """The nest `tree` describes, its leaves taken in order from `leaves`."""
    # A module-level recursion: a nested function calling itself is a reference cycle,
    # which held `leaves` (a call's outputs, maybe large) until the cyclic GC ran.
    return _build(tree, iter(leaves))


def _build(node: TreeDef, leaves: Iterator[Any]) -> Any:
    kind = node[0]
    if kind in ("leaf", "weak"):
        return next(leaves)
    if kind == "static":
        return node[2]
    if kind is dict:
        return {k: _build(child, leaves) for k, child in zip(node[1], node[2], strict=True)}
    if kind == "arguments":
        return [_build(child, leaves) for child in node[2]]
    if kind == "object":
        return make_object(node[1], node[2], [_build(child, leaves) for child in node[3]])
    children = [_build(child, leaves) for child in node[1]]
    return kind(*children) if hasattr(kind, "_fields") else kind(children)


def make_object(cls: type, names: tuple[str, ...] | CustomNode, values: list[Any]) -> Any:
    """An instance of `cls` with attributes `names` set to `values`, `__init__` not run
    (frozen dataclasses included); a registered class's by its unflatten function."""
    if isinstance(names, CustomNode):
        return REGISTERED[cls][1](names.aux, values)
    obj = object.__new__(cls)
    for name, value in zip(names, values, strict=True):
        object.__setattr__(obj, name, value)
    return obj


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
    if kind == "object" and isinstance(node[2], CustomNode):
        if type(obj) is not node[1]:
            return False
        children, key = _flatten_registered(obj, "")
        return (
            key == node[2]
            and len(children) == len(node[3])
            and all(match_tree(c, item, leaves) for c, item in zip(node[3], children, strict=True))
        )
    if kind == "object":
        if type(obj) is not node[1] or object_fields(obj) != node[2]:
            return False
        return all(
            match_tree(child, getattr(obj, name), leaves)
            for name, child in zip(node[2], node[3], strict=True)
        )
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
    if kind == "object":
        cls, names = node[1], node[2]
        object_children = [tree_builder(child) for child in node[3]]
        return lambda it: make_object(cls, names, [build(it) for build in object_children])
    children = [tree_builder(child) for child in node[1]]
    if hasattr(kind, "_fields"):
        return lambda it: kind(*[build(it) for build in children])
    return lambda it: kind([build(it) for build in children])
