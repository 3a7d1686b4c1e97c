"""Confined reads for paths given on the command line (``-p``) and for listed folders read directly.

``-p`` values under :data:`fleetlib.scenario.PATH_KEYS` follow the scenario file's rule: resolved
(links followed) and refused outside the project root, the link and its target named; ``--allow-path``
(:func:`fleetlib._io.using_limits` ``allow=``) widens it.  A listed folder's links may not lead out of it,
and a special file inside it is refused by name when no ledger is there to note it.
"""

from __future__ import annotations

import os

import pytest

from fleetlib._io import listed_files, using_limits
from fleetlib.program import read_rank_timers
from fleetlib.quality import InputError
from fleetlib.scenario import with_overrides


@pytest.fixture
def root(tmp_path, monkeypatch):
    project = tmp_path / "project"
    (project / "data").mkdir(parents=True)
    monkeypatch.setattr("fleetlib.scenario._project_root", lambda: project.resolve())
    return project


def test_a_p_path_outside_the_project_root_is_refused(root):
    with pytest.raises(InputError) as info:
        with_overrides({}, {"traces_files": ["/etc/passwd"]})
    assert str(info.value).startswith(f"-p traces_files: path '/etc/passwd' lies outside the project root "
                                      f"{root.resolve()} ")
    assert "--allow-path" in str(info.value)


def test_a_p_path_through_a_link_out_is_refused_naming_link_and_target(root, tmp_path):
    outside = tmp_path / "elsewhere"
    outside.mkdir()
    (outside / "secret.csv").write_text("x\n")
    link = root / "data" / "out"
    link.symlink_to(outside)
    with pytest.raises(InputError) as info:
        with_overrides({}, {"timeline_files": "data/out/secret.csv"})
    assert f"(the link {link} leads to {outside.resolve()})" in str(info.value), info.value
    with using_limits(allow=[outside]):  # --allow-path opens that folder
        assert with_overrides({}, {"timeline_files": "data/out/secret.csv"})["timeline_files"] == \
            "data/out/secret.csv"
    assert with_overrides({}, {"timeline_files": "data/inside.csv"})["timeline_files"] == "data/inside.csv"


def test_a_rank_timer_folder_link_out_is_refused_and_a_pipe_ledgered(tmp_path):
    folder = tmp_path / "timers"
    folder.mkdir()
    (folder / "a.csv").write_text("rank,step,duration_s\n0,0,1.0\n")
    secret = tmp_path / "secret.csv"
    secret.write_text("rank,step,duration_s\n1,0,2.0\n")
    (folder / "b.csv").symlink_to(secret)
    with pytest.raises(InputError) as info:
        read_rank_timers(folder)
    assert f"the link {folder / 'b.csv'} leads to {secret.resolve()}" in str(info.value)
    with using_limits(allow=[tmp_path]):  # --allow-path opens the link's target
        assert read_rank_timers(folder)[0]["rank"].tolist() == [0, 1]
    (folder / "b.csv").unlink()
    os.mkfifo(folder / "c.csv")
    table, ledger = read_rank_timers(folder)  # a FIFO opened would block: it is never opened
    assert table["rank"].tolist() == [0]
    assert [(f.code, f.file) for f in ledger.flags] == [("special_file", str(folder / "c.csv"))]
    with pytest.raises(InputError, match=r"c\.csv: is a named pipe, not a regular file"):
        listed_files(folder, (".csv",))  # without a ledger to note it: refused by name


def test_listed_files_walks_sub_folders_without_following_folder_links(tmp_path):
    (tmp_path / "a" / "b").mkdir(parents=True)
    (tmp_path / "a" / "b" / "x.json").write_text("{}")
    (tmp_path / "a" / "y.json.gz").write_bytes(b"")
    (tmp_path / "a" / "note.txt").write_text("")
    (tmp_path / "a" / "loop").symlink_to(tmp_path / "a")
    assert listed_files(tmp_path / "a", (".json", ".json.gz"), recursive=True) == [
        tmp_path / "a" / "b" / "x.json", tmp_path / "a" / "y.json.gz"]
