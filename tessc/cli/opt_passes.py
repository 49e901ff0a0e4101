"""
`tessc-opt`'s pass pipeline as mlir-opt spells it, and its list of passes.

`-p 'p1,p2{opt=v}'` (xdsl-opt) and `--pass-pipeline='builtin.module(p1,p2{opt=v})'`
(mlir-opt) name the same passes; a named pipeline of `tessc.pipelines` (`-p cpu`) stands for
its passes. `PipelinePlan.explicit` says which passes the command line named itself: only
those are checked against their input level (`tessc.passes.INPUT_LEVELS`).
`--list-passes` and `--help` list every tessc pass with its options (its dataclass
fields), xDSL's passes, and the named pipelines.
"""

from __future__ import annotations

import dataclasses
import inspect
import re
from collections.abc import Callable
from dataclasses import dataclass

from xdsl.passes import ModulePass, get_pass_option_infos
from xdsl.utils.arg_spec import ArgSpec, parse_pipeline

from tessc.passes import TESS_PASSES

ANCHOR = re.compile(r"^\s*builtin\.module\s*\((.*)\)\s*$", re.DOTALL)
NESTED_ANCHOR = re.compile(r"[\w.]+\s*\(")
QUOTES = "\"'"


class PipelineError(Exception):
    """A pass pipeline the command line spells wrongly."""


@dataclass(frozen=True)
class PipelinePlan:
    """The passes to run, and for each whether the command line named it itself."""

    passes: tuple[ModulePass, ...]
    explicit: tuple[bool, ...]


def unanchored(pass_pipeline: str) -> str:
    """The passes of an mlir-opt `--pass-pipeline` (`builtin.module(p1,p2{opt=v})`)."""
    anchored = ANCHOR.match(pass_pipeline)
    if anchored is None:
        raise PipelineError(
            f"invalid pass pipeline '{pass_pipeline}': expected 'builtin.module(...)' (tessc's "
            "passes run on the module)"
        )
    inner = anchored.group(1)
    nested = NESTED_ANCHOR.search(re.sub(r"\{[^}]*\}", "", inner))
    if nested is not None:
        raise PipelineError(
            f"invalid pass pipeline '{pass_pipeline}': nested pipeline "
            f"'{nested.group().rstrip('( ')}(...)' is not supported (tessc's passes run on "
            "the module)"
        )
    return re.sub(r"\s*,\s*", ",", inner).strip()


def plan_pipeline(
    available: dict[str, Callable[[], type[ModulePass]]],
    spec: str,
    named: dict[str, str],
) -> PipelinePlan:
    """The passes of the `-p` string `spec`; a name in `named` (a pipeline's name and its
    own `-p` string) stands for its passes. Raises `ValueError` or xDSL's
    `ArgSpecParseError` for a bad spec."""
    specs: list[tuple[ArgSpec, bool]] = []
    for arg_spec in parse_pipeline(spec):
        if arg_spec.name in named and arg_spec.name not in available:
            if arg_spec.parameters:
                raise ValueError(f"the named pipeline '{arg_spec.name}' takes no options")
            specs.extend((inner, False) for inner in parse_pipeline(named[arg_spec.name]))
        else:
            specs.append((arg_spec, True))
    unknown = [arg_spec.name for arg_spec, _ in specs if arg_spec.name not in available]
    if unknown:
        raise ValueError(f"Unrecognized passes: {unknown}")
    passes = tuple(available[arg.name]().from_pass_spec(arg) for arg, _ in specs)
    return PipelinePlan(passes, tuple(explicit for _, explicit in specs))


def ir_dump_header(when: str, module_pass: ModulePass) -> str:
    """mlir-opt's `--mlir-print-ir-after-all` header: `// -----// IR Dump After Class
    (name) //----- //`."""
    return f"// -----// IR Dump {when} {type(module_pass).__name__} ({module_pass.name}) //----- //"


def _summary(pass_class: type[ModulePass]) -> str:
    """The first line of the pass class's docstring (not dataclass's generated one)."""
    doc = inspect.getdoc(pass_class) or ""
    if doc.startswith(f"{pass_class.__name__}("):
        return ""
    return doc.split("\n\n")[0].replace("\n", " ").strip()


def describe_pass(name: str, pass_class: type[ModulePass]) -> list[str]:
    """`name - summary`, then one line per option: `option=<type> (default value)`."""
    summary = _summary(pass_class)
    lines = [f"  {name}" + (f" - {summary}" if summary else "")]
    for option in get_pass_option_infos(pass_class):
        field = {f.name: f for f in dataclasses.fields(pass_class)}[option.name]
        spelt = option.name.replace("_", "-")
        default = option.default_value
        if default is None and field.default_factory is not dataclasses.MISSING:
            default = str(field.default_factory()).lower()
        text = f"      {spelt}=<{option.expected_type.strip(QUOTES)}>"
        lines.append(text + (f" (default {default})" if default is not None else " (required)"))
    return lines


def pass_listing(
    available: dict[str, Callable[[], type[ModulePass]]], pipelines: dict[str, str]
) -> str:
    """Every tessc pass with its options, xDSL's pass names and the named pipelines."""
    lines = ["tessc passes (-p 'name{option=value ...}', or --pass-pipeline):"]
    for name in TESS_PASSES:
        if name in available:
            lines.extend(describe_pass(name, available[name]()))
    others = sorted(name for name in available if name not in TESS_PASSES)
    lines.append("")
    lines.append("xDSL passes (options: see xdsl-opt --help): " + ", ".join(others))
    lines.append("")
    lines.append("named pipelines (-p name):")
    lines.extend(f"  {name} - {spec}" for name, spec in pipelines.items())
    return "\n".join(lines) + "\n"


__all__ = [
    "PipelineError",
    "PipelinePlan",
    "describe_pass",
    "ir_dump_header",
    "pass_listing",
    "plan_pipeline",
    "unanchored",
]
