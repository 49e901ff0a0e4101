"""
`tessc.optim`: functional optimizers whose step is one fused kernel.

    opt = ts.optim.Adam(lr=1e-3)
    state = opt.init(params)                           # params: a pytree of arrays
    params, state = opt.step(params, grads, state)     # inside a jitted step, or on its own

`params` and `grads` are pytrees as `jit` takes them (dicts, lists, tuples of arrays);
`state` holds one pytree of the same structure per state slot (`exp_avg`, ...) and the
step count `step`, a rank-0 array, so a new step is a new value, not a new trace.

The update is written once per parameter in `tess` ops; the compiler does the rest.
`tess-fuse` makes each parameter's clauses one `linalg.generic`, and
`tess-fuse-horizontal` makes the generics of all parameters of one dtype ONE kernel over
arenas (every parameter back to back in one buffer, every gradient in another, every
state slot in its own), run in cache-sized chunks; Lamb's per-parameter norms become
segmented reductions over the arenas, so its step is two kernels. The step count's scalar
chain (bias corrections, decayed learning rates) is computed once per call and read by
that kernel.

- Inside a jitted function, `opt.step` emits the ops into the trace. Donate the
  parameters and state (`jit(train_step, donate_argnums=...)`) to have them updated in
  place. There each update reads a gradient computed in the same program, so it fuses
  with that gradient's kernel rather than into an arena.
- On NumPy arrays, `opt.step` compiles itself once per signature: a `jit` of the step
  with the parameters and state donated (`target="cuda"` on device arrays). `opt.init`
  puts each state slot in arena storage (`tessc.arena`); the first call packs the
  parameters once, and the parameters and state it returns are views of the updated
  arenas, so feeding them back makes every later call one kernel updating them in place,
  without a copy (the gradients, computed elsewhere, are packed on each call).

The formulas are `torch.optim`'s (single-tensor, CPU implementation) option for option,
tested to 1e-6 relative over 20 steps in float64 (`Lamb`, which torch lacks, against a
NumPy transcription of the paper). Hyperparameters are Python numbers fixed for the
optimizer's lifetime (they are constants of the compiled step).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import ml_dtypes
import numpy as np

from tessc.frontend.call_plan import MISS
from tessc.frontend.function_forms import where
from tessc.frontend.jit import JitFunction, jit
from tessc.frontend.pytree import flatten_tree, unflatten_tree
from tessc.frontend.tracer import Tensor
from tessc.optim_split import (
    TRAIL,
    Halves,
    Widened,
    check_master_weights,
    fresh,
    master_params,
    split_params,
)
from tessc.optim_split import split as split_halves
from tessc.runtime.arena import arena
from tessc.runtime.cuda import is_device_array

Pytree = Any
Scalars = dict[str, Any]


def _is_leaf(value: Any) -> bool:
    return isinstance(value, Tensor | np.ndarray | np.floating) or is_device_array(value)


def _leaves(tree: Pytree, what: str) -> tuple[Any, list[Any]]:
    structure, leaves = flatten_tree(tree, _is_leaf, what)
    return structure, [leaf for _, leaf in leaves]


def _on_device(state: dict[str, Any]) -> dict[str, Any]:
    """`state`'s arrays copied to the device (for parameters on the device)."""
    from numba import cuda

    structure, flat = _leaves(state, "state")
    return unflatten_tree(structure, [cuda.to_device(a) for a in flat])


def _dtype(leaves: list[Any], split: bool = False) -> np.dtype:
    """The parameters' one dtype; under split master weights, the f32 their state is in."""
    dtypes = {np.dtype(leaf.dtype) for leaf in leaves}
    if len(dtypes) != 1:
        names = ", ".join(sorted(d.name for d in dtypes)) or "none"
        raise TypeError(f"an optimizer's parameters must share one float dtype, got {names}")
    (dtype,) = dtypes
    if split:
        if dtype != ml_dtypes.bfloat16:
            raise TypeError(
                'master_weights="split" updates bfloat16 parameters (the top halves: '
                f"ts.optim.split_params), got {dtype}"
            )
        return np.dtype(np.float32)
    if dtype not in (np.float32, np.float64):
        raise TypeError(f"an optimizer updates float32 or float64 parameters, got {dtype}")
    return dtype


