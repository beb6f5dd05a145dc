"""clusterprint render: writes every file at once, or nothing."""

from __future__ import annotations

from pathlib import Path

import pytest

from clusterprint.blueprint.validate import load_checked
from clusterprint.cli.main import EXIT_USAGE, main
from clusterprint.render import output, rendered_files
from clusterprint.render.images import needed_images
from tests.support.paths import blueprint_path

A4 = blueprint_path("a4")
CPU_SMALL = blueprint_path("cpu-small")


def test_writes_configs_one_script_per_role_and_the_gpu_partitions_jobs(tmp_path):
    out = tmp_path / "out"
    assert main(["render", A4, "--out", str(out)]) == 0
    written = {str(p.relative_to(out)): p.read_text() for p in out.rglob("*") if p.is_file()}
    marker = written.pop(".clusterprint-render")
    assert written == rendered_files(load_checked(A4))
    images = [image.script_path for image in needed_images(load_checked(A4))]
    assert [Path(p).stem.rsplit("-", 1)[0] for p in images] == [
        "clusterprint-cpu", "clusterprint-gpu-rdma"]
    assert sorted(written) == ["cgroup.conf", "gres.conf", *images,
                               "jobs/nccl-allreduce-a4.sbatch",
                               "jobs/nccl-allreduce-a4spot.sbatch", "plugstack.conf",
                               "recipes/gemma-2b-rl.sbatch", "scripts/capacity.json",
                               "scripts/capacity.py", "scripts/common.py",
                               "scripts/compute-a4.sh", "scripts/compute-a4spot.sh",
                               "scripts/controller.sh", "scripts/healthcheck-a4.json",
                               "scripts/healthcheck-a4spot.json", "scripts/healthcheck.py",
                               "scripts/host_events.py",
                               "scripts/login.sh", "scripts/nccl_blocks.py",
                               "scripts/remediate.json",
                               "scripts/remediate.py", "scripts/scale_down.py",
                               "scripts/slurm-exporter.json", "scripts/slurm_exporter.py",
                               "scripts/topology.py", "slurm.conf",
                               "slurmdbd.conf", "topology.yaml"]
    assert marker.startswith("# Written by clusterprint render")
    assert marker.splitlines()[2:] == sorted(written)
    assert (out / "scripts/login.sh").stat().st_mode & 0o111
    assert all((out / image).stat().st_mode & 0o111 for image in images)


def test_writes_into_an_empty_existing_folder(tmp_path):
    assert main(["render", A4, "--out", str(tmp_path)]) == 0
    assert (tmp_path / "slurm.conf").is_file()


def tree(folder: Path) -> dict[str, str]:
    """Every file under ``folder`` with its text: what a refusal must leave as it was."""
    return {str(p.relative_to(folder)): p.read_text() for p in folder.rglob("*") if p.is_file()}


@pytest.fixture
def users_folder(tmp_path) -> Path:
    """A folder of the user's own: a precious file and the blueprint itself."""
    (tmp_path / "precious.txt").write_text("years of work")
    (tmp_path / "base.yaml").write_text(Path(A4).read_text())
    return tmp_path


def test_refuses_a_folder_with_files_unless_forced(tmp_path, capsys):
    (tmp_path / "notes.txt").write_text("mine")
    assert main(["render", A4, "--out", str(tmp_path)]) == EXIT_USAGE
    assert "not empty (--force replaces only an earlier render)" in capsys.readouterr().err
    assert tree(tmp_path) == {"notes.txt": "mine"}


def test_force_never_replaces_a_folder_render_did_not_write(tmp_path, capsys):
    (tmp_path / "notes.txt").write_text("mine")
    (tmp_path / "data").mkdir()
    (tmp_path / "data" / "run.log").write_text("log")
    assert main(["render", A4, "--out", str(tmp_path), "--force"]) == EXIT_USAGE
    err = capsys.readouterr().err
    assert f"{tmp_path} holds files and no .clusterprint-render marker" in err
    assert tree(tmp_path) == {"notes.txt": "mine", "data/run.log": "log"}


