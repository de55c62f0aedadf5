"""A stack's life in a run: deployed once, and taken down with every step tried."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator
from typing import Protocol, TypeVar

from . import timings


class Deployable(Protocol):
    def deploy(self) -> None: ...

    def cleanup(self) -> None: ...


D = TypeVar("D", bound=Deployable)


def run_all(steps: Iterable[Callable[[], object]]) -> None:
    """Run every step, even after one fails; then raise naming each failure."""
    errors = []
    for step in steps:
        try:
            step()
        except Exception as exc:  # keep cleaning; report at the end
            errors.append(f"{type(exc).__name__}: {exc}")
    if errors:
        raise RuntimeError("cleanup failed:\n" + "\n".join(errors))


def deployed_for_run(stack: D, keep: bool) -> Iterator[D]:
    """The body of a session fixture: deploy (a failed deploy is cleaned up, and its
    error is the one reported), yield the stack, clean up unless `keep`."""
    try:
        with timings.phase("deploy"):
            stack.deploy()
    except BaseException:
        if not keep:
            try:
                stack.cleanup()
            except Exception as exc:  # the deploy error is the one to report
                print(f"cleanup after the failed deploy: {exc}")
        raise
    yield stack
    if not keep:
        with timings.phase("cleanup"):
            stack.cleanup()
