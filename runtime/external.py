"""
Kernels compiled on their own and called by name, so that a host of many serial kernels
compiles them concurrently and links none of them into itself.

Numba compiles a host with its serial kernels emitted into its body as one function (an MLP
train step: ~40 loop nests, 3.9 s of CPU, one core). Calling kernels compiled as separate
`@njit` functions does not help: Numba links each callee's library into the caller and
optimises and generates its code again (5.2 s against 4.3 s), and a separate process cannot
compile a callee for it. A kernel called by its symbol is linked by nobody: codegen emits

    @external(void(voidptr, voidptr), fastmath=FASTMATH, error_model="numpy")
    def step_kernel_1(arg0_ptr, x_ptr):
        arg0 = carray(arg0_ptr, (128, 128), np.float32)
        x = carray(x_ptr, (128, 64), np.float32)
        ...

and the host calls `step_kernel_1(workspace_addr + 4096, x_addr)`, addresses as integers
(`x_addr = x.ctypes.data`, read once; a workspace window is an offset, no array built).
`external(signature, **options)` makes an `ExternalKernel`, which Numba types as
`types.ExternalFunction(symbol, signature)` with each `voidptr` an `intp` (C passes both
alike):
the host's machine code calls the symbol `<module>.<kernel>` (a generated module's name is
the hash of its source, so the symbol is unique), resolved when the host is linked, compiled
or loaded from Numba's disk cache. So `compile_kernels(module)` compiles every kernel
(`numba.cfunc` with the module's options, Numba's disk cache on) and registers its address
(`llvmlite.binding.add_symbol`) before anything calls the host; `tessc.runtime.cache` runs it
when it loads a module. Compiled alone, the MLP step's 17 kernels took 3.3 s of CPU against
3.9 s for the one host holding them: Numba's compile time grows faster than a function.

Concurrency: the kernels Numba's disk cache does not hold yet are compiled by this process
and one worker process (`worker_main`), both taking the next kernel from one queue, largest
first (source lines as the estimate), until it is empty; the worker takes its first once it
is ready (started up, it answers `ready`): a kernel handed to a worker still importing
Numba would wait there while this process could compile it. The worker writes Numba's disk
cache (its files checksummed in tessc's index like any other) and this process then loads
what the worker compiled from there. The worker is asked only where there are
`WORKER_MIN_LINES` of kernel source to compile, two CPUs, a module on disk, and it is not
switched off (`TESSC_COMPILE_WORKERS=0`); if it fails or dies, this process compiles what is
left. It is one process per process, kept for later programs, and `start_worker` starts it
early (the compiler does, while the passes of a large program run). It compiles a small
kernel first (Numba's first compilation in a process costs ~0.3 s more) before it answers
`ready`; `start_worker` forks it on Linux from a process running one thread
(`forked_worker.ForkedWorker`), so it starts with Numba imported and warms up while this
process runs the passes (~0.7 s of a new interpreter's start-up saved). Otherwise, and when
a compile needs a worker none started, it is a new `python -c` process.

A module whose kernels called by name are all LLVM kernels (`tessc.runtime.llvm_kernels`,
compiled here in one go) asks a running worker for its hosts instead (`host:<entry>`):
while this process compiles the kernels, the worker compiles each host that is not on
disk yet for the arrays the executor passes it, into the same disk cache, and the first
call loads it (~0.09 s for the MLP step, against ~0.3 s to compile it here, Numba's
first compilation in the process included).
Compiling or loading a kernel here fires Numba's `numba:compile` event, so `TESSC_TIMING`
reports list each kernel; the worker's kernels show as loads here, and the worker's own
time for each (wall and CPU, which it sends back with its answer) comes as one
`tessc:worker-compile` event per kernel (`WORKER_COMPILE_EVENT`: an end event whose data
holds `name`, `seconds` and `cpu`) once this process has its kernels.
"""

from __future__ import annotations

import atexit
import collections
import ctypes
import os
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType
from typing import IO, Any

