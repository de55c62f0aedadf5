"""The e2e's clean-up of staged files: what the teardown runs is what the README gives."""

from __future__ import annotations

import subprocess
from pathlib import Path

from e2e.framework.nodefiles import STAGE_MARKER, unstage_command
from tests.support import REPO_ROOT

README = REPO_ROOT / "e2e" / "README.md"
STAGED = ("config.yaml", "overrides.yaml", "overrides.yaml.lock")


def stage(root: Path, *, marked: bool) -> Path:
    config = root / "driver" / "config"
    config.mkdir(parents=True)
    for name in STAGED:
        (config / name).write_text("x\n")
    if marked:
        (config / STAGE_MARKER).touch()
    return config


def unstage(root: Path) -> None:
    subprocess.run(["sh", "-c", unstage_command(str(root))], check=True, timeout=10)


def test_unstaging_removes_what_staging_wrote_and_the_empty_directories(tmp_path: Path) -> None:
    stage(tmp_path, marked=True)
    unstage(tmp_path)
    assert not (tmp_path / "driver").exists()
    assert tmp_path.exists(), "nvml-mock's root itself stays"


def test_unstaging_leaves_an_unmarked_config_alone(tmp_path: Path) -> None:
    config = stage(tmp_path, marked=False)
    unstage(tmp_path)
    assert sorted(p.name for p in config.iterdir()) == sorted(STAGED)


def test_unstaging_keeps_a_directory_that_holds_someone_elses_file(tmp_path: Path) -> None:
    config = stage(tmp_path, marked=True)
    (config / "other.yaml").write_text("kept\n")
    unstage(tmp_path)
    assert [p.name for p in config.iterdir()] == ["other.yaml"]


def test_the_readme_gives_the_teardowns_own_command() -> None:
    assert f"'{unstage_command('/var/lib/nvml-mock')}'" in README.read_text()
