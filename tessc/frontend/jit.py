"""
`jit`: a Python function on NumPy arrays, traced into `tess` IR once per input signature and
run compiled.

`jit(f)` runs `f` once per input signature (the shapes and dtypes of its array arguments,
the values of its other arguments) with `Tensor`s (`tessc.frontend.tracer`) standing in for
the arrays. Every operator and method of a `Tensor` emits one `tess` op, so the trace is the
`tess` program of `f`; it is compiled (`tessc.compiler.compile_module`) and cached, and later
calls with the same signature run the compiled program directly. Constants the trace
captured are passed, after the user's arrays, on every call.

Arguments may be arrays (NumPy's; on the CPU also PyTorch's, JAX's and any `__dlpack__` or
`__array_interface__` exporter's, read without a copy) or (nested) tuples, lists, dicts,
dataclasses and array-holding objects of them. Python ints and
floats are traced as weakly typed 0-d arrays (JAX's rule: no retrace when a step count
changes) unless named by `static_argnums`/`static_argnames` or used as Python values; any
other argument (a string, None, a bool) is static: its value is part of the signature and
it is passed to `f` as is. A function returns a Tensor, or a tuple/list/dict of Tensors.
`flatten_tree`/`unflatten_tree` (`tessc.frontend.pytree`) take such a nest apart and put
it back together; `grad` (`tessc.frontend.grad`) flattens with them too, so its leaves come
in the tracer's order.

`jit(f, donate_argnums=(0, 2))` donates positional arguments, as in JAX: every array leaf
of a donated argument gets the `{tess.donated}` attribute on its argument of the traced
function, so the compiled program may overwrite it (`tess-memory-plan` aliases an output of
the same type to it, `tess-fuse-horizontal{donated-only=true}` packs its updates into one
kernel).

`TESSC_TIMING=1` prints a `tessc.timing` report for every call that traces or compiles.

Tracing one signature into a module is `trace_function.py`'s (`trace`, which `grad` uses
too); here the cache of compiled signatures, the steady-state call and `jit` itself.
"""

from __future__ import annotations

import functools
import inspect
import warnings
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from tessc import timing
from tessc.frontend import donation
from tessc.frontend.call_plan import MISS, compile_call_plan
from tessc.frontend.debug_print import debug_values, printer
from tessc.frontend.donation import DONATED, donated_to
from tessc.frontend.dynamic_shapes import (
    GenericCall,
    Refusal,
    call_constants,
    is_generic,
    new_generic_trace,
    size_in,
    static_sizes,
)
from tessc.frontend.pytree import (
    TreeDef,
    flatten_tree,
    leaf_count,
    match_tree,
    tree_builder,
    unflatten_tree,
)
from tessc.frontend.trace_function import (
    ARRAY_DTYPES,
    Signature,
    TracedFunction,
    flatten_arguments,
    leaf_type,
    trace_signature,
)
from tessc.frontend.tracer import DynamicSize, Tensor
from tessc.runtime.cuda import is_device_array

# ---------------------------------------------------------------------------------------
# the steady-state call: no binding, no Signature
# ---------------------------------------------------------------------------------------


