from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parents[2]

# How long a wait that includes starting a Python process (with grpc) may
# last. Not a bound on anything the tests check, only a guard against a hang,
# ended as soon as the process is up: the start costs about 0.3 s of CPU, and
# a busy machine stretches that (7-14 s at load 32-39 on two cores).
START_SECONDS = 60.0
