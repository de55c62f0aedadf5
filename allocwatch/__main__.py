"""The `allocwatch` command and `python -m allocwatch`.

Kept free of heavy imports: a stop signal that arrives while grpc is still
loading must already mean a clean exit 0, as it does once the watcher runs;
nothing has been published by then.
"""

import sys

from allocwatch.shutdown import exit_on_stop_signals, ignore_stop_signals


def run() -> None:
    exit_on_stop_signals()
    from allocwatch.cli import main  # main() installs the watcher's own handlers

    try:
        code = main()
    finally:
        ignore_stop_signals()
    sys.exit(code)


if __name__ == "__main__":
    run()