def _check(name: str, value: float, low: float = 0.0) -> float:
    if not isinstance(value, int | float) or isinstance(value, bool) or not value >= low:
        raise ValueError(f"invalid {name}: {value!r} (a number >= {low})")
    return float(value)


def _betas(betas: tuple[float, float]) -> tuple[float, float]:
    b1, b2 = (float(b) for b in betas)
    if not (0.0 <= b1 < 1.0 and 0.0 <= b2 < 1.0):
        raise ValueError(f"invalid betas: {betas!r} (each in [0, 1))")
    return b1, b2


class Optimizer:
    """The functional protocol: `init(params) -> state`, `step(params, grads, state) ->
    (params, state)`. Subclasses list their per-parameter state `slots` (with initial
    values), compute the step's rank-0 `scalars` from the new step count, and write the
    per-parameter `update`."""

    slots: dict[str, float] = {}
    """Per-parameter state slots and the value each starts at."""

    master_weights: str | None = None
    """"split": bf16 parameters whose fp32 masters' low halves the state holds
    (`tessc.optim_split`)."""

    rejoins: bool = False
    """Under split master weights, `update` gets each parameter as its `Halves` and each
    gradient `Widened`, and builds them at each use (`optim_split.fresh`), rather than
    one joined (widened) tensor per parameter (gradient)."""

    def __init__(self) -> None:
        self._compiled: dict[str, JitFunction] = {}
        self._compiled_settings: dict[str, tuple] = {}  # the hyperparameters it was traced with
        """The standalone step, per target (`cuda` for device arrays, else `cpu`)."""

    # -- the per-parameter math (subclasses) -------------------------------------------

    def scalars(self, step: Tensor) -> Scalars:
        """Rank-0 values every parameter's update reads, from the new step count."""
        return {}

    def update(self, p: Tensor, g: Tensor, slots: dict[str, Tensor], s: Scalars) -> tuple:
        """The new parameter and the new value of each slot."""
        raise NotImplementedError

    # -- the protocol --------------------------------------------------------------------

    def init(self, params: Pytree, trail: Pytree = None) -> dict[str, Any]:
        """The initial state: a pytree like `params` per slot, and `step` = 0.

        On NumPy arrays each slot is one `tessc.arena` (its arrays are views of one
        buffer, in the order the compiled step packs them); on device arrays, device
        arrays; inside a trace, `tess.fill`s. Under `master_weights="split"` the state
        also holds `trail` (from `ts.optim.split_params`; zeros if None: masters equal to
        the bf16 `params`).
        """
        structure, leaves = _leaves(params, "params")
        split = self.master_weights == "split"
        dtype = _dtype(leaves, split)
        if split:
            return self._init_split(params, trail, dtype)
        if any(isinstance(leaf, Tensor) for leaf in leaves):
            from tessc.frontend.function_forms import full

            slot = {
                name: unflatten_tree(structure, [full(p.shape, v, dtype) for p in leaves])
                for name, v in self.slots.items()
            }
            return {**slot, "step": full((), 0.0, dtype)}
        state: dict[str, Any] = {
            name: unflatten_tree(
                structure, arena([np.full(np.shape(p), v, dtype) for p in leaves], dtype)
            )
            for name, v in self.slots.items()
        }
        state["step"] = np.zeros((), dtype)
        return _on_device(state) if any(is_device_array(leaf) for leaf in leaves) else state

    def _init_split(self, params: Pytree, trail: Pytree, dtype: np.dtype) -> dict[str, Any]:
        structure, leaves = _leaves(params, "params")
        if trail is None:
            trails = [np.zeros(np.shape(p), np.int16) for p in leaves]
        else:
            trails = [
                np.asarray(t.copy_to_host() if is_device_array(t) else t, np.int16)
                for t in self._matching(structure, trail, TRAIL)
            ]
        self.master_weights = None  # the slots as an fp32 optimizer's, then the trails
        try:
            state = self.init(
                unflatten_tree(structure, [np.zeros(np.shape(p), dtype) for p in leaves])
            )
        finally:
            self.master_weights = "split"
        state[TRAIL] = unflatten_tree(structure, arena(trails, np.int16))
        return _on_device(state) if any(is_device_array(leaf) for leaf in leaves) else state

    def step(self, params: Pytree, grads: Pytree, state: dict[str, Any]) -> tuple[Pytree, dict]:
        """One update: `(new_params, new_state)`. Traced into the current jit function if
        given Tensors; otherwise compiled once per signature and run (see the module)."""
        # The hyperparameters are read when the step is traced: a changed `opt.lr` is a
        # new compiled step, never the old value (issue 22, "never stale").
        settings = tuple(
            (name, value)
            for name, value in vars(self).items()
            if isinstance(value, int | float | bool | tuple | str)
        )
        compiled = self._compiled.get("cpu")
        if compiled is not None and self._compiled_settings["cpu"] == settings:
            # The steady state: NumPy arrays of the last signature (the planned call
            # checks each), no pytree flattened here.
            result = compiled.planned(params, grads, state)
            if result is not MISS:
                return result
        _, leaves = _leaves((params, grads, state), "step")
        if any(isinstance(leaf, Tensor) for leaf in leaves):
            return self._traced_step(params, grads, state)
        target = "cuda" if any(is_device_array(leaf) for leaf in leaves) else "cpu"
        compiled = self._compiled.get(target)
        if compiled is None or self._compiled_settings[target] != settings:
            compiled = jit(self._standalone(), target=target, donate_argnums=(0, 2))
            self._compiled[target], self._compiled_settings[target] = compiled, settings
        return compiled(params, grads, state)

    def _standalone(self) -> Callable[..., Any]:
        def step(params: Pytree, grads: Pytree, state: dict[str, Any]) -> tuple[Pytree, dict]:
            return self._traced_step(params, grads, state)

        step.__name__ = step.__qualname__ = f"{type(self).__name__.lower()}_step"
        return step

    def _traced_step(
        self, params: Pytree, grads: Pytree, state: dict[str, Any]
    ) -> tuple[Pytree, dict]:
        structure, ps = _leaves(params, "params")
        gradients = self._matching(structure, grads, "grads")
        slots = {name: self._matching(structure, state[name], name) for name in self.slots}
        split = self.master_weights == "split"
        if split:  # the fp32 masters, rebuilt from their halves inside the update kernel
            trails = self._matching(structure, state[TRAIL], TRAIL)
            ps = [Halves(p, t) for p, t in zip(ps, trails, strict=True)]
            gradients = [Widened(g) for g in gradients]
            if not self.rejoins:
                ps, gradients = [p.build() for p in ps], [g.build() for g in gradients]
        count = state["step"] + 1.0
        scalars = self.scalars(count)
        new_ps, new_slots = self.update_all(ps, gradients, slots, scalars)
        new_state = {name: unflatten_tree(structure, v) for name, v in new_slots.items()}
        new_state["step"] = count
        if split:
            halves = [split_halves(p) for p in new_ps]
            new_ps = [top for top, _ in halves]
            new_state[TRAIL] = unflatten_tree(structure, [trail for _, trail in halves])
        return unflatten_tree(structure, new_ps), new_state

    def update_all(
        self,
        params: list[Tensor],
        grads: list[Tensor],
        slots: dict[str, list[Tensor]],
        scalars: Scalars,
    ) -> tuple[list[Tensor], dict[str, list[Tensor]]]:
        """Every parameter's `update`, independently (what horizontal fusion groups)."""
        new_params: list[Tensor] = []
        new_slots: dict[str, list[Tensor]] = {name: [] for name in slots}
        for k, (p, g) in enumerate(zip(params, grads, strict=True)):
            p, updated = self.update(p, g, {n: v[k] for n, v in slots.items()}, scalars)
            new_params.append(p)
            for name, value in updated.items():
                new_slots[name].append(value)
        return new_params, new_slots

    @staticmethod
    def _matching(structure: Any, tree: Pytree, what: str) -> list[Any]:
        other, leaves = _leaves(tree, what)
        if other != structure:
            raise ValueError(f"`{what}` does not have the structure of the parameters")
        return leaves


