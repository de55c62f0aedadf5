"""What one poll came to: named once, for the loop and for the metrics' labels."""

from __future__ import annotations

import enum
from dataclasses import dataclass


class PollOutcome(enum.StrEnum):
    OK = "ok"
    LIST_ERROR = "list_error"
    PUBLISH_ERROR = "publish_error"
    NO_PROFILE = "no_profile"


@dataclass(frozen=True)
class PollResult:
    result: PollOutcome
    wrote: bool = False