import llvmlite.binding as llvm
import numpy as np
from numba import carray
from numba.core import config, event, types
from numba.core.ccallback import CFunc
from numba.core.compiler_lock import global_compiler_lock
from numba.core.dispatcher import Dispatcher
from numba.core.typing import Signature
from numba.extending import typeof_impl
from numba.np.numpy_support import from_dtype

from tessc.runtime import abi
from tessc.runtime.abi import KERNEL_BITS_DTYPES
from tessc.runtime.cache import KERNEL_COMPILERS, execute_file, guard_for
from tessc.runtime.forked_worker import ForkedWorker
from tessc.runtime.llvm_kernels import compile_llvm_kernels, llvm_kernel, module_llvm_kernels
from tessc.runtime.numba_pipeline import TesscCompiler
from tessc.runtime.signatures import read_signature

WORKERS_VARIABLE = "TESSC_COMPILE_WORKERS"
SMALL_KERNEL_LINES = 100
"""Kernels of fewer source lines are optimised by LLVM at -O2, not Numba's -O3: the MLP
step's eleven small kernels compile ~30% faster (2.9 against 3.6 s of CPU for all twelve,
load ~8) at the same steady step (72 us); its large fused forward kernel (143 lines) stays
at -O3, where -O2 left it 3x fewer instructions and the step 4% slower."""
WORKER_MIN_LINES = 100
"""Kernel source lines to compile below which the worker is not asked (~0.3 s of work)."""
HOST_REQUEST = "host:"
"""A request naming `host:<entry>` asks the worker to compile that entry's host."""
WORKER_TIMEOUT = 600.0
"""Seconds this process waits for the worker's last kernel before compiling it itself."""

_WORKER_COMMAND = "from tessc.runtime.external import worker_main; worker_main()"


@dataclass
class WorkerStats:
    """What the compile worker did for this process (tests observe it)."""

    started: int = 0  # worker processes started
    forked: int = 0  # of which forked from this process
    sent: int = 0  # kernels handed to it
    compiled: int = 0  # kernels it compiled into the disk cache for this process
    failed: int = 0  # kernels it could not compile (compiled here instead)


STATS = WorkerStats()

Guard = Callable[[Any], None]
"""Wraps a compiled function's Numba disk cache (`tessc.runtime.cache`'s checksums)."""


_Counters = collections.namedtuple("_Counters", "cache_misses cache_hits")
"""Numba's per-dispatcher `stats`, as `tessc.runtime.cache.numba_compile_stats` reads them."""


