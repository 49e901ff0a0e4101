"""
Kernels written as LLVM IR (`lowering/codegen/to_llvm.py`), compiled with llvmlite and called
by their symbol from a Numba host, as `tessc.runtime.external`'s kernels are.

Codegen emits each as

    step_kernel_0 = llvm_kernel(__name__, "step_kernel_0", void(voidptr, voidptr), (
        "declare float @llvm.maximum.f32(float, float)",
    ), '''define void @step_kernel_0(ptr %p_w2, ptr %arg1) #0 { ... }''')

and `compile_llvm_kernels` (which `tessc.runtime.external.compile_kernels` runs when the
module is loaded) joins all of a module's into one LLVM module, optimises it as Numba does
its own (`-O3`, loop and SLP vectorisation, this CPU's name and features), emits its
machine code, loads that into an MCJIT engine of its own, and registers each function's
address under `<module>.<kernel>` (`llvmlite.binding.add_symbol`), the symbol the host's
`types.ExternalFunction` calls. One LLVM module for all kernels: no Numba typing or
lowering, and LLVM's per-module costs paid once.

Disk cache: the machine code is kept beside the module's file as
`<module>.llvm-<key>.o`, `key` the SHA-256 of the IR, the CPU's name and features and
llvmlite's version, behind a header holding the SHA-256 of the code
(`tessc.runtime.cache.write_checked`); a file failing it (or not read) is compiled again
and rewritten atomically, so a flipped bit costs a compile, never a wrong answer. `STATS`
counts compiles and loads; a `tessc:llvm-compile` Numba event spans each, which
`TESSC_TIMING` reports list.
"""

from __future__ import annotations

import hashlib
import os
import tempfile
import threading
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType

import llvmlite
import llvmlite.binding as llvm
from numba.core import config, event, types
from numba.core.codegen import get_host_cpu_features
from numba.core.typing import Signature
from numba.extending import typeof_impl

from tessc.runtime.cache import checked_body, write_checked

LLVM_COMPILE_EVENT = "tessc:llvm-compile"
"""The Numba event kind spanning the compile (or load) of a module's LLVM kernels; its
data holds `name` (what `TESSC_TIMING` lists)."""
OPT_LEVEL = 3


@dataclass
class LlvmStats:
    """What this process did with modules of LLVM kernels (tests observe it)."""

    compiled: int = 0  # modules optimised and compiled here
    loaded: int = 0  # modules whose machine code came from the disk cache
    kernels: int = 0  # kernels registered


STATS = LlvmStats()


class LlvmKernel:
    """A kernel given as LLVM IR text, called by its symbol from compiled code only."""

    def __init__(
        self,
        module_name: str,
        name: str,
        signature: Signature,
        support: Sequence[str],
        definition: str,
    ):
        self.__name__ = name
        self.symbol = f"{module_name}.{name}"
        self.signature = signature
        self.support = tuple(support)
        self.definition = definition
        # The host passes addresses as integers, like `ExternalKernel`'s.
        host_args = [types.intp if arg == types.voidptr else arg for arg in signature.args]
        self.type = types.ExternalFunction(self.symbol, signature.return_type(*host_args))
        self.address = 0

    def __call__(self, *args: object) -> None:
        raise TypeError(f"{self.__name__} is called from compiled code only")


@typeof_impl.register(LlvmKernel)
def _typeof_llvm_kernel(value: LlvmKernel, context: object) -> types.ExternalFunction:
    return value.type


def llvm_kernel(
    module_name: str,
    name: str,
    signature: Signature,
    support: Sequence[str],
    definition: str,
) -> LlvmKernel:
    """The kernel `name` of generated module `module_name` (module docstring)."""
    return LlvmKernel(module_name, name, signature, support, definition)


def module_llvm_kernels(module: ModuleType) -> list[LlvmKernel]:
    """The module's LLVM kernels, each once (codegen binds a kernel identical to another
    to that one's name too)."""
    kernels = {id(v): v for v in vars(module).values() if isinstance(v, LlvmKernel)}
    return list(kernels.values())


def module_text(kernels: Sequence[LlvmKernel]) -> str:
    """One LLVM module holding `kernels`, each declaration or helper once."""
    support = sorted({entity for k in kernels for entity in k.support})
    attributes = 'attributes #0 = { nounwind "frame-pointer"="none" }'
    return "\n\n".join([*support, *(k.definition for k in kernels), attributes]) + "\n"


_machine_lock = threading.Lock()
_machines: list[llvm.TargetMachine] = []
_engines: list[llvm.ExecutionEngine] = []  # kept alive: their code is called by address