def test_force_refuses_the_current_folder_holding_the_users_files(users_folder, monkeypatch,
                                                                  capsys):
    monkeypatch.chdir(users_folder)
    before = tree(users_folder)
    assert main(["render", "base.yaml", "--out", ".", "--force"]) == EXIT_USAGE
    assert f"{users_folder} is the current folder" in capsys.readouterr().err
    assert tree(users_folder) == before


def test_force_refuses_an_ancestor_of_the_current_folder(users_folder, monkeypatch, capsys):
    (users_folder / "deep" / "er").mkdir(parents=True)
    monkeypatch.chdir(users_folder / "deep" / "er")
    before = tree(users_folder)
    assert main(["render", A4, "--out", "../..", "--force"]) == EXIT_USAGE
    assert f"{users_folder} is an ancestor of the current folder" in capsys.readouterr().err
    assert tree(users_folder) == before


def test_force_refuses_the_folder_holding_the_blueprint(users_folder, capsys):
    before = tree(users_folder)
    blueprint = users_folder / "base.yaml"
    assert main(["render", str(blueprint), "--out", str(users_folder),
                     "--force"]) == EXIT_USAGE
    assert f"{users_folder} holds the blueprint {blueprint}" in capsys.readouterr().err
    assert tree(users_folder) == before


def test_refuses_the_home_folder_even_empty(tmp_path, monkeypatch, capsys):
    home = tmp_path / "home"
    home.mkdir()
    monkeypatch.setenv("HOME", str(home))
    assert main(["render", A4, "--out", str(home), "--force"]) == EXIT_USAGE
    assert f"{home} is your home folder" in capsys.readouterr().err
    assert list(home.iterdir()) == []


def test_refuses_the_root_folder(monkeypatch, capsys):
    def never(staging, out):
        raise AssertionError(f"about to replace {out}")

    monkeypatch.setattr(output, "_swap_in", never)
    assert main(["render", A4, "--out", "/", "--force"]) == EXIT_USAGE
    assert "/ is the root folder" in capsys.readouterr().err


def test_force_replaces_an_earlier_render(tmp_path, capsys):
    out = tmp_path / "out"
    assert main(["render", A4, "--out", str(out)]) == 0
    (out / "scripts" / "login.sh").write_text("edited by hand")
    assert main(["render", CPU_SMALL, "--out", str(out)]) == EXIT_USAGE
    assert main(["render", CPU_SMALL, "--out", str(out), "--force"]) == 0
    written = tree(out)
    del written[".clusterprint-render"]
    assert written == rendered_files(load_checked(CPU_SMALL))
    assert sorted(p.name for p in tmp_path.iterdir()) == ["out"]


def test_force_refuses_an_earlier_render_holding_a_users_file(tmp_path, capsys):
    out = tmp_path / "out"
    assert main(["render", A4, "--out", str(out)]) == 0
    (out / "scripts" / "my-notes.txt").write_text("mine")
    before = tree(out)
    assert main(["render", A4, "--out", str(out), "--force"]) == EXIT_USAGE
    assert ("holds files an earlier render did not write (scripts/my-notes.txt)"
            in capsys.readouterr().err)
    assert tree(out) == before


def test_force_refuses_an_earlier_render_holding_a_users_empty_folder(tmp_path, capsys):
    out = tmp_path / "out"
    assert main(["render", A4, "--out", str(out)]) == 0
    (out / "scripts" / "mine").mkdir()
    assert main(["render", A4, "--out", str(out), "--force"]) == EXIT_USAGE
    assert "did not write (scripts/mine)" in capsys.readouterr().err
    assert (out / "scripts" / "mine").is_dir()


def test_invalid_blueprint_prints_the_validators_lines_and_writes_nothing(tmp_path, capsys):
    bad = tmp_path / "bad.yaml"
    bad.write_text(Path(A4).read_text().replace("capacity_gib: 72000", "capacity_gib: 70000"))
    out = tmp_path / "out"
    assert main(["render", str(bad), "--out", str(out)]) == 1
    err = capsys.readouterr().err
    assert f"{bad}:" in err and "error: storage.lustre[0].capacity_gib" in err
    assert err.splitlines()[-1] == "1 error"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["bad.yaml"]


def full_disk_write(self, text, encoding=None):
    """Path.write_text as on a full disk."""
    raise OSError(28, "No space left on device")