class ExternalKernel:
    """A kernel compiled as a C callable (`numba.cfunc`) and called by its symbol.

    Calling it from Python is not supported: the host calls it from compiled code."""

    def __init__(self, py_func: Callable[..., None], signature: Signature, options: dict):
        self.py_func = py_func
        self.__name__ = py_func.__name__
        self.signature = signature
        self.options = options
        self.symbol = f"{py_func.__module__}.{py_func.__qualname__}"
        # The host passes addresses as integers (`x.ctypes.data + offset`: no array built
        # for a window of its workspace); a pointer and an integer travel alike in C.
        host_args = [types.intp if arg == types.voidptr else arg for arg in signature.args]
        self.type = types.ExternalFunction(self.symbol, signature.return_type(*host_args))
        self.cfunc: CFunc | None = None
        self.stats = _Counters(collections.Counter(), collections.Counter())

    def prepare(self, guard: Guard | None) -> CFunc:
        """The (uncompiled) C callable, with Numba's disk cache on under `guard`."""
        cfunc = CFunc(
            self.py_func,
            (self.signature.args, self.signature.return_type),
            locals={},
            options=self.options,
            pipeline_class=TesscCompiler,
        )
        if guard is not None:
            cfunc.enable_caching()
            guard(cfunc)
        return cfunc

    def compile(self, guard: Guard | None) -> None:
        """Compile (or load from Numba's disk cache) and register the symbol."""
        if self.cfunc is not None:
            return
        cfunc = self.prepare(guard)
        # Numba's compile event, as its dispatchers fire it: timing reports list the kernel.
        with event.trigger_event("numba:compile", data={"dispatcher": self}):
            self.build(cfunc)
        counter = self.stats.cache_hits if cfunc.cache_hits else self.stats.cache_misses
        counter[self.signature.args] += 1
        llvm.add_symbol(self.symbol, cfunc.address)
        self.cfunc = cfunc  # keeps the machine code alive

    def optimization_level(self) -> int | None:
        """LLVM's level for this kernel: 2 below `SMALL_KERNEL_LINES`, else None (Numba's
        `NUMBA_OPT`, 3 by default)."""
        return 2 if self.cost() < SMALL_KERNEL_LINES else None

    def build(self, cfunc: CFunc) -> None:
        """Compile (or load) `cfunc`, this kernel's, at `optimization_level` where that is
        lower than Numba's (which reads `config.OPT` while it compiles: set under its
        compiler lock, then restored)."""
        level = self.optimization_level()
        with global_compiler_lock:
            saved = config.OPT
            if level is not None and level < int(saved):
                config.OPT = type(saved)(level)
            try:
                cfunc.compile()
            finally:
                config.OPT = saved

    def cost(self) -> int:
        """An estimate of its compile time: its lines of source."""
        code = self.py_func.__code__
        return max((line for _, _, line in code.co_lines() if line), default=0) - (
            code.co_firstlineno
        )

    def __call__(self, *args: object) -> None:
        raise TypeError(f"{self.__name__} is called from compiled code only")


@typeof_impl.register(ExternalKernel)
def _typeof_external(value: ExternalKernel, context: object) -> types.ExternalFunction:
    return value.type


def external(signature: Signature, **options: Any) -> Callable[[Callable], ExternalKernel]:
    """`@external(void(voidptr, ...), fastmath=..., error_model=...)`: the
    function is compiled by `compile_kernels` as a C callable with these Numba options."""
    return lambda py_func: ExternalKernel(py_func, signature, options)


def module_kernels(module: ModuleType) -> list[ExternalKernel]:
    """The module's kernels, each once (codegen binds a kernel identical to another to
    that one's name too)."""
    kernels = {id(v): v for v in vars(module).values() if isinstance(v, ExternalKernel)}
    return list(kernels.values())


def compile_kernels(
    module: ModuleType,
    guard: Guard | None = None,
    path: Path | None = None,
    is_cached: Callable[[CFunc], bool] | None = None,
) -> None:
    """Compile every kernel of `module` and register its symbol. With a disk cache
    (`guard`, the module's file `path` and `is_cached`, whether a prepared C callable's
    compiled code is on disk), uncached kernels are shared with the worker process.

    LLVM kernels (`tessc.runtime.llvm_kernels`) are compiled here, all at once; where a
    module has no others, its hosts only call kernels by name, and a running worker
    compiles them into the disk cache meanwhile, where the first call finds them."""
    kernels = module_kernels(module)
    hosts = None
    if path is not None and is_cached is not None and not kernels:
        if module_llvm_kernels(module):
            hosts = _hosts_to_worker(module, path, is_cached)
    try:
        compile_llvm_kernels(module, path=path)
    finally:
        if hosts is not None:
            hosts()
    pending = []
    if guard is not None and path is not None and is_cached is not None:
        pending = [k for k in kernels if not is_cached(k.prepare(guard))]
    if sum(map(ExternalKernel.cost, pending)) >= WORKER_MIN_LINES and workers_allowed():
        _compile_with_worker(pending, guard, path)  # type: ignore[arg-type]
    for kernel in kernels:
        kernel.compile(guard)


def workers_allowed() -> bool:
    """Whether a compile worker may run: two CPUs and not `TESSC_COMPILE_WORKERS=0`."""
    if os.environ.get(WORKERS_VARIABLE, "1").strip().lower() in ("0", "no", "false"):
        return False
    try:
        cpus = len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        cpus = os.cpu_count() or 1
    return cpus >= 2


