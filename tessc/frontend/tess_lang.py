"""
The `.tess` source language: tensor functions in a small subset of Python's syntax.

    def mlp(x: f32[32, 64], w1: f32[64, 128], b1: f32[128], w2: f32[128, 10]) -> f32[32]:
        h = relu(x @ w1 + b1)
        return sum(h @ w2, dim=1)

The grammar is `tess.lark` (lark's LALR parser with an indentation post-lexer,
`tess_syntax.py`).
`parse_tess(text, filename)` parses a file and lowers every `def` to one `func.func` of
`tess` ops, built through the same `TessBuilder` calls the Python tracer makes for the same
program, so the two frontends print identical IR:

- a parameter is typed `f32[2, 3]`, `f64[]` or `f32` (rank 0); the result type after `->`
  (one type or a parenthesised tuple) is optional and, when given, checked;
- operators are Python's, with Python's precedence: `+ - * / @ **`, unary `-`, and the
  comparisons `< > <= >= == !=` (0/1 in the operand dtype);
- the built-in functions are the `tessc` function forms, also callable as methods
  (`relu(x)` or `x.relu()`, `sum(x, dim=1, keepdim=True)`, `x.T`); `max`/`min` reduce,
  `maximum`/`minimum` are elementwise;
- numbers are Python numbers (folded when both operands are numbers) and become rank-0
  `tess.fill`s of the other operand's dtype; `[2, 3]` and `(0, 1)` are shapes and dims;
- calling another `def` of the file inlines it (as tracing a Python call does), checking
  the argument types against its signature;
- `x.shape[i]` and `x.ndim` are numbers, `x[i, j]` an integer-indexed view; `tessc.nn`'s
  functions (`softmax(z, dim=1)`, `cross_entropy(logits, labels)`, ...), the tracer's
  `sin`, `cos`, `prod`, `var`, `std`, `argmax`, `clip`, `astype(i32)`, `take`, `one_hot`,
  `concatenate`, `stack`, `squeeze`, `flatten`, `stop_gradient`, and
  `grad(f, wrt=w)(x, w)` / `value_and_grad(...)` of a `def` are built in
  (`tess_functions.py`: the Python frontend's own code, so both print the same IR).

Errors are `TessSourceError`s (an xDSL `ParseError`, so `tessc-opt` reports them like IR
parse errors), printed as `file:line:col: error: message`: a syntax error says what was
expected there, a shape error names the shapes and quotes the expression.
"""

from __future__ import annotations

import inspect
import math
from collections.abc import Callable, Sequence
from typing import Any

from lark import Token, Tree
from xdsl.dialects import func
from xdsl.dialects.builtin import Float32Type, Float64Type, ModuleOp, TensorType
from xdsl.ir import Block, SSAValue

from tessc.dialects.builder import TessBuilder, finish_function
from tessc.dialects.builder_types import TessError, dtype_name, element_type, shape_of, tensor_type
from tessc.frontend.tess_functions import Gradient, nn_builtins, splice_gradient, subscript
from tessc.frontend.tess_syntax import TessSourceError, parse_tree


def parse_tess(text: str, filename: str = "<tess>") -> ModuleOp:
    """Parse a `.tess` file into a verified module of `tess` functions."""
    tree = parse_tree(text, filename)
    module = ModuleOp(_Lowering(text, filename, tree).functions())
    module.verify()
    return module


# ---------------------------------------------------------------------------------------
# built-in functions: the same builder calls the Tensor methods make
# ---------------------------------------------------------------------------------------

Value = Any  # SSAValue (a tensor), int, float, bool, a tuple of values, or a dtype


def _kind(value: Value) -> str:
    if isinstance(value, SSAValue):
        return f"a tensor {_type_text(value)}"
    if isinstance(value, bool):
        return "a boolean"
    if isinstance(value, int | float):
        return "a number"
    if isinstance(value, tuple):
        return "a list"
    if isinstance(value, Gradient):
        return f"the gradient function of `{value.function}`"
    return "a dtype"


def _tensor(value: Value) -> SSAValue:
    if not isinstance(value, SSAValue):
        raise TessError(f"expected a tensor, got {_kind(value)}")
    return value


def _operand(value: Value) -> SSAValue | float:
    if isinstance(value, SSAValue):
        return value
    if isinstance(value, int | float) and not isinstance(value, bool):
        return float(value)
    raise TessError(f"expected a tensor or a number, got {_kind(value)}")


