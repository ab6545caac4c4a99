"""`perrec_eval.outputs`: the one rule every command's output goes through (issue 29, F1-F4, F18-F20).

The commands' cases, through the command line, are in tests/test_fault_injection_outputs.py.
"""

from __future__ import annotations

import os
from pathlib import Path, PurePosixPath

import pytest

from perrec_eval import outputs
from perrec_eval.errors import ConfigError, DataError


def test_outputs_target_resolves_a_symlinked_name(tmp_path: Path) -> None:
    (tmp_path / "real").mkdir()
    (tmp_path / "link").symlink_to("real")
    assert outputs.target(tmp_path / "link") == tmp_path.resolve() / "real"


@pytest.mark.parametrize("out", ["", "   ", ".", "..", "/", "~", "~/..", "~no-such-user-xyz/out"])
def test_outputs_target_refuses_the_current_home_and_root_folders(tmp_path, monkeypatch, out: str) -> None:
    (tmp_path / "home").mkdir()
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    monkeypatch.chdir(tmp_path / "home")
    with pytest.raises(ConfigError, match="empty|current folder|home folder|root folder|no-such-user"):
        outputs.target(out)


def test_outputs_target_takes_a_file_in_the_current_folder(tmp_path: Path, monkeypatch) -> None:
    monkeypatch.chdir(tmp_path)
    assert outputs.target("profiles.jsonl", folder=False) == tmp_path.resolve() / "profiles.jsonl"


def test_outputs_target_refuses_a_name_its_temp_sibling_cannot_have(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="at most 200"):
        outputs.target(tmp_path / ("é" * 101))  # 202 bytes


def test_outputs_target_names_a_symlink_loop_and_a_link_to_nothing(tmp_path: Path) -> None:
    (tmp_path / "a").symlink_to("b")
    (tmp_path / "b").symlink_to("a")
    (tmp_path / "dangling").symlink_to("missing")
    with pytest.raises(DataError, match="symlink loop"):
        outputs.target(tmp_path / "a")
    with pytest.raises(DataError, match="symlink to missing, which does not exist"):
        outputs.target(tmp_path / "dangling" / "run")
    assert outputs.target(tmp_path / "dangling", folder=False) == tmp_path.resolve() / "missing"


@pytest.mark.parametrize(("out", "says"), [("in", "is --data"), ("in/run", "is inside"), (".", "holds")])
def test_outputs_refuse_overlap_names_the_relation(tmp_path: Path, out: str, says: str) -> None:
    (tmp_path / "in").mkdir()
    with pytest.raises(ConfigError, match=says):
        outputs.refuse_overlap(tmp_path / out, {"--data": str(tmp_path / "in")})


def test_outputs_refuse_overlap_without_holds_takes_a_parent(tmp_path: Path) -> None:
    (tmp_path / "in").mkdir()
    outputs.refuse_overlap(tmp_path, {"--source": str(tmp_path / "in")}, holds=False)
    outputs.refuse_overlap(tmp_path / "new", {"--out": str(tmp_path / "missing")})  # missing: not an input
    with pytest.raises(ConfigError, match="is --out"):
        outputs.refuse_overlap(tmp_path / "missing", {"--out": str(tmp_path / "missing")}, existing=False)


def test_outputs_foreign_files_skip_locks_temp_files_and_empty_folders(tmp_path: Path) -> None:
    for name in (
        ".perrecbench.lock",
        ".run.json.tmp-12",
        "sub/.x.old-3/inner",
        "run.json",
        "a/b/notes.txt",
        "a/.DS_Store",
    ):
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / name).write_text("x")
    (tmp_path / "empty").mkdir()
    (tmp_path / "linked").symlink_to(tmp_path / "a", target_is_directory=True)
    found = outputs.foreign_files(tmp_path, lambda path: path == PurePosixPath("run.json"))
    assert found == [PurePosixPath("linked"), PurePosixPath("a/b/notes.txt")]  # a folder's files first


def test_outputs_refuse_foreign_lists_what_the_command_did_not_write(tmp_path: Path) -> None:
    for name in "abcde":
        (tmp_path / f"{name}.txt").write_text(name)
    with pytest.raises(DataError, match=r"holds a.txt, b.txt, c.txt, \.\.\., which `perrecbench x` did not"):
        outputs.refuse_foreign(tmp_path, lambda path: False, command="x")
    outputs.refuse_foreign(tmp_path, lambda path: True, command="x")
    outputs.refuse_foreign(tmp_path / "missing", lambda path: False, command="x")
    with pytest.raises(DataError, match="is a file"):
        outputs.refuse_foreign(tmp_path / "a.txt", lambda path: True, command="x")


def test_outputs_replaced_swaps_the_new_folder_in_whole(tmp_path: Path) -> None:
    out = tmp_path / "out"
    out.mkdir()
    (out / "old.txt").write_text("old")
    with outputs.replaced(out) as tmp:
        (tmp / "new.txt").write_text("new")
        assert not (out / "new.txt").exists()
    assert sorted(p.name for p in out.iterdir()) == ["new.txt"]
    assert sorted(p.name for p in tmp_path.iterdir()) == ["out"]


def test_outputs_replaced_killed_leaves_the_old_folder(tmp_path: Path) -> None:
    out = tmp_path / "out"
    out.mkdir()
    (out / "old.txt").write_text("old")
    with pytest.raises(KeyboardInterrupt), outputs.replaced(out) as tmp:
        (tmp / "new.txt").write_text("new")
        raise KeyboardInterrupt
    assert sorted(p.name for p in out.iterdir()) == ["old.txt"]
    assert sorted(p.name for p in tmp_path.iterdir()) == ["out"]


def test_lock_of_a_file_is_shared_by_its_symlinked_names(tmp_path: Path) -> None:
    from perrec_eval.lock import file_lock
    from tests.lock_holder import held_by_another_process

    (tmp_path / "alias.jsonl").symlink_to("real.jsonl")
    with held_by_another_process(tmp_path / "real.jsonl", "file") as pid:
        with pytest.raises(DataError, match=f"pid {pid}"), file_lock(tmp_path / "alias.jsonl"):
            pass
    assert os.path.islink(tmp_path / "alias.jsonl")


def test_outputs_refuse_foreign_names_a_folder_it_cannot_read(tmp_path: Path, monkeypatch) -> None:
    def walk(top, onerror):  # what os.walk does with a folder of another user (the tests run as root)
        onerror(PermissionError(13, "Permission denied", str(top)))
        return iter(())

    monkeypatch.setattr(outputs.os, "walk", walk)
    with pytest.raises(DataError, match="cannot read .*Permission denied"):
        outputs.refuse_foreign(tmp_path, lambda path: True, command="x")


def test_folder_lock_removes_the_folders_it_made_when_nothing_was_written(tmp_path):
    from perrec_eval.lock import folder_lock

    with pytest.raises(RuntimeError), folder_lock(tmp_path / "runs" / "failed"):
        raise RuntimeError("the model did not load")
    assert list(tmp_path.iterdir()) == []  # no empty runs/failed/ (nor runs/) left behind
    with folder_lock(tmp_path / "runs" / "done"):
        (tmp_path / "runs" / "done" / "run.json").write_text("{}")
    assert (tmp_path / "runs" / "done" / "run.json").is_file()
    (tmp_path / "kept").mkdir()
    with folder_lock(tmp_path / "kept"):
        pass
    assert (tmp_path / "kept").is_dir()  # a folder that was there before stays