def start_worker(*, ready: bool = False) -> None:
    """Start the worker now (it takes ~0.7 s to import Numba and compile its first
    kernel), e.g. while the passes run for a program that will have kernels to compile;
    with `ready`, wait until it can take kernels (tests)."""
    if workers_allowed():
        worker = _Worker.get(fork=True)
        if ready and worker is not None:
            worker.ready.wait(WORKER_TIMEOUT)


def stop_worker() -> None:
    """End the worker if this process started one (a later compile starts another)."""
    worker = _Worker._current
    if worker is not None:
        worker.stop()


WORKER_COMPILE_EVENT = "tessc:worker-compile"
"""The Numba event kind that reports a kernel the worker compiled (module docstring)."""


def _compile_with_worker(pending: list[ExternalKernel], guard: Guard, path: Path) -> None:
    """Compile `pending` here and in the worker, each taking the largest kernel left."""
    worker = _Worker.get()
    if worker is None or not worker.lock.acquire(blocking=False):
        return  # none, or busy with another thread's program: all compiled here
    times: list[tuple[str, float, float]] = []  # the worker's (kernel, wall s, CPU s)
    try:
        queue = sorted(pending, key=ExternalKernel.cost, reverse=True)
        state = threading.Condition()
        holding = [False]  # whether the worker holds a kernel of this queue

        def take_here() -> ExternalKernel | None:
            with state:
                return queue.pop(0) if queue else None

        def take() -> str | None:  # the worker's next: its last one is done
            with state:
                holding[0] = bool(queue)
                return queue.pop(0).__name__ if queue else None

        def feed() -> None:
            try:
                if worker.ready.wait(WORKER_TIMEOUT):
                    worker.feed(path, take, times)
            finally:
                with state:
                    holding[0] = False
                    state.notify_all()

        threading.Thread(target=feed, daemon=True).start()
        while (kernel := take_here()) is not None:
            kernel.compile(guard)
        # The queue is empty: wait for the kernel the worker holds, if any (a worker not
        # ready yet holds none, and its feeder then finds the queue empty).
        with state:
            if not state.wait_for(lambda: not holding[0], WORKER_TIMEOUT):
                worker.process.kill()  # hung: what it holds is compiled here
    finally:
        worker.lock.release()
    _report(times)


def _report(times: list[tuple[str, float, float]]) -> None:
    """A `WORKER_COMPILE_EVENT` for each (name, wall s, CPU s) the worker compiled."""
    for name, seconds, cpu in list(times):  # a hung feeder may still append: a copy
        data = {"name": name, "seconds": seconds, "cpu": cpu}
        event.broadcast(event.Event(WORKER_COMPILE_EVENT, event.EventStatus.END, data))


def _hosts_to_worker(
    module: ModuleType, path: Path, is_cached: Callable[[Any], bool]
) -> Callable[[], None] | None:
    """Hand the uncached Numba hosts of `module` to the running worker, if one is; the
    function returned waits until it has compiled them into the disk cache."""
    worker = _Worker.running()
    if worker is None:
        return None
    signatures = getattr(module, abi.SIGNATURES, {})
    hosts = [getattr(module, read_signature(module, entry).function) for entry in signatures]
    entries = [
        entry
        for entry, host in zip(signatures, hosts, strict=True)
        if isinstance(host, Dispatcher)
        and hasattr(host._cache, "_cache_path")  # cached on disk
        and not is_cached(host)
    ]
    if not entries or not worker.lock.acquire(blocking=False):
        return None
    queue = [HOST_REQUEST + entry for entry in entries]
    times: list[tuple[str, float, float]] = []
    done = threading.Event()

    def feed() -> None:
        try:
            if worker.ready.wait(WORKER_TIMEOUT):
                worker.feed(path, lambda: queue.pop(0) if queue else None, times)
        finally:
            done.set()

    threading.Thread(target=feed, daemon=True).start()

    def wait() -> None:
        try:
            if not done.wait(WORKER_TIMEOUT):
                worker.process.kill()  # hung: the first call compiles the host here
        finally:
            worker.lock.release()
        _report(times)

    return wait


