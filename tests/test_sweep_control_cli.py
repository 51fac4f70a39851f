"""`specbench sweep control` is wired into the command line and its code rides in the Job's zip."""

from __future__ import annotations

import io
import json
import zipfile

import pytest

from specbench import bundle, cli


def test_sweep_control_parses_and_runs_the_controller(tmp_path, capsys):
    settings = tmp_path / "settings.json"
    settings.write_text(json.dumps({"sweep_decision": {}}))
    code = cli.main(["sweep", "control", "--sweep-id", "s1", "--results", str(tmp_path), "--settings", str(settings)])
    # An empty sweep_decision is bad settings: the controller's own one-line error, exit 2, no traceback.
    assert code == 2
    assert capsys.readouterr().err.startswith("specbench: sweep control: ")


def test_sweep_control_rejects_a_missing_flag(capsys):
    with pytest.raises(SystemExit) as exit_:
        cli.main(["sweep", "control", "--results", "r", "--settings", "s.json"])
    assert exit_.value.code == 2
    assert "--sweep-id" in capsys.readouterr().err


def test_the_job_zip_holds_the_controller_and_no_checkout_code():
    names = zipfile.ZipFile(io.BytesIO(bundle.zipapp_bytes())).namelist()
    assert "specbench/outputs/sweep_controller.py" in names
    assert "specbench/sweep/jobs_api.py" in names
    assert not [n for n in names if n.startswith(("config/", "charts/")) or "numpy" in n or "matplotlib" in n]
    # sweep_report rides along for load_sweep_folders; its chart's matplotlib module does not.
    assert "specbench/outputs/sweep_report.py" in names
    assert "specbench/outputs/report_charts.py" not in names