# ---------------------------------------------------------------------------------------
# SGD
# ---------------------------------------------------------------------------------------


class SGD(Optimizer):
    """`torch.optim.SGD`: `g += weight_decay * p`; with momentum,
    `buf = momentum * buf + (1 - dampening) * g` (`buf = g` on the first step) and
    `g = g + momentum * buf` (nesterov) or `g = buf`; `p -= lr * g`."""

    def __init__(
        self,
        lr: float = 1e-3,
        momentum: float = 0.0,
        dampening: float = 0.0,
        weight_decay: float = 0.0,
        nesterov: bool = False,
        master_weights: str | None = None,
    ):
        super().__init__()
        self.master_weights = check_master_weights(master_weights)
        self.lr = _check("lr", lr)
        self.momentum = _check("momentum", momentum)
        self.dampening = float(dampening)
        self.weight_decay = _check("weight_decay", weight_decay)
        self.nesterov = bool(nesterov)
        if nesterov and (momentum <= 0 or dampening != 0):
            raise ValueError("nesterov momentum requires a momentum and zero dampening")
        self.slots = {"momentum_buffer": 0.0} if self.momentum else {}

    def scalars(self, step: Tensor) -> Scalars:
        if not self.momentum or not self.dampening:
            # Without dampening, `momentum * 0 + g` is the first gradient exactly.
            return {}
        # The buffer starts as the first gradient: the same update with other weights.
        first = step == 1.0
        return {
            "decay": where(first, 0.0, self.momentum),
            "gain": where(first, 1.0, 1.0 - self.dampening),
        }

    def update(self, p, g, slots, s):
        if self.weight_decay:
            g = g + self.weight_decay * p
        if not self.momentum:
            return p - self.lr * g, {}
        if self.dampening:
            buf = s["decay"] * slots["momentum_buffer"] + s["gain"] * g
        else:
            buf = self.momentum * slots["momentum_buffer"] + g
        g = g + self.momentum * buf if self.nesterov else buf
        return p - self.lr * g, {"momentum_buffer": buf}


