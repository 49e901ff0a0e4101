"""
`tessc.tree_util`: JAX's pytree functions, on the nests `jit`, `grad`, `vmap` and the
optimizers take apart (`tessc.frontend.pytree`).

    ts.tree_util.register_pytree_node(Point, lambda p: ((p.x, p.y), None),
                                      lambda aux, children: Point(*children))

A registered class is a node wherever a pytree goes: jit and grad arguments and results,
optimizer parameters. Dataclasses need no registration (their fields are the children, as
`jax.tree_util.register_dataclass` would make them); `register_pytree_node_class` takes a
class with `tree_flatten()` and a classmethod `tree_unflatten(aux, children)`.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, TypeVar

from tessc.frontend.pytree import (
    CONTAINERS,
    REGISTERED,
    TreeDef,
    flatten_tree,
    register_pytree_node,
    unflatten_tree,
)

T = TypeVar("T", bound=type)


def register_pytree_node_class(cls: T) -> T:
    """A class decorator: `cls.tree_flatten(obj) -> (children, aux)` and
    `cls.tree_unflatten(aux, children)` register it (as JAX's of the same name)."""
    register_pytree_node(cls, cls.tree_flatten, cls.tree_unflatten)  # type: ignore[attr-defined]
    return cls


def _is_leaf(value: Any) -> bool:
    """JAX's leaves: anything but a container, None, or a registered class."""
    return value is not None and not isinstance(value, CONTAINERS) and type(value) not in REGISTERED


@dataclass(frozen=True)
class PyTreeDef:
    """The structure of a flattened pytree (`tree_flatten`'s second result)."""

    tree: TreeDef
    num_leaves: int

    def unflatten(self, leaves: list[Any]) -> Any:
        leaves = list(leaves)
        if len(leaves) != self.num_leaves:
            raise ValueError(f"expected {self.num_leaves} leaves, got {len(leaves)}")
        return unflatten_tree(self.tree, leaves)


def tree_flatten(tree: Any) -> tuple[list[Any], PyTreeDef]:
    """(leaves, structure) of `tree`, leaves in jit's order."""
    structure, leaves = flatten_tree(tree, _is_leaf, "tree")
    return [leaf for _, leaf in leaves], PyTreeDef(structure, len(leaves))


def tree_unflatten(treedef: PyTreeDef, leaves: list[Any]) -> Any:
    return treedef.unflatten(leaves)


def tree_leaves(tree: Any) -> list[Any]:
    return tree_flatten(tree)[0]


def tree_structure(tree: Any) -> PyTreeDef:
    return tree_flatten(tree)[1]


def tree_map(fn: Callable[..., Any], tree: Any, *rest: Any) -> Any:
    """`fn` applied leafwise to `tree` and the trees `rest` of the same structure."""
    leaves, treedef = tree_flatten(tree)
    others = [tree_flatten(other) for other in rest]
    for _, other_def in others:
        if other_def != treedef:
            raise ValueError("tree_map: the trees have different structures")
    return treedef.unflatten(
        [fn(*items) for items in zip(leaves, *(o[0] for o in others), strict=True)]
    )


__all__ = [
    "PyTreeDef",
    "register_pytree_node",
    "register_pytree_node_class",
    "tree_flatten",
    "tree_leaves",
    "tree_map",
    "tree_structure",
    "tree_unflatten",
]
