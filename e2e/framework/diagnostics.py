"""What a failed wait prints: titled sections that each part of a stack contributes."""

from __future__ import annotations

from collections.abc import Callable, Iterable

# (title, produce): produce is called only when a report is asked for.
Section = tuple[str, Callable[[], object]]


def report(sections: Iterable[Section]) -> str:
    parts: list[str] = []
    for title, produce in sections:
        try:
            body = produce()
        except Exception as exc:  # diagnostics must never hide the real failure
            body = f"<unavailable: {type(exc).__name__}: {exc}>"
        parts.append(f"--- {title} ---\n{str(body).rstrip()}")
    return "\n".join(parts)