# ---------------------------------------------------------------------------------------
# Adam, AdamW
# ---------------------------------------------------------------------------------------


class Adam(Optimizer):
    """`torch.optim.Adam` (`AdamW` for decoupled weight decay): `m = lerp(m, g, 1 - b1)`,
    `v = b2 * v + (1 - b2) * g * g`, `p -= lr / (1 - b1^t) * m / (sqrt(v) / sqrt(1 - b2^t)
    + eps)`, with `v` replaced by its running max under `amsgrad`."""

    decoupled = False

    def __init__(
        self,
        lr: float = 1e-3,
        betas: tuple[float, float] = (0.9, 0.999),
        eps: float = 1e-8,
        weight_decay: float = 0.0,
        amsgrad: bool = False,
    ):
        super().__init__()
        self.lr = _check("lr", lr)
        self.betas = _betas(betas)
        self.eps = _check("eps", eps)
        self.weight_decay = _check("weight_decay", weight_decay)
        self.amsgrad = bool(amsgrad)
        self.slots = {"exp_avg": 0.0, "exp_avg_sq": 0.0}
        if amsgrad:
            self.slots["max_exp_avg_sq"] = 0.0

    def scalars(self, step: Tensor) -> Scalars:
        b1, b2 = self.betas
        return {
            "step_size": self.lr / (1.0 - b1**step),
            "bias2_sqrt": (1.0 - b2**step).sqrt(),
        }

    def update(self, p, g, slots, s):
        b1, b2 = self.betas
        if self.weight_decay and self.decoupled:
            p = p * (1.0 - self.lr * self.weight_decay)
        elif self.weight_decay:
            g = g + self.weight_decay * p
        m = slots["exp_avg"] + (1.0 - b1) * (g - slots["exp_avg"])
        v = b2 * slots["exp_avg_sq"] + (1.0 - b2) * (g * g)
        new = {"exp_avg": m, "exp_avg_sq": v}
        if self.amsgrad:
            v = new["max_exp_avg_sq"] = slots["max_exp_avg_sq"].maximum(v)
        denom = v.sqrt() / s["bias2_sqrt"] + self.eps
        return p - s["step_size"] * (m / denom), new