@pytest.fixture
def full_disk(monkeypatch):
    """Every file write fails as on a full disk."""
    monkeypatch.setattr(Path, "write_text", full_disk_write)


def test_failed_write_leaves_no_folder_behind(tmp_path, full_disk, capsys):
    assert main(["render", A4, "--out", str(tmp_path / "out")]) == EXIT_USAGE
    assert "No space left on device" in capsys.readouterr().err
    assert list(tmp_path.iterdir()) == []


@pytest.fixture
def old_output(tmp_path) -> Path:
    """A folder from an earlier render."""
    assert main(["render", A4, "--out", str(tmp_path / "out")]) == 0
    return tmp_path / "out"


def test_failed_forced_write_keeps_the_old_folder(tmp_path, old_output, monkeypatch):
    before = tree(old_output)
    monkeypatch.setattr(Path, "write_text", full_disk_write)
    assert main(["render", A4, "--out", str(old_output), "--force"]) == EXIT_USAGE
    assert list(tmp_path.iterdir()) == [old_output]
    assert tree(old_output) == before


def test_failed_write_into_new_folders_removes_the_folders_it_made(tmp_path, full_disk, capsys):
    out = tmp_path / "a" / "b" / "out"
    assert main(["render", A4, "--out", str(out)]) == EXIT_USAGE
    assert "No space left on device" in capsys.readouterr().err
    assert list(tmp_path.iterdir()) == []


def test_failed_swap_puts_the_old_folder_back(tmp_path, old_output, monkeypatch, capsys):
    before = tree(old_output)
    real_rename = Path.rename

    def rename(self, target):
        if self.name.startswith(".out.") and not self.name.startswith(".out.old."):
            raise OSError(16, "Device or resource busy")
        return real_rename(self, target)

    monkeypatch.setattr(Path, "rename", rename)
    assert main(["render", A4, "--out", str(old_output), "--force"]) == EXIT_USAGE
    assert "Device or resource busy" in capsys.readouterr().err
    assert list(tmp_path.iterdir()) == [old_output]
    assert tree(old_output) == before


def test_old_render_that_cannot_be_put_back_is_named_not_hidden(tmp_path, old_output,
                                                                monkeypatch, capsys):
    before = tree(old_output)
    real_rename = Path.rename

    def rename(self, target):
        if Path(target) == old_output and self != old_output:
            raise OSError(16, "Device or resource busy")
        return real_rename(self, target)

    monkeypatch.setattr(Path, "rename", rename)
    assert main(["render", A4, "--out", str(old_output), "--force"]) == 3
    kept = tmp_path / "out.previous"
    assert capsys.readouterr().err == (
        f"clusterprint render: could not put the new render at {old_output} (Device or "
        f"resource busy) nor the earlier one back (Device or resource busy): the earlier one "
        f"is in {kept}\n")
    assert list(tmp_path.iterdir()) == [kept]
    assert tree(kept) == before


def test_old_render_that_cannot_be_removed_is_named_not_hidden(tmp_path, old_output,
                                                                monkeypatch, capsys):
    real_rmtree = output.shutil.rmtree

    def rmtree(path, *args, **kwargs):
        if Path(path).name.startswith(".out.old."):
            (Path(path) / "slurm.conf").unlink()  # removed up to a file it cannot delete
            raise PermissionError(13, "Permission denied")
        return real_rmtree(path, *args, **kwargs)

    monkeypatch.setattr(output.shutil, "rmtree", rmtree)
    code = main(["render", "blueprints/cpu-small.yaml", "--out", str(old_output), "--force"])
    err = capsys.readouterr().err
    kept = tmp_path / "out.previous"
    assert code == 3
    assert err == (f"clusterprint render: wrote {old_output}, but could not remove the render "
                   f"it replaced (Permission denied): what is left of it is in {kept}; remove "
                   "it yourself\n")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["out", "out.previous"]
    assert tree(old_output)["slurm.conf"] == rendered_files(
        load_checked("blueprints/cpu-small.yaml"))["slurm.conf"]
    assert "slurm.conf" not in tree(kept) and "scripts/compute-a4.sh" in tree(kept)