@dataclass(frozen=True)
class _FastPath:
    """The last signature a `JitFunction` ran, as a plan to check the next call's
    positional arguments against it directly: `argument_trees` are its arguments'
    structures, `array_types` the (shape, dtype) of each array leaf."""

    signature: Signature
    argument_trees: tuple[TreeDef, ...]
    array_types: tuple[tuple[tuple[int, ...], np.dtype], ...]
    compiled: Callable[..., tuple[np.ndarray, ...]]
    constants: tuple[Any, ...]  # a device target's are resident on the device
    build_output: Callable[[Iterator[Any]], Any]
    takes_device_arrays: bool
    call: Callable[..., tuple[np.ndarray, ...]]
    """`compiled`, or its `call_checked` (no second check of what `leaves` checked) when
    the captured constants are C-contiguous arrays of a computed dtype as they are."""
    plan: Callable[..., Any] | None = None
    """The whole planned call as straight-line Python (`call_plan.compile_call_plan`):
    result, or `MISS`; None where the structure has none (then `leaves` and `call`)."""
    generic: GenericCall | None = None
    """A generic program's (`dynamic_shapes`): N, the array types and constants per call."""

    def constants_for(self, leaves: Sequence[Any]) -> tuple[Any, ...]:
        if self.generic is None:
            return self.constants
        return self.generic.constants(self.constants, self.generic.size(leaves))

    @staticmethod
    def of(
        traced: TracedFunction,
        compiled: Callable[..., Any],
        constants: tuple[Any, ...],
        name: str = "",
    ) -> _FastPath:
        call = compiled
        generic = is_generic(traced.signature)  # its plan: `leaves` with `GenericCall`
        checked = getattr(compiled, "call_checked", None)
        if checked is not None and all(
            isinstance(c, DynamicSize)  # N: an array of the computed dtype at every call
            or (type(c) is np.ndarray and c.flags.c_contiguous and c.dtype in ARRAY_DTYPES)
            for c in constants
        ):
            call = checked
        array_types = tuple((shape, np.dtype(dtype)) for shape, dtype in traced.signature.arrays)
        device = hasattr(compiled, "resident")
        runner = getattr(compiled, "runner", None)
        plan = make_plan = None
        build_output = tree_builder(traced.output_tree)
        if traced.debug:  # the outputs after the user's are printed (`debug_print`)
            build_output = _printing(build_output, printer(traced.debug))
        elif call is checked and runner is not None and not device:
            make_plan = functools.partial(
                compile_call_plan,
                traced.signature.tree[2],
                output_tree=traced.output_tree,
                run=runner(),
                donated=traced.signature.donated,
                returned=_returned_in_place(compiled, traced.signature.donated),
                function=name,
            )
            if not generic:  # a generic program's: one per N (`GenericCall.use_size`)
                plan = make_plan(array_types=array_types, constants=constants)
        return _FastPath(
            traced.signature,
            traced.signature.tree[2],
            array_types,
            compiled,
            constants,
            build_output,
            device,
            call,
            plan,
            GenericCall.of(traced.signature, constants, make_plan) if generic else None,
        )

    def leaves(self, args: tuple[Any, ...]) -> list[np.ndarray] | None:
        """The array leaves of `args` if the call has this signature and every leaf is a
        C-contiguous ndarray (what the full path would pass on unchanged), else None."""
        leaves: list[np.ndarray] = []
        for tree, arg in zip(self.argument_trees, args, strict=True):
            if not match_tree(tree, arg, leaves):
                return None
        if len(leaves) != len(self.array_types):
            return None
        if DONATED and any(donated_to(a) for a in leaves):
            return None  # the general path raises
        donated = self.signature.donated
        if donated and (
            len({id(a) for a in leaves}) != len(leaves)
            or any(getattr(leaves[d], "base", None) is not None for d in donated)
            or any(any(getattr(a, "base", None) is leaves[d] for d in donated) for a in leaves)
        ):
            return None  # the general path refuses aliases (see `compile_call_plan`)
        types = self.array_types
        if self.generic is not None:  # a generic program: the types for this call's N
            if (size := self.generic.size(leaves)) < 1:
                return None
            types = self.generic.array_types(size)
        for array, (shape, dtype) in zip(leaves, types, strict=True):
            if type(array) is not np.ndarray:  # a device array: the cuda target takes them
                if not self.takes_device_arrays or leaf_type(array) != (shape, dtype):
                    return None
            elif array.shape != shape or array.dtype != dtype or not array.flags.c_contiguous:
                return None
        return leaves


# ---------------------------------------------------------------------------------------
# jit
# ---------------------------------------------------------------------------------------

RETRACE_WARNING = 8
"""After this many traces of one function, `jit` warns once (as torch.compile's recompile
limit does): usually a Python number that changes every call is being baked in."""


class RetraceWarning(UserWarning):
    """A jitted function keeps being traced for new signatures."""


def _statics(tree: TreeDef) -> Iterator[TreeDef]:
    """The static nodes (non-array values) of an argument structure."""
    if not isinstance(tree, tuple) or not tree:
        return
    if tree[0] == "static":
        yield tree
        return
    for child in tree[1:]:
        if isinstance(child, tuple):
            for item in child:
                yield from _statics(item) if isinstance(item, tuple) else ()