class AdamW(Adam):
    """`torch.optim.AdamW`: Adam with decoupled weight decay `p *= 1 - lr * weight_decay`."""

    decoupled = True

    def __init__(
        self,
        lr: float = 1e-3,
        betas: tuple[float, float] = (0.9, 0.999),
        eps: float = 1e-8,
        weight_decay: float = 1e-2,
        amsgrad: bool = False,
    ):
        super().__init__(lr, betas, eps, weight_decay, amsgrad)


# ---------------------------------------------------------------------------------------
# Adagrad, RMSprop
# ---------------------------------------------------------------------------------------


class Adagrad(Optimizer):
    """`torch.optim.Adagrad`: `g += weight_decay * p`, `clr = lr / (1 + (t - 1) *
    lr_decay)`, `s += g * g`, `p -= clr * g / (sqrt(s) + eps)` (the seed's five clauses)."""

    def __init__(
        self,
        lr: float = 1e-2,
        lr_decay: float = 0.0,
        weight_decay: float = 0.0,
        initial_accumulator_value: float = 0.0,
        eps: float = 1e-10,
        master_weights: str | None = None,
    ):
        super().__init__()
        self.master_weights = check_master_weights(master_weights)
        self.lr = _check("lr", lr)
        self.lr_decay = _check("lr_decay", lr_decay)
        self.weight_decay = _check("weight_decay", weight_decay)
        self.eps = _check("eps", eps)
        self.slots = {"sum": _check("initial_accumulator_value", initial_accumulator_value)}

    def scalars(self, step: Tensor) -> Scalars:
        return {"clr": self.lr / (1.0 + (step - 1.0) * self.lr_decay)}

    def update(self, p, g, slots, s):
        if self.weight_decay:
            g = g + self.weight_decay * p
        total = slots["sum"] + g * g
        return p - s["clr"] * (g / (total.sqrt() + self.eps)), {"sum": total}


class RMSprop(Optimizer):
    """`torch.optim.RMSprop`: `sq = alpha * sq + (1 - alpha) * g * g`; centered:
    `avg = lerp(avg, g, 1 - alpha)`, `d = sqrt(sq - avg^2) + eps`, else `d = sqrt(sq) +
    eps`; with momentum `buf = momentum * buf + g / d`, `p -= lr * buf`; else
    `p -= lr * g / d`."""

    def __init__(
        self,
        lr: float = 1e-2,
        alpha: float = 0.99,
        eps: float = 1e-8,
        weight_decay: float = 0.0,
        momentum: float = 0.0,
        centered: bool = False,
    ):
        super().__init__()
        self.lr = _check("lr", lr)
        self.alpha = _check("alpha", alpha)
        self.eps = _check("eps", eps)
        self.weight_decay = _check("weight_decay", weight_decay)
        self.momentum = _check("momentum", momentum)
        self.centered = bool(centered)
        self.slots = {"square_avg": 0.0}
        if momentum:
            self.slots["momentum_buffer"] = 0.0
        if centered:
            self.slots["grad_avg"] = 0.0

    def update(self, p, g, slots, s):
        if self.weight_decay:
            g = g + self.weight_decay * p
        square = self.alpha * slots["square_avg"] + (1.0 - self.alpha) * (g * g)
        new = {"square_avg": square}
        if self.centered:
            avg = slots["grad_avg"] + (1.0 - self.alpha) * (g - slots["grad_avg"])
            new["grad_avg"] = avg
            denom = (square - avg * avg).sqrt() + self.eps
        else:
            denom = square.sqrt() + self.eps
        if self.momentum:
            buf = new["momentum_buffer"] = self.momentum * slots["momentum_buffer"] + g / denom
            return p - self.lr * buf, new
        return p - self.lr * (g / denom), new


