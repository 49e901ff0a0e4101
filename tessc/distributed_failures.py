"""
A collective that fails names the rank that failed, instead of hanging or saying only that
a connection closed.

Every collective `tessc.distributed` issues runs inside `guarded`. When one raises (gloo
raises at once when a peer's socket closes, and after the process group's timeout when a
peer hangs), each surviving rank holds a roll call on the rendezvous store: it writes
`rollcall/<sequence>/<rank>` and waits up to `answer_s` for the others' keys, where
`sequence` counts the collectives (every rank fails the same one). The ranks that never
answer are named in `RankFailure`. The store outlives a worker under torchrun (its agent
hosts it); without torchrun rank 0 hosts it, so when it cannot be reached rank 0 is named.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any


class RankFailure(RuntimeError):
    """A collective failed because a rank died or stopped answering; `ranks` names them
    (empty when every rank answered the roll call: the cause is then the collective's own
    error, chained as `__cause__`)."""

    def __init__(self, message: str, ranks: list[int]):
        super().__init__(message)
        self.ranks = ranks


def roll_call(
    store: Any, rank: int, world: int, sequence: int, answer_s: float
) -> list[int] | None:
    """The ranks that did not answer within `answer_s`; None when the store itself is
    unreachable."""
    prefix = f"rollcall/{sequence}/"
    try:
        store.set(f"{prefix}{rank}", "alive")
    except Exception:  # noqa: BLE001 - any store error: it cannot be reached
        return None
    missing = [r for r in range(world) if r != rank]
    deadline = time.monotonic() + answer_s
    while missing:
        try:
            missing = [r for r in missing if not store.check([f"{prefix}{r}"])]
        except Exception:  # noqa: BLE001
            return None
        if not missing or time.monotonic() >= deadline:
            break
        time.sleep(0.05)
    return missing


def first_line(error: BaseException) -> str:
    text = str(error).strip().splitlines()
    return f"{type(error).__name__}: {text[0] if text else ''}"


@contextmanager
def guarded(
    what: str, store: Any, rank: int, world: int, sequence: int, answer_s: float
) -> Iterator[None]:
    """Run a collective; turn its failure into a `RankFailure` naming the missing ranks."""
    try:
        yield
    except RankFailure:
        raise
    except Exception as error:  # noqa: BLE001 - torch's DistBackendError, RuntimeError, ...
        cause = first_line(error)
        head = f"tessc.distributed: {what} failed on rank {rank} of {world}"
        if store is None:
            raise RankFailure(f"{head} ({cause}); no store to ask which rank", []) from error
        missing = roll_call(store, rank, world, sequence, answer_s)
        if missing is None:
            ranks = [0] if rank != 0 else []
            message = (
                f"{head}: the rendezvous store is unreachable, so rank 0 (which hosts it "
                f"unless torchrun's agent does) died or its host is down ({cause})"
            )
            raise RankFailure(message, ranks) from error
        if not missing:
            raise RankFailure(f"{head}, with every rank alive: {cause}", []) from error
        named = ("rank " if len(missing) == 1 else "ranks ") + ", ".join(map(str, missing))
        message = (
            f"{head}: {named} did not answer within {answer_s:g} s (it died, or is stuck "
            f"outside tessc.distributed) ({cause})"
        )
        raise RankFailure(message, missing) from error


__all__ = ["RankFailure", "first_line", "guarded", "roll_call"]