class JitFunction:
    """A function compiled once per input signature; call it on NumPy arrays.

    `donate_argnums` (an index or a sequence of indices of positional arguments) lets the
    compiled program overwrite every array of those arguments, nested ones included: their
    func arguments carry `{tess.donated}`, an output of the same type may be computed in
    the donated array itself, and the call may return that very array object. After the
    call, a donated array's contents are undefined (it may hold an output, or scratch);
    use only what the call returned: a donated array the call did not return is marked,
    and passing it again raises (`tessc.frontend.donation`), as JAX's deleted arrays do.
    Donation is a permission, not a promise: an output may still be a new array (the
    `reference` target never aliases). A donated array that shares memory with another
    argument is refused. The donated positions are part of each signature
    (`Signature.donated`).

    On a method (`@jit` in a class body, or `jit(obj.method)`), `self` is an argument: an
    instance holding arrays is a pytree node (`pytree`), read at every call.
    """

    def __init__(
        self,
        fn: Callable,
        *,
        target: str = "cpu",
        donate_argnums: int | Sequence[int] = (),
        static_argnums: int | Sequence[int] = (),
        static_argnames: str | Sequence[str] = (),
        dynamic: bool | None = None,
    ):
        functools.update_wrapper(self, fn)
        self.fn = fn
        self.target = target
        # Automatic dynamic shapes (`dynamic_shapes`): None: a generic program after one
        # size changed between calls; True: at the first call; False: never.
        self.dynamic = dynamic
        self.generic: Signature | None = None  # the generic program's signature (`?` dims)
        self.dynamic_refused: Refusal | None = None
        self.compile_count = 0  # programs compiled (`compile_module` calls)
        numbers = (donate_argnums,) if isinstance(donate_argnums, int) else donate_argnums
        if any(not isinstance(n, int) or isinstance(n, bool) or n < 0 for n in numbers):
            raise TypeError(f"donate_argnums must be non-negative ints, got {donate_argnums!r}")
        self.donate_argnums: tuple[int, ...] = tuple(sorted(set(numbers)))
        self.trace_count = 0
        # Argument plans (`_FastPath`) built: one per change of signature between calls.
        self.plan_builds = 0
        self._parameters = inspect.signature(fn)
        kinds = [p.kind for p in self._parameters.parameters.values()]
        positional = sum(k <= inspect.Parameter.POSITIONAL_OR_KEYWORD for k in kinds)
        if inspect.Parameter.VAR_POSITIONAL not in kinds and any(
            n >= positional for n in self.donate_argnums
        ):
            raise ValueError(
                f"donate_argnums={self.donate_argnums}: `{getattr(fn, '__name__', fn)}` has "
                f"{positional} positional parameters"
            )
        self._static = _static_names(self._parameters, static_argnums, static_argnames)
        # Python numbers are traced until the function needs one's value (then all are
        # static for it: see `_lookup`).
        self._trace_scalars = True
        self._traces: dict[Signature, TracedFunction] = {}
        self._compiled: dict[Signature, Callable[..., tuple[np.ndarray, ...]]] = {}
        self._constants: dict[Signature, tuple[Any, ...]] = {}
        # The fast path takes exactly one positional argument per parameter, nothing else.
        self._arity = (
            len(kinds) if all(k <= inspect.Parameter.POSITIONAL_OR_KEYWORD for k in kinds) else -1
        )
        self._fast: _FastPath | None = None

    def __repr__(self) -> str:
        donated = f" donate_argnums={self.donate_argnums}" if self.donate_argnums else ""
        name = getattr(self.fn, "__qualname__", self.fn)
        return f"<tessc.jit {name} target={self.target}{donated}>"

    def __get__(self, instance: Any, owner: type | None = None) -> Any:
        return self if instance is None else functools.partial(self, instance)

    def _lookup(self, args: Sequence[Any], kwargs: dict[str, Any]) -> tuple:
        signature, arrays = flatten_arguments(
            self._parameters,
            args,
            kwargs,
            frozenset(self.donate_argnums),
            self._trace_scalars,
            self._static,
        )
        traced = self._traces.get(signature)
        if traced is None:
            traced = self._generic_trace(signature, [name for name, _ in arrays])
        if traced is None:
            try:
                with timing.phase("trace"):
                    traced = trace_signature(
                        self.fn, signature, [name for name, _ in arrays], debug_outputs=True
                    )
            except Exception as error:
                if not signature.weak:
                    raise
                # The function uses a number as a Python value (a shape, a dim, a loop
                # count): that parameter becomes static (JAX would ask for static_argnums);
                # if the failure named none, all numbers do. A real error is raised again
                # by the retrace.
                needed = getattr(error, "tessc_concretized", ())
                parameters = _leaf_parameters(signature.tree)
                if needed:
                    self._static = self._static | {parameters[i] for i in needed}
                else:
                    self._trace_scalars = False
                return self._lookup(args, kwargs)
            self._traces[signature] = traced
            self.trace_count += 1
            if self.trace_count == RETRACE_WARNING:
                warnings.warn(RetraceWarning(self._retrace_message()), stacklevel=3)
        return traced, [array for _, array in arrays], [path for path, _ in arrays]

    def _generic_trace(self, signature: Signature, names: list[str]) -> TracedFunction | None:
        """The generic program's trace where `signature` is an instance of it, traced now
        where this call is the first to differ in one size (`dynamic_shapes`); None where
        the call is to be traced for its own shapes."""
        if self.dynamic is False or self.target != "cpu" or self.dynamic_refused is not None:
            return None
        if self.generic is not None:
            return self._traces[self.generic] if size_in(self.generic, signature) else None
        found = new_generic_trace(self.fn, self.dynamic, self._traces, signature, names)
        if not isinstance(found, tuple):
            self.dynamic_refused = found  # None: no generic signature fits (yet)
            return None
        self.generic, traced = found
        self._traces[self.generic] = traced
        self.trace_count += 1
        return traced

    def _retrace_message(self) -> str:
        """Why a function was traced `RETRACE_WARNING` times, and what to do about it."""
        name = getattr(self.fn, "__qualname__", self.fn)
        statics = sorted(
            {f"{type(node[2]).__name__}" for sig in self._traces for node in _statics(sig.tree)}
        )
        hint = (
            f" Its non-array arguments ({', '.join(statics)}) are part of each signature: "
            "a static value that changes every call (in static_argnums/static_argnames, or "
            "a Python number the function uses as a Python value) retraces and recompiles "
            "every time; pass a changing number as a traced argument instead."
            if statics
            else " Each distinct shape or dtype of an argument is a new signature."
        )
        return f"`{name}` has been traced {self.trace_count} times (one per signature).{hint}"

    def trace(self, *args: Any, **kwargs: Any) -> TracedFunction:
        """The (cached) trace for these arguments."""
        return self._lookup(args, kwargs)[0]

    def ir(self, *args: Any, stage: str = "tess", **kwargs: Any) -> str:
        """The program for these arguments as text at `stage` ("tess" ... "numba"), as the
        target's pipeline lowers it (the `cpu` pipeline's for the `reference` target)."""
        from tessc.compiler import lower

        traced = self.trace(*args, **kwargs)
        pipeline = "cpu" if self.target == "reference" else self.target
        return lower(traced.module, stage, pipeline=pipeline)

    def planned(self, *args: Any) -> Any:
        """The call's result where it takes the planned path (`call_plan`), else `MISS`
        (then nothing ran): for a caller that tries it before flattening the arguments."""
        fast = self._fast
        if fast is None or fast.plan is None or len(args) != self._arity:
            return MISS
        return fast.plan(*args)

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        fast = self._fast
        if fast is not None and not kwargs and len(args) == self._arity:
            if fast.plan is not None and (result := fast.plan(*args)) is not MISS:
                return result
            generic = fast.generic
            if generic is not None and (result := generic.call(args)) is not MISS:
                return result
            leaves = fast.leaves(args)
            if leaves is not None:
                if generic is not None:  # the next call of this N takes its plan
                    generic.use_size(generic.size(leaves), fast.constants)
                outputs = fast.call(*leaves, *fast.constants_for(leaves))
                for d in fast.signature.donated:
                    if not any(leaves[d] is output for output in outputs):
                        donation.mark(leaves[d], getattr(self.fn, "__name__", "?"))
                donation.unmark_returned(outputs)
                return fast.build_output(iter(outputs))
        if _holds_tensor(args, kwargs):
            # Called while an outer jit traces (`jit(jit(f))`, or a jitted helper called
            # from a jitted function): trace through, as JAX does, into the outer program.
            return self.fn(*args, **kwargs)
        name = getattr(self.fn, "__name__", "?")
        with timing.report_if_enabled(f"jit {getattr(self.fn, '__qualname__', '?')}"):
            traced, arrays, paths = self._lookup(args, kwargs)
            if DONATED:
                donation.check(arrays, paths)
            donated = traced.signature.donated
            if donated:
                donation.refuse_aliases(arrays, paths, donated, name)
            compiled = self._compiled.get(traced.signature)
            first_call = compiled is None
            if compiled is None:
                from tessc.compiler import compile_module  # loads Numba: only when first called

                try:
                    compiled = compile_module(traced.module, traced.entry, self.target)
                except Exception as error:
                    if traced.signature is not self.generic:
                        raise
                    # A pass refused a `?` dim: this and every later size compile statically.
                    self.dynamic_refused = Refusal(f"{type(error).__name__}: {error}")
                    del self._traces[traced.signature]
                    self.generic = None
                    return self(*args, **kwargs)
                self.compile_count += 1
                self._compiled[traced.signature] = compiled
                # A device target keeps the captured constants on the device: one upload.
                resident = getattr(compiled, "resident", None)
                constants = resident(traced.constants) if resident else traced.constants
                self._constants[traced.signature] = constants
            constants = self._constants[traced.signature]
            constants = call_constants(traced.signature, constants, arrays)  # N filled in
            if not hasattr(compiled, "resident"):
                for path, array in zip(paths, arrays, strict=True):
                    if is_device_array(array):
                        raise TypeError(
                            f"argument `{path}` ({type(array).__module__.split('.')[0]}."
                            f"{type(array).__qualname__}) is an array on a GPU, passed to "
                            f"`{name}`, compiled for target '{self.target}': use "
                            'target="cuda", or copy it to the host first'
                        )
            inputs = [a if is_device_array(a) else np.asarray(a, order="C") for a in arrays]
            with timing.phase("first call (Numba: compile or load, run)" if first_call else "call"):
                outputs = compiled(*inputs, *constants)
            returned = {id(output) for output in outputs}
            for d in donated:  # its buffer may now hold an output, or scratch
                if id(arrays[d]) not in returned:
                    donation.mark(arrays[d], name)
            donation.unmark_returned(outputs)
        if (
            not kwargs
            and len(args) == self._arity
            and (fast is None or fast.signature is not traced.signature)
        ):
            self._fast = _FastPath.of(traced, compiled, self._constants[traced.signature], name)
            if self._fast.generic is not None and self.generic is not None:
                self._fast.generic.static_sizes = static_sizes(self.generic, self._compiled)
            self.plan_builds += 1
        planned = self._fast
        if (
            planned is not None
            and planned.signature is traced.signature
            and planned.plan
            and planned.signature.donated  # else nothing reads it, and holding outputs
        ):  # would keep this call's (large) results alive for the jit's lifetime
            planned.plan.trust(outputs)  # the views it returned may come back donated
        if traced.debug:
            printed = len(debug_values(traced.debug))
            printer(traced.debug)(outputs[len(outputs) - printed :])
        return unflatten_tree(traced.output_tree, list(outputs))


