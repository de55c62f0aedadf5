"""The chart README's values table is what helm-docs makes of values.yaml, so each value
is documented once."""

from __future__ import annotations

import subprocess

from tests.support import REPO_ROOT


def test_the_values_table_is_generated_from_values_yaml() -> None:
    check = subprocess.run(
        [str(REPO_ROOT / "hack" / "chart-docs.sh"), "--check"],
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )
    assert check.returncode == 0, check.stdout + check.stderr[-2000:]


def test_the_schema_documents_nothing_values_yaml_does_not() -> None:
    schema = (REPO_ROOT / "charts" / "allocwatch" / "values.schema.json").read_text()
    assert '"description"' not in schema
