"""The commands the integrations add: ``data export-world --data-source`` and ``serve-openenv --help``."""

from __future__ import annotations

import pyarrow.parquet as pq
from typer.testing import CliRunner

from searchgym.cli import app


def test_export_world_writes_the_data_source_verl_dispatches_on(tmp_path):
    res = CliRunner().invoke(app, ["data", "export-world", "--out", str(tmp_path), "--data-source", "searchR1_nq"])
    assert res.exit_code == 0, res.output
    table = pq.read_table(tmp_path / "dev.parquet", columns=["data_source"])
    assert set(table.column("data_source").to_pylist()) == {"searchR1_nq"}


def test_export_world_default_data_source_is_searchgym(tmp_path):
    res = CliRunner().invoke(app, ["data", "export-world", "--out", str(tmp_path)])
    assert res.exit_code == 0, res.output
    assert set(pq.read_table(tmp_path / "test.parquet").column("data_source").to_pylist()) == {"searchgym_world"}


def test_serve_openenv_is_registered_with_loopback_default():
    res = CliRunner().invoke(app, ["serve-openenv", "--help"])
    assert res.exit_code == 0 and "127.0.0.1" in res.output