def target_machine() -> llvm.TargetMachine:
    """This CPU's target machine, as Numba's JIT makes its own (name, features, static
    relocation for x86-64 JIT code)."""
    with _machine_lock:
        if not _machines:
            llvm.initialize_native_target()
            llvm.initialize_native_asmprinter()
            target = llvm.Target.from_default_triple()
            _machines.append(
                target.create_target_machine(
                    cpu=config.CPU_NAME or llvm.get_host_cpu_name(),
                    features=get_host_cpu_features(),
                    opt=OPT_LEVEL,
                    reloc="static" if target.name.startswith("x86") else "default",
                    codemodel="jitdefault",
                    jit=True,
                )
            )
        return _machines[0]


def cache_key(text: str, machine: llvm.TargetMachine) -> str:
    identity = "\0".join([text, machine.triple, config.CPU_NAME or llvm.get_host_cpu_name()])
    identity += "\0" + get_host_cpu_features() + "\0" + llvmlite.__version__ + f"\0O{OPT_LEVEL}"
    return hashlib.sha256(identity.encode()).hexdigest()


def optimized(text: str, machine: llvm.TargetMachine) -> llvm.ModuleRef:
    """LLVM module `text`, verified and optimised at `OPT_LEVEL` for `machine`."""
    module = llvm.parse_assembly(text)
    module.triple = machine.triple
    module.data_layout = str(machine.target_data)
    module.verify()
    options = llvm.create_pipeline_tuning_options(speed_level=OPT_LEVEL)
    options.loop_vectorization = True
    options.slp_vectorization = True
    # Unrolling quadrupled the MLP step's machine code and its compile time (0.68 against
    # 0.18 s); the vectoriser's interleaving still unrolls vector loops.
    options.loop_unrolling = False
    builder = llvm.create_pass_builder(machine, options)
    builder.getModulePassManager().run(module, builder)
    return module


def compile_object(text: str, machine: llvm.TargetMachine) -> bytes:
    """The machine code of LLVM module `text` (`optimized`)."""
    return machine.emit_object(optimized(text, machine))


class LlvmKernelError(RuntimeError):
    """LLVM rejected the IR codegen wrote: tessc's bug, with the module saved."""


def internal_error(text: str, error: BaseException) -> LlvmKernelError:
    """The error for LLVM module `text` failing to compile, written to a reproducer file."""
    fd, reproducer = tempfile.mkstemp(prefix="tessc-llvm-kernels-", suffix=".ll")
    with os.fdopen(fd, "w") as file:
        file.write(f"; {error}\n{text}")
    return LlvmKernelError(
        f"tessc internal compiler error in the LLVM kernels' compile "
        f"(tessc.runtime.llvm_kernels): {error}\nThis is a bug in tessc, not in your "
        f"program; the LLVM module is saved in {reproducer}. TESSC_LLVM_KERNELS=0 "
        "compiles these kernels with Numba instead."
    )


def compile_llvm_kernels(module: ModuleType, path: Path | None = None) -> None:
    """Compile (or load from the disk cache beside `path`) all of `module`'s LLVM kernels
    and register their symbols."""
    kernels = [k for k in module_llvm_kernels(module) if not k.address]
    if not kernels:
        return
    machine = target_machine()
    text = module_text(kernels)
    key = cache_key(text, machine)
    cached = None if path is None else path.with_name(f"{path.stem}.llvm-{key[:32]}.o")
    name = f"{len(kernels)} LLVM kernels"
    with event.trigger_event(LLVM_COMPILE_EVENT, data={"name": name}):
        code = None if cached is None else checked_body(cached)
        if code is None:
            try:
                code = compile_object(text, machine)
            except RuntimeError as error:  # LLVM rejected what codegen wrote
                raise internal_error(text, error) from None
            STATS.compiled += 1
            if cached is not None:
                try:
                    write_checked(cached, code)
                except OSError:
                    pass  # an unwritable cache costs the next process a compile, no more
        else:
            STATS.loaded += 1
        engine = llvm.create_mcjit_compiler(llvm.parse_assembly(""), machine)
        engine.add_object_file(llvm.ObjectFileRef.from_data(code))
        engine.finalize_object()
    _engines.append(engine)
    for kernel in kernels:
        kernel.address = engine.get_function_address(kernel.__name__)
        if not kernel.address:
            raise RuntimeError(f"tessc internal error: LLVM kernel {kernel.symbol} not found")
        llvm.add_symbol(kernel.symbol, kernel.address)
        STATS.kernels += 1


__all__ = [
    "LLVM_COMPILE_EVENT",
    "LlvmKernelError",
    "STATS",
    "LlvmKernel",
    "compile_llvm_kernels",
    "llvm_kernel",
    "module_llvm_kernels",
    "module_text",
    "optimized",
]
