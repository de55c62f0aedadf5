"""Static checks on image/Dockerfile and its build-context filter (no docker needed)."""

from __future__ import annotations

import re
import tomllib

import pytest
from packaging.requirements import Requirement
from packaging.utils import canonicalize_name

from tests.chart.helmtool import REPO_ROOT

DOCKERFILE = REPO_ROOT / "image" / "Dockerfile"
IGNORE = REPO_ROOT / "image" / "Dockerfile.dockerignore"
ROOT_IGNORE = REPO_ROOT / ".dockerignore"
LOCK = REPO_ROOT / "image" / "requirements.txt"


def instructions() -> list[tuple[str, str]]:
    """(INSTRUCTION, arguments) pairs, continuation lines joined, comments dropped."""
    out: list[tuple[str, str]] = []
    pending = ""
    for raw in DOCKERFILE.read_text().splitlines():
        line = raw.strip()
        if not pending and (not line or line.startswith("#")):
            continue
        if line.endswith("\\"):
            pending += line[:-1] + " "
            continue
        line = pending + line
        pending = ""
        word, _, rest = line.partition(" ")
        out.append((word.upper(), rest.strip()))
    return out


def stages() -> list[tuple[str, list[tuple[str, str]]]]:
    result: list[tuple[str, list[tuple[str, str]]]] = []
    for word, rest in instructions():
        if word == "FROM":
            m = re.fullmatch(r"(\S+)\s+AS\s+(\S+)", rest, re.IGNORECASE)
            assert m, f"every stage is named: FROM {rest}"
            result.append((m[2], []))
        elif result:
            result[-1][1].append((word, rest))
    return result


def ignore_patterns(path: str | None = None) -> list[str]:
    text = (REPO_ROOT / path).read_text() if path else IGNORE.read_text()
    return [ln.strip() for ln in text.splitlines() if ln.strip() and not ln.startswith("#")]


def test_base_image_defaults_to_an_official_slim_python() -> None:
    args = [rest for word, rest in instructions() if word == "ARG" and rest.startswith("BASE")]
    assert len(args) == 1
    m = re.fullmatch(r"BASE_IMAGE=python:3\.(\d+)-slim-bookworm", args[0])
    assert m, args[0]
    assert int(m[1]) >= 11, "the package needs Python >= 3.11"


def test_version_label_defaults_to_the_package_version() -> None:
    """Builds that pass no VERSION (cluster-images, the e2e providers) still label it right."""
    version = tomllib.loads((REPO_ROOT / "pyproject.toml").read_text())["project"]["version"]
    args = [rest for word, rest in instructions() if word == "ARG" and rest.startswith("VERSION")]
    assert args == [f"VERSION={version}"]


def test_watcher_is_the_last_stage_and_fakeplugin_a_target() -> None:
    names = [name for name, _ in stages()]
    assert names[-1] == "allocwatch", "a build without --target must give the watcher"
    assert "fakeplugin" in names
    body = dict(stages())
    assert ("ENTRYPOINT", '["allocwatch"]') in body["allocwatch"]
    assert ("ENTRYPOINT", '["python", "-m", "fakeplugin"]') in body["fakeplugin"]


def test_runtime_stages_hold_no_build_tools() -> None:
    for name, body in stages():
        if name == "builder":
            continue
        runs = [rest for word, rest in body if word == "RUN"]
        assert not runs, f"stage {name} runs {runs}: only the builder installs"


def test_builder_uses_python3_venv_and_installs_the_package() -> None:
    body = dict(stages())["builder"]
    run = " ".join(rest for word, rest in body if word == "RUN")
    assert "python3 -m venv /opt/venv" in run
    installs = [
        rest for word, rest in body if word == "RUN" and "/opt/venv/bin/pip install" in rest
    ]
    assert len(installs) == 2, installs
    # The lock first, every file checked against its hash; then the package,
    # which may pull in nothing the lock does not hold.
    assert "--require-hashes --no-deps -r requirements.txt" in installs[0]
    assert "--no-deps --no-build-isolation ." in installs[1]  # the locked setuptools
    assert "/opt/venv/bin/pip check" in installs[1]


def locked() -> dict[str, tuple[str, list[str]]]:
    """name -> (pinned version, sha256 hashes) from the image's lock file."""
    text = LOCK.read_text().replace("\\\n", " ")
    entries: dict[str, tuple[str, list[str]]] = {}
    for line in text.splitlines():
        line = line.split("#", 1)[0].strip()
        if not line:
            continue
        spec, *options = line.split(" --")
        m = re.fullmatch(r"([A-Za-z0-9._-]+)==(\S+)", spec.strip())
        assert m, f"{LOCK.name}: not an exact pin: {line}"
        hashes = [o.strip().removeprefix("hash=sha256:") for o in options if o.startswith("hash=")]
        entries[canonicalize_name(m[1])] = (m[2], hashes)
    return entries


def test_image_lock_pins_every_runtime_dependency_within_pyproject() -> None:
    """A lock left behind by a change to the dependencies fails here, not in the image."""
    project = tomllib.loads((REPO_ROOT / "pyproject.toml").read_text())["project"]
    lock = locked()
    for dependency in project["dependencies"]:
        req = Requirement(dependency)
        name = canonicalize_name(req.name)
        assert name in lock, f"{req.name} is not in {LOCK.name}: run make image-lock"
        version, _ = lock[name]
        assert req.specifier.contains(version), (
            f"{LOCK.name} pins {req.name}=={version}, outside pyproject's {req.specifier}"
        )
    extras = {
        canonicalize_name(Requirement(d).name)
        for group in project["optional-dependencies"].values()
        for d in group
    }
    assert not extras & lock.keys(), "test and e2e tools stay out of the image"
    # The package is built without isolation, with the backend the lock holds.
    build_system = tomllib.loads((REPO_ROOT / "pyproject.toml").read_text())["build-system"]
    for requirement in build_system["requires"]:
        req = Requirement(requirement)
        name = canonicalize_name(req.name)
        assert name in lock, f"build requirement {req.name} is not in {LOCK.name}"
        assert req.specifier.contains(lock[name][0]), f"{LOCK.name} pins {name} below {req}"
    for name, (_, hashes) in lock.items():
        # --require-hashes needs one on every line
        assert hashes and all(re.fullmatch(r"[0-9a-f]{64}", h) for h in hashes), name


def test_runtime_environment_and_labels() -> None:
    text = DOCKERFILE.read_text()
    for needle in (
        "PATH=/opt/venv/bin:$PATH",
        "PYTHONDONTWRITEBYTECODE=1",
        "PYTHONUNBUFFERED=1",
        "org.opencontainers.image.title=",
        "org.opencontainers.image.source=",
        "org.opencontainers.image.version=",
        "org.opencontainers.image.licenses=",
        "org.opencontainers.image.description=",
    ):
        assert needle in text, needle


@pytest.mark.parametrize(
    "source",
    [
        "pyproject.toml",
        "README.md",
        "allocwatch",
        "image/requirements.txt",
        "e2e/fakeplugin",
        "e2e/__init__.py",
        "e2e/fakedra",
        "e2e/kubeletapi",
        "e2e/kubeletplugin",
    ],
)
def test_copied_sources_are_allowed_by_the_context_filter(source: str) -> None:
    patterns = ignore_patterns()
    assert patterns[0] == "*", "the filter is an allow-list"
    assert f"!{source}" in patterns


def test_root_dockerignore_matches_when_present() -> None:
    """The classic builder reads only <context>/.dockerignore; keep it in step."""
    if not ROOT_IGNORE.exists():
        return
    assert ignore_patterns(".dockerignore") == ignore_patterns()