def _compile_host(module: ModuleType, entry: str) -> None:
    """Compile host `entry` of `module` into the disk cache (in the worker), for the
    arrays the executor passes it. Its LLVM kernels' symbols point at `abort` here:
    nothing runs, and the cached code is linked to the real kernels where it is loaded."""
    for kernel in module_llvm_kernels(module):
        llvm.add_symbol(kernel.symbol, _ABORT)
    signature = read_signature(module, entry)
    arrays = [*signature.inputs, *signature.outputs]
    args = [
        types.Array(
            from_dtype(np.dtype(np.uint16) if s.dtype.name in KERNEL_BITS_DTYPES else s.dtype),
            len(s.shape),
            "C",
        )
        for s in arrays
    ]
    if signature.workspace_bytes is not None:
        args.append(types.Array(types.uint8, 1, "C"))
    getattr(module, signature.function).compile(tuple(args))


_ABORT = ctypes.cast(ctypes.CDLL(None).abort, ctypes.c_void_p).value or 0


class _Worker:
    """The compile worker: one process per process, started on first need and kept for
    later programs (it exits when this process closes its end of the pipe)."""

    _current: _Worker | None = None
    _start_lock = threading.Lock()

    def __init__(self, process: subprocess.Popen | ForkedWorker):
        self.process = process
        self.owner = os.getpid()  # a forked child starts its own
        self.lock = threading.Lock()  # one program at a time
        self.ready = threading.Event()  # it answered `ready` (or died starting)
        threading.Thread(target=self._await_ready, daemon=True).start()

    def _await_ready(self) -> None:
        """Read the worker's first line, `ready` once it has started up (EOF if it died:
        then the feeder's first request fails and this process compiles everything)."""
        try:
            self.process.stdout.readline()  # type: ignore[union-attr]
        except (OSError, ValueError):
            pass
        self.ready.set()

    @classmethod
    def get(cls, *, fork: bool = False) -> _Worker | None:
        """The worker, started if there is none; `fork`: forked if this process runs
        one thread (callers holding no lock a worker needs: `start_worker`)."""
        with cls._start_lock:
            worker = cls._current
            if worker is not None and worker.owner == os.getpid():
                if worker.process.poll() is None:
                    return worker
                worker.stop()  # died: its pipes closed, a new one started
            forked = ForkedWorker.start(worker_main) if fork else None
            cls._current = worker = _Worker._adopt(forked) if forked else cls._start()
            return worker

    @classmethod
    def running(cls) -> _Worker | None:
        """This process's worker if it has one alive; none is started."""
        worker = cls._current
        if worker is None or worker.owner != os.getpid() or worker.process.poll() is not None:
            return None
        return worker

    @staticmethod
    def _adopt(process: subprocess.Popen | ForkedWorker) -> _Worker:
        worker = _Worker(process)
        atexit.register(worker.stop)
        STATS.started += 1
        STATS.forked += isinstance(process, ForkedWorker)
        return worker

    @staticmethod
    def _start() -> _Worker | None:
        env = dict(os.environ)
        # It must import this tessc and write where this process's Numba reads.
        env["PYTHONPATH"] = os.pathsep.join(p for p in sys.path if p)
        from numba.core import config

        if config.CACHE_DIR:
            env["NUMBA_CACHE_DIR"] = config.CACHE_DIR
        try:
            process = subprocess.Popen(
                [sys.executable, "-c", _WORKER_COMMAND],
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                stderr=subprocess.DEVNULL,
                env=env,
                text=True,
            )
        except OSError:
            return None
        return _Worker._adopt(process)

    def stop(self) -> None:
        """End the worker (it exits when its input closes) and close its pipes."""
        if self.owner != os.getpid():
            return  # a forked child's copy: the parent's worker
        try:
            self.process.stdin.close()  # type: ignore[union-attr]
            self.process.wait(timeout=5)
        except (OSError, subprocess.TimeoutExpired):
            self.process.kill()
            self.process.wait()
        self.process.stdout.close()  # type: ignore[union-attr]

    def feed(
        self,
        path: Path,
        take: Callable[[], str | None],
        times: list[tuple[str, float, float]],
    ) -> None:
        """Hand the worker one kernel (or host, `HOST_REQUEST`) of module file `path` at a
        time, by name, until the queue is empty or the worker fails, appending to `times`
        what each took it; this process compiles (or loads) them all afterwards either
        way."""
        stdin, stdout = self.process.stdin, self.process.stdout
        assert stdin is not None and stdout is not None
        try:
            while (requested := take()) is not None:
                stdin.write(f"{path}\t{requested}\n")
                stdin.flush()
                STATS.sent += 1
                answer, name, *spent = stdout.readline().split() or [""]
                if answer != "ok" or name != requested or len(spent) != 2:
                    STATS.failed += 1
                    return
                times.append((name, float(spent[0]), float(spent[1])))
                STATS.compiled += 1
        except (OSError, ValueError):  # a dead worker, a closed pipe, a garbled answer
            return