def _printing(
    build: Callable[[Iterator[Any]], Any], emit: Callable[[Sequence[Any]], None]
) -> Callable[[Iterator[Any]], Any]:
    """`build`, then `emit` of the outputs it left (the printed values)."""

    def build_and_print(outputs: Iterator[Any]) -> Any:
        result = build(outputs)
        emit(list(outputs))
        return result

    return build_and_print


def _returned_in_place(compiled: Any, donated: Sequence[int]) -> frozenset[int] | None:
    """The donated leaves the compiled program returns as themselves (its memory plan
    computes an output in them: `output_aliases`), or None where that is not known."""
    aliases = getattr(compiled, "output_aliases", None)
    if (
        aliases is None
        or getattr(compiled, "input_slots", ())
        or getattr(compiled, "output_slots", ())
    ):
        return None
    return frozenset(k for k in aliases if k is not None and k in donated)


def _holds_tensor(args: Sequence[Any], kwargs: dict[str, Any]) -> bool:
    _, leaves = flatten_tree(
        (tuple(args), kwargs), lambda v: not isinstance(v, tuple | list | dict), ""
    )
    return any(isinstance(leaf, Tensor) for _, leaf in leaves)


def _leaf_parameters(tree: TreeDef) -> list[str]:
    """The parameter each array leaf of an `("arguments", ...)` structure belongs to."""
    return [
        name for name, child in zip(tree[1], tree[2], strict=True) for _ in range(leaf_count(child))
    ]


