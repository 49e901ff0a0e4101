"""
`tessc.einsum(spec, *operands)`: NumPy's Einstein summation, lowered to existing tess ops,
so it fuses and differentiates like hand-written code (no op of its own).

- a letter repeated within one operand (`"ii->i"`) takes the diagonal: the two dims moved
  last, flattened, and sliced with stride `n + 1` (a `tess.slice` view);
- a letter of one operand that neither the output nor a later operand names is summed
  there, before any contraction;
- operands are contracted left to right: letters both share and that are needed later are
  batch dims, the other shared letters are contracted, each side's own letters are kept.
  Each contraction is one (batched) `matmul` of the operands permuted (only where their
  order differs) and reshaped (only where several letters merge) to
  `(*batch, M, K) @ (*batch, K, N)`; without a contracted letter (an outer or elementwise
  product) or with `M = N = 1` (a dot per batch element) a broadcast product and a sum;
- the result is permuted to the output's letter order.

The spec is `"ij,jk->ik"`, or implicit (`"ij,jk"`: the letters that occur once, sorted);
`...` stands for broadcast leading dims. A spec that does not match its operands is a
`TessError` naming the spec and the operand shapes.
"""

from __future__ import annotations

import math
from typing import Any

from tessc.dialects.builder_types import TessError
from tessc.dialects.tess_base import broadcast_shapes
from tessc.frontend.function_forms import lift
from tessc.frontend.tracer import Tensor
from tessc.frontend.user_location import located

_FIRST_ELLIPSIS_LABEL = 0x100  # labels for `...` dims: never a letter of a spec


def _fail(spec: str, shapes: list[tuple[int, ...]], why: str) -> TessError:
    names = ", ".join(str(s) for s in shapes)
    return TessError(f"einsum {spec!r} with operands of shapes {names}: {why}")


def parse(spec: str, shapes: list[tuple[int, ...]]) -> tuple[list[str], str, tuple[int, ...]]:
    """Each operand's labels, the output's, and the broadcast shape of the `...` dims; the
    labels of `...` dims are characters from U+0100 on, the leading one first."""
    text = spec.replace(" ", "")
    inputs_text, arrow, output_text = text.partition("->")
    terms = inputs_text.split(",")
    if len(terms) != len(shapes):
        raise _fail(spec, shapes, f"the spec names {len(terms)} operands, got {len(shapes)}")
    allowed = set("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ")
    for term in [*terms, output_text]:
        bad = set(term.replace("...", "")) - allowed
        if bad or term.count("...") > 1:
            raise _fail(spec, shapes, f"bad term {term!r} (letters and one '...' only)")
    ellipsis_shapes: list[tuple[int, ...]] = []
    labels: list[str] = []
    for term, shape in zip(terms, shapes, strict=True):
        named = len(term.replace("...", ""))
        if "..." not in term and named != len(shape) or named > len(shape):
            raise _fail(spec, shapes, f"term {term!r} has {named} labels for rank {len(shape)}")
        extra = len(shape) - named
        ellipsis_shapes.append(tuple(shape[term.index("...") :][:extra]) if extra else ())
        labels.append(term)
    try:
        ellipsis = broadcast_shapes(*ellipsis_shapes)
    except ValueError:
        raise _fail(spec, shapes, "the '...' dims do not broadcast") from None
    rank = len(ellipsis)
    dots = "".join(chr(_FIRST_ELLIPSIS_LABEL + k) for k in range(rank))
    labels = [
        term.replace("...", dots[rank - (len(shape) - len(term) + 3) :]) if "..." in term else term
        for term, shape in zip(labels, shapes, strict=True)
    ]
    if arrow:
        output = output_text.replace("...", dots)
        for letter in output:
            if output.count(letter) > 1:
                raise _fail(spec, shapes, f"output label {letter!r} repeats")
            if not any(letter in term for term in labels):
                raise _fail(spec, shapes, f"output label {letter!r} names no operand dim")
    else:
        counts = "".join(labels)
        output = dots + "".join(
            sorted(c for c in set(counts) if counts.count(c) == 1 and c not in dots)
        )
    return labels, output, ellipsis


def _diagonal(x: Tensor, labels: str) -> tuple[Tensor, str]:
    """`x` with each repeated label's dims replaced by their diagonal (one dim, last)."""
    while True:
        repeated = next((c for c in labels if labels.count(c) > 1), None)
        if repeated is None:
            return x, labels
        first = labels.index(repeated)
        second = labels.index(repeated, first + 1)
        n = x.shape[first]
        rest = [d for d in range(x.ndim) if d not in (first, second)]
        moved = x.permute(*rest, first, second)
        flat = moved.reshape((*moved.shape[:-2], n * n))
        diagonal = flat[(..., slice(None, None, n + 1))]
        x, labels = diagonal, "".join(labels[d] for d in rest) + repeated


