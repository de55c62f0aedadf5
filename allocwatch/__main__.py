"""The `allocwatch` command and `python -m allocwatch`.

Kept free of heavy imports: a stop signal that arrives while grpc is still
loading (a few hundred milliseconds) must already mean a clean exit 0, as it
does once the watcher runs; nothing has been published by then.
"""

import signal
import sys
from types import FrameType

from allocwatch import STOP_SIGNALS


def _exit_0(_signum: int, _frame: FrameType | None) -> None:
    sys.exit(0)


def run() -> None:
    for signum in STOP_SIGNALS:
        signal.signal(signum, _exit_0)
    from allocwatch.cli import main  # main() installs the watcher's own handlers

    try:
        code = main()
    finally:
        # The exit is decided. Python puts its handlers back to the default
        # on the way out, while grpc still cleans up, and a stop signal then
        # would end the process with -SIGTERM rather than this code; an
        # ignored signal stays ignored.
        for signum in STOP_SIGNALS:
            signal.signal(signum, signal.SIG_IGN)
    sys.exit(code)


if __name__ == "__main__":
    run()