def _static_names(
    parameters: inspect.Signature,
    static_argnums: int | Sequence[int],
    static_argnames: str | Sequence[str],
) -> frozenset[str]:
    """The parameter names `static_argnums` (positions) and `static_argnames` name."""
    numbers = (static_argnums,) if isinstance(static_argnums, int) else tuple(static_argnums)
    names = (static_argnames,) if isinstance(static_argnames, str) else tuple(static_argnames)
    positional = [
        name
        for name, p in parameters.parameters.items()
        if p.kind <= inspect.Parameter.POSITIONAL_OR_KEYWORD
    ]
    for n in numbers:
        if (
            not isinstance(n, int)
            or isinstance(n, bool)
            or not -len(positional) <= n < len(positional)
        ):
            raise ValueError(
                f"static_argnums={static_argnums!r}: the function has {len(positional)} "
                "positional parameters"
            )
    for name in names:
        if name not in parameters.parameters:
            raise ValueError(f"static_argnames names no parameter: {name!r}")
    return frozenset([positional[n] for n in numbers] + list(names))


def jit(
    fn: Callable | None = None,
    *,
    target: str = "cpu",
    donate_argnums: int | Sequence[int] = (),
    static_argnums: int | Sequence[int] = (),
    static_argnames: str | Sequence[str] = (),
    dynamic: bool | None = None,
) -> Any:
    """`@jit`, `@jit(target="reference", donate_argnums=(0, 2))` or `jit(f, ...)`.

    Python ints and floats are traced, as in JAX: weakly typed 0-d arrays (they take the
    dtype of the tensors they meet, as the numbers would), so a step count or a learning
    rate that changes every call does not retrace. The arguments in `static_argnums`
    (positions) or `static_argnames` are static: their values are part of the signature and
    reach `f` as they are. Unlike JAX, a function that uses a number as a Python value (a
    shape, a slice bound) still traces: that parameter then becomes static (all of them if
    the value came from arithmetic on numbers).

    `donate_argnums`: the positional arguments whose arrays the call may overwrite (see
    `JitFunction`): after the call their contents are undefined; use the returned arrays
    (for a donated `w` and an output of its type, often `w` itself, updated in place).

    `dynamic` (`cpu`): by default, once a call differs from an earlier one in one size
    (a new batch), a program with that size `?` serves every later size without a
    compile (`dynamic_shapes`); `True`: from the first call, `False`: never.
    """
    options = {
        "target": target,
        "donate_argnums": donate_argnums,
        "static_argnums": static_argnums,
        "static_argnames": static_argnames,
        "dynamic": dynamic,
    }
    if fn is None:
        return lambda f: jit(f, **options)
    if inspect.ismethod(fn) and not isinstance(fn.__self__, type):
        return BoundMethodJit(fn, **options)
    return JitFunction(fn, **options)


class BoundMethodJit(JitFunction):
    """`jit(obj.method)`: the method's function, with `obj` passed as its first argument
    at every call, so the arrays `obj` holds are read then (`pytree`'s object nodes), not
    baked in at the first trace. Argument numbers count from the method's own first
    parameter after `self`, as the bound method is called."""

    def __init__(self, method: Any, **options: Any):
        for option in ("donate_argnums", "static_argnums"):
            numbers = options.get(option, ())
            numbers = (numbers,) if isinstance(numbers, int) else tuple(numbers)
            options[option] = tuple(n + 1 if n >= 0 else n for n in numbers)
        super().__init__(method.__func__, **options)
        self.instance = method.__self__

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        return super().__call__(self.instance, *args, **kwargs)

    def trace(self, *args: Any, **kwargs: Any) -> TracedFunction:
        return super().trace(self.instance, *args, **kwargs)