def _serve(requests: Iterable[str], out: IO[str]) -> None:
    """The worker's loop: compile each requested kernel (`<module file>\t<name>`) into the
    disk cache and answer `ok <name> <wall s> <CPU s>` (`failed <name>` if it cannot)."""
    modules: dict[str, ModuleType | None] = {}
    for line in requests:
        path, _, name = line.rstrip("\n").partition("\t")
        if path not in modules:
            modules[path] = execute_file(Path(path))
        kernel = getattr(modules[path], name, None)
        start, cpu = time.perf_counter(), time.process_time()
        try:
            if name.startswith(HOST_REQUEST) and modules[path] is not None:
                _compile_host(modules[path], name.removeprefix(HOST_REQUEST))  # type: ignore[arg-type]
            elif not isinstance(kernel, ExternalKernel):
                raise LookupError(name)
            else:
                kernel.build(kernel.prepare(guard_for(Path(path))))
        except Exception:  # reported as failed: this process compiles it and says why
            out.write(f"failed {name}\n")
        else:
            spent = time.perf_counter() - start, time.process_time() - cpu
            out.write(f"ok {name} {spent[0]:.6f} {spent[1]:.6f}\n")
        out.flush()


def _warm_up(pointer: Any) -> None:
    """A kernel like generated ones, compiled by a worker before its first request:
    Numba's first compilation in a process costs ~0.3 s more than the next (its typing and
    target contexts), paid while this process runs the passes, not on a kernel's time."""
    array = carray(pointer, (8,), np.float32)
    for i in range(8):
        array[i] = np.maximum(array[i] * np.float32(2.0), np.float32(0.0))


def warm_up_numba() -> None:
    """Compile `_warm_up` in this process (once)."""
    if not _WARMED_UP:
        options = {"fastmath": {"contract"}, "error_model": "numpy"}
        ExternalKernel(_warm_up, types.void(types.voidptr), options).prepare(None).compile()
        _WARMED_UP.append(True)


_WARMED_UP: list[bool] = []


def worker_main(requests: IO[str] | None = None, answers: IO[str] | None = None) -> None:
    """The worker process (`python -c _WORKER_COMMAND`, requests on stdin; not `python -m`:
    the modules it loads must find this module's `ExternalKernel`), or a forked one on its
    pipes."""
    requests = sys.stdin if requests is None else requests
    answers = sys.stdout if answers is None else answers
    warm_up_numba()
    answers.write("ready\n")
    answers.flush()
    _serve(requests, answers)


KERNEL_COMPILERS.append(compile_kernels)

__all__ = [
    "STATS",
    "ExternalKernel",
    "compile_kernels",
    "external",
    "llvm_kernel",
    "module_kernels",
    "start_worker",
    "stop_worker",
    "workers_allowed",
]
