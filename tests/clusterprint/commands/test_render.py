"""clusterprint render: writes every file at once, or nothing."""

from __future__ import annotations

from pathlib import Path

import pytest

from clusterprint import cli
from clusterprint.render import rendered_files
from clusterprint.validate import load_checked

A4 = "blueprints/a4.yaml"


def test_writes_configs_and_one_script_per_role(tmp_path):
    out = tmp_path / "out"
    assert cli.main(["render", A4, "--out", str(out)]) == 0
    written = {str(p.relative_to(out)): p.read_text() for p in out.rglob("*") if p.is_file()}
    assert written == rendered_files(load_checked(A4))
    assert sorted(written) == ["cgroup.conf", "gres.conf", "scripts/compute-a4.sh",
                               "scripts/compute-a4spot.sh", "scripts/controller.sh",
                               "scripts/login.sh", "slurm.conf"]
    assert (out / "scripts/login.sh").stat().st_mode & 0o111


def test_writes_into_an_empty_existing_folder(tmp_path):
    assert cli.main(["render", A4, "--out", str(tmp_path)]) == 0
    assert (tmp_path / "slurm.conf").is_file()


def test_refuses_a_folder_with_files_unless_forced(tmp_path, capsys):
    (tmp_path / "notes.txt").write_text("mine")
    assert cli.main(["render", A4, "--out", str(tmp_path)]) == cli.EXIT_USAGE
    assert "not empty (use --force" in capsys.readouterr().err
    assert [p.name for p in tmp_path.iterdir()] == ["notes.txt"]

    assert cli.main(["render", A4, "--out", str(tmp_path), "--force"]) == 0
    assert not (tmp_path / "notes.txt").exists()
    assert (tmp_path / "scripts/compute-a4spot.sh").is_file()


def test_invalid_blueprint_prints_the_validators_lines_and_writes_nothing(tmp_path, capsys):
    bad = tmp_path / "bad.yaml"
    bad.write_text(Path(A4).read_text().replace("capacity_gib: 72000", "capacity_gib: 70000"))
    out = tmp_path / "out"
    assert cli.main(["render", str(bad), "--out", str(out)]) == 1
    err = capsys.readouterr().err
    assert f"{bad}:" in err and "error: storage.lustre[0].capacity_gib" in err
    assert sorted(p.name for p in tmp_path.iterdir()) == ["bad.yaml"]


@pytest.fixture
def full_disk(monkeypatch):
    """Every file write fails as on a full disk."""

    def write_text(self, text, encoding=None):
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(Path, "write_text", write_text)


def test_failed_write_leaves_no_folder_behind(tmp_path, full_disk, capsys):
    assert cli.main(["render", A4, "--out", str(tmp_path / "out")]) == cli.EXIT_USAGE
    assert "No space left on device" in capsys.readouterr().err
    assert list(tmp_path.iterdir()) == []


@pytest.fixture
def old_output(tmp_path) -> Path:
    """A folder from an earlier render."""
    (tmp_path / "out").mkdir()
    (tmp_path / "out" / "old.conf").write_text("old")
    return tmp_path / "out"


def test_failed_forced_write_keeps_the_old_folder(tmp_path, old_output, full_disk):
    assert cli.main(["render", A4, "--out", str(old_output), "--force"]) == cli.EXIT_USAGE
    assert list(tmp_path.iterdir()) == [old_output]
    assert (old_output / "old.conf").read_text() == "old"