def _int(value: Value) -> int:
    if isinstance(value, int) and not isinstance(value, bool):
        return value
    raise TessError(f"expected an integer, got {_kind(value)}")


def _ints(values: Sequence[Value]) -> tuple[int, ...]:
    """`f(2, 3)` or `f([2, 3])` -> (2, 3)."""
    if len(values) == 1 and isinstance(values[0], tuple):
        values = values[0]
    return tuple(_int(v) for v in values)


def _dims(value: Value) -> int | tuple[int, ...] | None:
    return None if value is None else _int(value) if not isinstance(value, tuple) else _ints(value)


def _bool(value: Value) -> bool:
    if isinstance(value, bool):
        return value
    raise TessError(f"expected True or False, got {_kind(value)}")


def _unary(name: str) -> Callable[..., SSAValue]:
    return lambda b, x: getattr(b, name)(_tensor(x))


def _binary(name: str) -> Callable[..., SSAValue]:
    return lambda b, lhs, rhs: getattr(b, name)(_operand(lhs), _operand(rhs))


def _reduction(name: str) -> Callable[..., SSAValue]:
    return lambda b, x, dim=None, keepdim=False: getattr(b, name)(
        _tensor(x), _dims(dim), _bool(keepdim)
    )


def _transpose_all(b: TessBuilder, x: Value) -> SSAValue:
    """`x.T`: every dim reversed; rank 0 and 1 unchanged (as `Tensor.T`)."""
    x = _tensor(x)
    rank = len(shape_of(x))
    return x if rank < 2 else b.permute(x, tuple(reversed(range(rank))))


def _full(b: TessBuilder, shape: Value, value: Value, dtype: Value = None) -> SSAValue:
    return b.fill(float(_operand(value)), _ints((shape,)), _dtype(dtype))


def _dtype(value: Value) -> Float32Type | Float64Type:
    if value is None:
        return element_type("f32")
    if isinstance(value, Float32Type | Float64Type):
        return value
    raise TessError(f"expected the dtype f32 or f64, got {_kind(value)}")


BUILTINS: dict[str, Callable[..., SSAValue]] = {
    **{name: _unary(name) for name in ("exp", "log", "relu", "sigmoid", "tanh", "sqrt")},
    **{name: _unary(name) for name in ("abs", "neg", "reciprocal")},
    **{name: _binary(name) for name in ("maximum", "minimum", "pow", "matmul")},
    "where": lambda b, cond, lhs, rhs: b.select(_operand(cond), _operand(lhs), _operand(rhs)),
    "sum": _reduction("sum"),
    "mean": _reduction("mean"),
    "max": _reduction("max_over"),
    "min": _reduction("min_over"),
    "reshape": lambda b, x, *shape: b.reshape(_tensor(x), _ints(shape)),
    "view": lambda b, x, *shape: b.reshape(_tensor(x), _ints(shape)),
    "permute": lambda b, x, *dims: b.permute(_tensor(x), _ints(dims)),
    "transpose": lambda b, x, dim0=-2, dim1=-1: b.transpose(_tensor(x), _int(dim0), _int(dim1)),
    "broadcast_to": lambda b, x, *shape: b.broadcast_to(_tensor(x), _ints(shape)),
    "unsqueeze": lambda b, x, dim: b.unsqueeze(_tensor(x), _int(dim)),
    "full": _full,
    "zeros": lambda b, shape, dtype=None: _full(b, shape, 0.0, dtype),
    "ones": lambda b, shape, dtype=None: _full(b, shape, 1.0, dtype),
}
ATTRIBUTES: dict[str, Callable[[TessBuilder, Value], Value]] = {
    "T": _transpose_all,
    "shape": lambda b, x: tuple(shape_of(_tensor(x))),
    "ndim": lambda b, x: len(shape_of(_tensor(x))),
}
CONSTANTS: dict[str, Value] = {
    "True": True,
    "False": False,
    "f32": element_type("f32"),
    "f64": element_type("f64"),
    "i32": element_type("i32"),
    "i64": element_type("i64"),
    "bool": element_type("bool"),
}
OPERATORS = ("add", "sub", "mul", "div", "pow", "matmul", "lt", "gt", "le", "ge", "eq", "ne")
_FOLD: dict[str, Callable[[Any, Any], Any]] = {
    "add": lambda a, b: a + b,
    "sub": lambda a, b: a - b,
    "mul": lambda a, b: a * b,
    "div": lambda a, b: a / b,
    "pow": lambda a, b: a**b,
}