# ---------------------------------------------------------------------------------------
# Lamb
# ---------------------------------------------------------------------------------------


class Lamb(Optimizer):
    """LAMB (You et al. 2019, "Large Batch Optimization for Deep Learning", Algorithm 2)
    with bias correction: `m`, `v` as in Adam, `u = m / (1 - b1^t) / (sqrt(v / (1 - b2^t))
    + eps) + weight_decay * p`, `p -= lr * r * u` with the trust ratio `r = |p| / |u|`
    per parameter (2-norms over the whole tensor; `r = 1` where either norm is 0).

    The norms are per-parameter reductions, so the step is two passes over the
    parameters: the first computes `m`, `v` and reduces `|p|^2` and `|u|^2`, the second
    (which needs the finished norms) recomputes them and updates `p`, `m` and `v` in
    place. `tess-fuse-horizontal` makes the norms of all parameters segmented reductions
    over the arenas (one segment per parameter, split into cache-sized chunks), so a Lamb
    step over any number of parameters is two kernels on `cpu`
    (tests/filecheck/fusion/lamb-steps.mlir); `cuda` keeps a reduction kernel per norm.

    Under `master_weights="split"` each pass joins the halves itself (`rejoins`): a
    joined master shared by both passes would be a computed tensor, which no segmented
    family packs, and the step would be a kernel per parameter norm instead. Both
    passes then read the arenas as the fp32 step's do, so the masters follow an fp32
    run's bit for bit (tests/test_split_lamb.py).
    """

    rejoins = True

    def __init__(
        self,
        lr: float = 1e-3,
        betas: tuple[float, float] = (0.9, 0.999),
        eps: float = 1e-6,
        weight_decay: float = 0.01,
        master_weights: str | None = None,
    ):
        super().__init__()
        self.master_weights = check_master_weights(master_weights)
        self.lr = _check("lr", lr)
        self.betas = _betas(betas)
        self.eps = _check("eps", eps)
        self.weight_decay = _check("weight_decay", weight_decay)
        self.slots = {"exp_avg": 0.0, "exp_avg_sq": 0.0}

    def scalars(self, step: Tensor) -> Scalars:
        b1, b2 = self.betas
        return {"bias1": 1.0 - b1**step, "bias2": 1.0 - b2**step}

    def direction(self, p: Tensor, m: Tensor, v: Tensor, s: Scalars) -> Tensor:
        u = (m / s["bias1"]) / ((v / s["bias2"]).sqrt() + self.eps)
        return u + self.weight_decay * p if self.weight_decay else u

    def update(self, p, g, slots, s):
        b1, b2 = self.betas
        m = b1 * slots["exp_avg"] + (1.0 - b1) * fresh(g)
        square = fresh(g)
        v = b2 * slots["exp_avg_sq"] + (1.0 - b2) * (square * square)
        u = self.direction(fresh(p), m, v, s)
        weight = fresh(p)
        p_norm, u_norm = (weight * weight).sum().sqrt(), (u * u).sum().sqrt()
        # Nothing divides by zero: both selects pick 1 where a norm is 0.
        ratio = where(p_norm > 0.0, p_norm / where(u_norm > 0.0, u_norm, 1.0), 1.0)
        ratio = where(u_norm > 0.0, ratio, 1.0)
        weight = fresh(p)
        step = (self.lr * ratio) * self.direction(weight, m, v, s)
        return weight - step, {"exp_avg": m, "exp_avg_sq": v}


__all__ = [
    "SGD",
    "Adagrad",
    "Adam",
    "AdamW",
    "Lamb",
    "Optimizer",
    "RMSprop",
    "master_params",
    "split_params",
]