def _sum_labels(x: Tensor, labels: str, drop: set[str]) -> tuple[Tensor, str]:
    dims = tuple(d for d, c in enumerate(labels) if c in drop)
    if not dims:
        return x, labels
    return x.sum(dims), "".join(c for c in labels if c not in drop)


def _permuted(x: Tensor, labels: str, order: list[str]) -> Tensor:
    dims = [labels.index(c) for c in order]
    return x if dims == list(range(x.ndim)) else x.permute(*dims)


def _reshaped(x: Tensor, shape: tuple[int, ...]) -> Tensor:
    """`x` reshaped to `shape` (one -1 the rest's quotient), or `x` if it has that shape."""
    if -1 in shape:
        known = math.prod(n for n in shape if n != -1)
        shape = tuple(
            x.size // known if n == -1 and known else (0 if n == -1 else n) for n in shape
        )
    return x if x.shape == shape else x.reshape(shape)


def _aligned(x: Tensor, labels: str, order: list[str], size: dict[str, int]) -> Tensor:
    """`x` permuted to the order of its labels in `order`, with size-1 dims for the
    labels of `order` it lacks, so that it broadcasts against the other operand."""
    x = _permuted(x, labels, [c for c in order if c in labels])
    return _reshaped(x, tuple(size[c] if c in labels else 1 for c in order))


def _contract(
    a: Tensor, a_labels: str, b: Tensor, b_labels: str, keep: set[str]
) -> tuple[Tensor, str]:
    """`a` and `b` contracted over their shared labels not in `keep`, as one matmul."""
    batch = [c for c in a_labels if c in b_labels and c in keep]
    summed = [c for c in a_labels if c in b_labels and c not in keep]
    a_only = [c for c in a_labels if c not in b_labels]
    b_only = [c for c in b_labels if c not in a_labels]
    size = {c: n for c, n in zip(a_labels + b_labels, (*a.shape, *b.shape), strict=True)}

    def prod(letters: list[str]) -> int:
        return math.prod(size[c] for c in letters)

    result_labels = [*batch, *a_only, *b_only]
    if not summed or prod(a_only) == prod(b_only) == 1:
        # No contraction (an outer or elementwise product), or a dot per batch element: a
        # broadcast product (and a row sum), which fuses with its neighbours.
        order = [*batch, *a_only, *b_only, *summed]
        lhs = _aligned(a, a_labels, order, size)
        rhs = _aligned(b, b_labels, order, size)
        product = lhs * rhs
        if summed:
            product = product.sum(tuple(range(len(result_labels), len(order))))
        return product, "".join(result_labels)
    lead = tuple(size[c] for c in batch)
    lhs = _reshaped(
        _permuted(a, a_labels, [*batch, *a_only, *summed]), (*lead, prod(a_only), prod(summed))
    )
    rhs = _reshaped(
        _permuted(b, b_labels, [*batch, *summed, *b_only]), (*lead, prod(summed), prod(b_only))
    )
    result = _reshaped(lhs @ rhs, tuple(size[c] for c in result_labels))
    return result, "".join(result_labels)


@located
def einsum(spec: str, *operands: Any) -> Tensor:
    """NumPy's `einsum` on traced tensors (see the module docstring)."""
    if not isinstance(spec, str):
        raise TessError(f"einsum needs a spec string first, got {type(spec).__name__}")
    if not operands:
        raise TessError(f"einsum {spec!r} needs at least one operand")
    tensors = [lift(x, operands) for x in operands]
    shapes = [t.shape for t in tensors]
    labels, output, ellipsis = parse(spec, shapes)
    size: dict[str, int] = {}
    for term, shape in zip(labels, shapes, strict=True):
        for letter, n in zip(term, shape, strict=True):
            if ord(letter) >= _FIRST_ELLIPSIS_LABEL:
                n = ellipsis[ord(letter) - _FIRST_ELLIPSIS_LABEL]
            if size.setdefault(letter, n) != n:
                raise _fail(spec, shapes, f"label {letter!r} has sizes {size[letter]} and {n}")
    prepared: list[tuple[Tensor, str]] = []
    for k, (x, term) in enumerate(zip(tensors, labels, strict=True)):
        target = tuple(size[c] for c in term)
        if x.shape != target:  # a size-1 `...` dim broadcast to the others
            x = x.broadcast_to(target)
        x, term = _diagonal(x, term)
        later = set(output).union(*labels[k + 1 :], *(t for _, t in prepared))
        x, term = _sum_labels(x, term, set(term) - later)
        prepared.append((x, term))
    result, result_labels = prepared[0]
    for k, (x, term) in enumerate(prepared[1:], start=1):
        keep = set(output).union(*(t for _, t in prepared[k + 1 :]))
        result, result_labels = _contract(result, result_labels, x, term, keep)
        result, result_labels = _sum_labels(result, result_labels, set(result_labels) - keep)
    result, result_labels = _sum_labels(result, result_labels, set(result_labels) - set(output))
    if result_labels != output:
        result = result.permute(*(result_labels.index(c) for c in output))
    return result