_MAX_CONSTANT = 2**1024  # beyond the largest f64: a constant no tensor could hold


def _number(text: str) -> int | float:
    """A numeric literal; out of f64's range is an error (and a 10,000-digit integer is
    never converted: Python limits int-from-text conversions)."""
    if text.isdigit():
        if len(text.lstrip("0")) > 309:
            raise TessError(f"the number {text[:20]}... is out of range (beyond f64)")
        return int(text)
    value = float(text)
    if math.isinf(value):
        raise TessError(f"the number {text} is out of range (beyond f64)")
    return value


def _fold(kind: str, lhs: int | float, rhs: int | float) -> int | float:
    """`lhs <kind> rhs` of two numbers, within f64's range: `10 ** 10 ** 9` is an error
    found from the operands' sizes, not after computing a billion-digit integer."""
    if kind == "pow" and isinstance(lhs, int) and isinstance(rhs, int) and abs(lhs) > 1:
        if rhs > 0 and rhs * math.log2(abs(lhs)) > 1024:
            raise TessError("the constant is out of range (beyond f64)")
    try:
        value = _FOLD[kind](lhs, rhs)
    except ZeroDivisionError:
        raise TessError("division by zero") from None
    except OverflowError:
        raise TessError("the constant is out of range (beyond f64)") from None
    if isinstance(value, complex):
        raise TessError("the constant is not a real number")
    if (
        isinstance(value, int)
        and abs(value) >= _MAX_CONSTANT
        or (isinstance(value, float) and math.isinf(value))
    ):
        raise TessError("the constant is out of range (beyond f64)")
    return value


def _type_text(value: SSAValue) -> str:
    """A tensor's type in `.tess` notation: `f32[3, 4]`."""
    return _types_text([value.type])


# ---------------------------------------------------------------------------------------
# lowering a parse tree to tess
# ---------------------------------------------------------------------------------------


class _Lowering:
    """Evaluates each `def` symbolically: names map to SSA values, numbers or tuples."""

    def __init__(self, text: str, filename: str, tree: Tree):
        self.text = text
        self.filename = filename
        self.defs: dict[str, Tree] = {}
        for funcdef in tree.children:
            name = str(funcdef.children[0])
            if name in self.defs:
                raise self.error(funcdef.children[0], f"function `{name}` is defined twice")
            self.defs[name] = funcdef
        self.call_stack: list[str] = []

    # -- errors ---------------------------------------------------------------------------

    def error(self, node: Tree | Token, message: str) -> TessSourceError:
        if isinstance(node, Token):
            start, end = node.start_pos or 0, node.end_pos or 0
        else:
            start, end = node.meta.start_pos, node.meta.end_pos
        return TessSourceError(self.text, self.filename, start, message, end - start)

    def source(self, node: Tree) -> str:
        return " ".join(self.text[node.meta.start_pos : node.meta.end_pos].split())

    # -- functions ------------------------------------------------------------------------

    def functions(self) -> list[func.FuncOp]:
        return [self.function(name, funcdef) for name, funcdef in self.defs.items()]

    def signature(self, funcdef: Tree) -> tuple[list[tuple[Token, TensorType]], list | None]:
        _, params, results, _ = funcdef.children
        parameters: list[tuple[Token, TensorType]] = []
        for param in params.children if params is not None else ():
            name, typ = param.children
            if any(name == seen for seen, _ in parameters):
                raise self.error(name, f"parameter `{name}` is declared twice")
            parameters.append((name, self.tensor_type(typ)))
        if results is None:
            return parameters, None
        return parameters, [self.tensor_type(t) for t in results.children]

    def tensor_type(self, node: Tree) -> TensorType:
        dtype_token, dims = node.children[0], node.children[-1] if len(node.children) > 1 else None
        if str(dtype_token) not in _TYPE_NAMES:
            raise self.error(
                dtype_token,
                f"unknown dtype `{dtype_token}`; expected f32, f64, i32, i64 or bool",
            )
        shape = []
        for dim in dims.children if dims is not None else ():
            if not str(dim).isdigit():
                raise self.error(dim, f"a dimension must be a non-negative integer, got {dim}")
            if len(str(dim).lstrip("0")) > 12:  # 10**12 elements: no machine holds them
                raise self.error(dim, f"the dimension {str(dim)[:20]} is too large")
            shape.append(int(dim))
        return tensor_type(shape, str(dtype_token))

    def function(self, name: str, funcdef: Tree) -> func.FuncOp:
        parameters, declared = self.signature(funcdef)
        block = Block(arg_types=[typ for _, typ in parameters])
        for arg, (param, _) in zip(block.args, parameters, strict=True):
            if SSAValue.is_valid_name(str(param)):
                arg.name_hint = str(param)
        builder = TessBuilder.at_end(block)
        env = {str(param): arg for arg, (param, _) in zip(block.args, parameters, strict=True)}
        results, return_node = self.body(name, funcdef, env, builder)
        if declared is not None:
            actual = [value.type for value in results]
            if actual != declared:
                raise self.error(
                    return_node,
                    f"`{name}` returns {_types_text(actual)} but is declared to return "
                    f"{_types_text(declared)}",
                )
        builder.ret(*results)
        return finish_function(name, block)

    def body(
        self, name: str, funcdef: Tree, env: dict[str, Value], b: TessBuilder
    ) -> tuple[list[SSAValue], Tree]:
        statements = funcdef.children[3].children
        self.call_stack.append(name)
        try:
            for i, statement in enumerate(statements):
                if statement.data == "return_stmt":
                    if i != len(statements) - 1:
                        raise self.error(statements[i + 1], "unreachable code after `return`")
                    values = [self.expr(e, env, b) for e in statement.children if e is not None]
                    for value, node in zip(values, statement.children, strict=False):
                        if not isinstance(value, SSAValue):
                            raise self.error(
                                node, f"a function returns tensors, not {_kind(value)}"
                            )
                    return values, statement
                targets = [c for c in statement.children if isinstance(c, Token)]
                expressions = [c for c in statement.children if isinstance(c, Tree)]
                values = tuple(self.expr(e, env, b) for e in expressions)
                self.assign(targets, values[0] if len(values) == 1 else values, env, statement)
            raise self.error(funcdef.children[0], f"`{name}` has no `return` statement")
        finally:
            self.call_stack.pop()

    def assign(self, targets: list[Token], value: Value, env: dict, node: Tree) -> None:
        if len(targets) == 1:
            env[str(targets[0])] = value
            return
        if not isinstance(value, tuple) or len(value) != len(targets):
            count = len(value) if isinstance(value, tuple) else 1
            raise self.error(node, f"cannot unpack {count} value(s) into {len(targets)} names")
        for target, item in zip(targets, value, strict=True):
            env[str(target)] = item

    # -- expressions ----------------------------------------------------------------------

    def expr(self, node: Tree | Token, env: dict[str, Value], b: TessBuilder) -> Value:
        if isinstance(node, Token):  # an unaliased single-token rule cannot occur; be safe
            raise self.error(node, f"unexpected {node!r}")
        try:
            return self.evaluate(node, env, b)
        except TessSourceError:
            raise
        except RecursionError:
            raise self.error(node, "expression nested too deeply") from None
        except TessError as error:
            raise self.error(node, f"{error} in `{self.source(node)}`") from None

    def evaluate(self, node: Tree, env: dict[str, Value], b: TessBuilder) -> Value:
        kind = node.data
        children = node.children
        if kind == "name":
            name = str(children[0])
            if name in env:
                return env[name]
            if name in CONSTANTS:
                return CONSTANTS[name]
            raise self.error(node, f"undefined name `{name}`")
        if kind == "number":
            return _number(str(children[0]))
        if kind in ("tuple", "list"):
            return tuple(self.expr(c, env, b) for c in children if c is not None)
        if kind == "neg":
            value = self.expr(children[0], env, b)
            if isinstance(value, int | float) and not isinstance(value, bool):
                return -value
            return b.neg(_tensor(value))
        if kind in OPERATORS:
            # A left-associative chain (`a + b + ... + z`, 400 terms deep) is evaluated in
            # a loop from its leftmost operand: recursion would exceed Python's limit.
            chain: list[Tree] = []
            while isinstance(node, Tree) and node.data in OPERATORS and node.data != "pow":
                chain.append(node)
                node = node.children[0]
            value = self.expr(node, env, b) if chain else self.expr(children[0], env, b)
            if not chain:  # `pow` is right-associative: `2 ** 3 ** 2` is `2 ** 9`
                return self.operator("pow", value, self.expr(children[1], env, b), b)
            for link in reversed(chain):
                rhs = self.expr(link.children[1], env, b)
                try:
                    value = self.operator(link.data, value, rhs, b)
                except TessError as error:
                    raise self.error(link, f"{error} in `{self.source(link)}`") from None
            return value
        if kind == "call":
            name, args = children
            return self.call(node, name, [], args, env, b)
        if kind == "apply":  # `grad(f, wrt=w)(x, w)`
            callee, args = children
            function = self.expr(callee, env, b)
            if not isinstance(function, Gradient):
                raise self.error(callee, f"{_kind(function)} is not callable")
            return self.apply_gradient(node, function, args, env, b)
        if kind == "subscript":
            receiver, *index = children
            value = self.expr(receiver, env, b)
            return subscript(b, value, [self.expr(i, env, b) for i in index])
        if kind == "method_call":
            receiver, name, args = children
            if str(name) in self.defs:
                raise self.error(name, f"`{name}` is a function, not a method")
            return self.call(node, name, [self.expr(receiver, env, b)], args, env, b)
        if kind == "attribute":
            receiver, name = children
            if str(name) not in ATTRIBUTES:
                raise self.error(name, f"unknown attribute `{name}`")
            return ATTRIBUTES[str(name)](b, self.expr(receiver, env, b))
        raise self.error(node, f"unexpected `{self.source(node)}`")

    def operator(self, kind: str, lhs: Value, rhs: Value, b: TessBuilder) -> Value:
        if not isinstance(lhs, SSAValue) and not isinstance(rhs, SSAValue):
            if kind in _FOLD and all(isinstance(v, int | float) for v in (lhs, rhs)):
                return _fold(kind, lhs, rhs)
            raise TessError(f"`{kind}` of {_kind(lhs)} and {_kind(rhs)} needs a tensor operand")
        return getattr(b, kind)(_operand(lhs), _operand(rhs))

    def call(
        self,
        node: Tree,
        name: Token,
        receiver: list[Value],
        args: Tree | None,
        env: dict[str, Value],
        b: TessBuilder,
    ) -> Value:
        if not receiver and str(name) in ("grad", "value_and_grad") and str(name) not in env:
            return self.gradient_function(node, str(name), args)
        if not receiver and isinstance(env.get(str(name)), Gradient):
            return self.apply_gradient(node, env[str(name)], args, env, b)
        positional, keywords = self.arguments(receiver, args, env, b)
        if str(name) in self.defs:
            return self.inline(node, str(name), positional, keywords, b)
        builtin = BUILTINS.get(str(name)) or nn_builtins().get(str(name))
        if builtin is None:
            raise self.error(name, f"unknown function `{name}`")
        try:
            inspect.signature(builtin).bind(b, *positional, **keywords)
        except TypeError as error:
            raise self.error(node, f"`{name}`: {error}") from None
        return builtin(b, *positional, **keywords)

    def arguments(
        self, receiver: list[Value], args: Tree | None, env: dict[str, Value], b: TessBuilder
    ) -> tuple[list[Value], dict[str, Value]]:
        positional = list(receiver)
        keywords: dict[str, Value] = {}
        for arg in args.children if args is not None else ():
            if isinstance(arg, Tree) and arg.data == "keyword":
                key, value = arg.children
                if str(key) in keywords:
                    raise self.error(key, f"keyword argument `{key}` is repeated")
                keywords[str(key)] = self.expr(value, env, b)
            elif keywords:
                raise self.error(arg, "a positional argument follows a keyword argument")
            else:
                positional.append(self.expr(arg, env, b))
        return positional, keywords

    def gradient_function(self, node: Tree, kind: str, args: Tree | None) -> Gradient:
        """`grad(f, wrt=w)`: `f` a `def` of the file, `wrt` its parameters (names or
        positions, one or a tuple; default the first). Read as syntax, not evaluated:
        `w` names `f`'s parameter, whatever `w` is where `grad` is written."""
        items = list(args.children) if args is not None else []
        keywords = {str(a.children[0]): a for a in items if _is_keyword(a)}
        positional = [a for a in items if not _is_keyword(a)]
        if len(positional) != 1 or set(keywords) - {"wrt"}:
            raise self.error(node, f"`{kind}` takes a function and `wrt=`: {kind}(f, wrt=x)")
        target = positional[0]
        if target.data != "name" or str(target.children[0]) not in self.defs:
            raise self.error(target, f"`{kind}` differentiates a `def` of this file")
        function = str(target.children[0])
        names = [str(param) for param, _ in self.signature(self.defs[function])[0]]
        wrt_node = keywords["wrt"].children[1] if "wrt" in keywords else None
        single = wrt_node is None or wrt_node.data not in ("tuple", "list")
        chosen = [wrt_node] if single else [c for c in wrt_node.children if c is not None]
        wrt = []
        for item in chosen:
            if item is None:
                position = 0
            elif item.data == "name" and str(item.children[0]) in names:
                position = names.index(str(item.children[0]))
            elif item.data == "number" and str(item.children[0]).isdigit():
                position = int(str(item.children[0]))
            else:
                raise self.error(
                    item, f"`wrt` names a parameter of `{function}`: one of {', '.join(names)}"
                )
            if position >= len(names):
                raise self.error(item, f"`{function}` has {len(names)} parameters")
            wrt.append(position)
        if not wrt or len(set(wrt)) != len(wrt):
            raise self.error(wrt_node or node, "`wrt` names each parameter once")
        return Gradient(function, tuple(wrt), single, kind == "value_and_grad")

    def apply_gradient(
        self, node: Tree, gradient: Gradient, args: Tree | None, env: dict, b: TessBuilder
    ) -> Value:
        name = gradient.function
        if name in self.call_stack:
            raise self.error(node, f"`{name}` differentiates itself (recursion cannot be traced)")
        positional, keywords = self.arguments([], args, env, b)
        arguments = self.bind(node, name, positional, keywords)
        primal = self.function(name, self.defs[name])
        try:
            return splice_gradient(b, gradient, primal, arguments)
        except TessError as error:
            raise self.error(node, f"{error} in `{self.source(node)}`") from None

    def bind(self, node: Tree, name: str, positional: list, keywords: dict) -> list[SSAValue]:
        """The arguments of a call of `def name`, in parameter order, checked."""
        funcdef = self.defs[name]
        parameters, _ = self.signature(funcdef)
        names = [str(param) for param, _ in parameters]
        arguments = dict(zip(names, positional, strict=False))
        if len(positional) > len(names):
            raise self.error(node, f"`{name}` takes {len(names)} arguments, got {len(positional)}")
        for key, value in keywords.items():
            if key not in names or key in arguments:
                raise self.error(node, f"`{name}` got an unexpected argument `{key}`")
            arguments[key] = value
        missing = [n for n in names if n not in arguments]
        if missing:
            raise self.error(node, f"`{name}` is missing the argument `{missing[0]}`")
        for param, typ in parameters:
            value = arguments[str(param)]
            if not isinstance(value, SSAValue) or value.type != typ:
                found = _type_text(value) if isinstance(value, SSAValue) else _kind(value)
                raise self.error(
                    node,
                    f"argument `{param}` of `{name}` must be {_types_text([typ])}, got {found}",
                )
        return [arguments[str(param)] for param, _ in parameters]

    def inline(
        self, node: Tree, name: str, positional: list, keywords: dict, b: TessBuilder
    ) -> Value:
        """A call of another `def`: its body, evaluated on the arguments (checked)."""
        if name in self.call_stack:
            raise self.error(node, f"`{name}` calls itself (recursion cannot be traced)")
        funcdef = self.defs[name]
        parameters, declared = self.signature(funcdef)
        values = self.bind(node, name, positional, keywords)
        arguments = {str(param): v for (param, _), v in zip(parameters, values, strict=True)}
        results, _ = self.body(name, funcdef, arguments, b)
        actual = [value.type for value in results]
        if declared is not None and actual != declared:
            raise self.error(
                node,
                f"`{name}` returns {_types_text(actual)} but is declared to return "
                f"{_types_text(declared)}",
            )
        return results[0] if len(results) == 1 else tuple(results)


def _is_keyword(arg: Any) -> bool:
    return isinstance(arg, Tree) and arg.data == "keyword"


_TYPE_NAMES = ("f32", "f64", "i32", "i64", "bool")
"""The dtypes of `.tess` types (`bool` is `i1`)."""


def _types_text(types: Sequence[Any]) -> str:
    texts = []
    for typ in types:
        assert isinstance(typ, TensorType)
        dims = ", ".join(str(d) for d in typ.get_shape())
        name = dtype_name(typ.element_type)
        texts.append(f"{'bool' if name == 'i1' else name}[{dims}]")
    return texts[0] if len(texts) == 1 else "(" + ", ".join(texts) + ")"


__all__ = ["BUILTINS", "TessSourceError", "parse_tess"]
