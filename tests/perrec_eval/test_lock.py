"""perrec_eval.lock: a command's lock file goes away when it ends, and removing it opens no race."""

from __future__ import annotations

import fcntl
import os
from pathlib import Path

import pytest

from perrec_eval.errors import DataError
from perrec_eval.lock import LOCK_FILE, file_lock, folder_lock


def test_file_lock_leaves_no_lock_file_beside_the_output(tmp_path: Path) -> None:
    with file_lock(tmp_path / "llmrec"):  # `build --out llmrec` from a clone's root
        assert (tmp_path / f".llmrec{LOCK_FILE}").is_file()
    assert list(tmp_path.iterdir()) == []


def test_folder_lock_leaves_no_lock_file_in_the_folder(tmp_path: Path) -> None:
    out = tmp_path / "run"
    with folder_lock(out):
        (out / "run.json").write_text("{}")
    assert [p.name for p in out.iterdir()] == ["run.json"]


def test_lock_file_goes_away_when_the_block_raises(tmp_path: Path) -> None:
    with pytest.raises(KeyError), file_lock(tmp_path / "out"):
        raise KeyError("x")
    assert list(tmp_path.iterdir()) == []


def test_a_lock_taken_again_inside_its_block_is_removed_once_at_the_end(tmp_path: Path) -> None:
    out = tmp_path / "sweep"
    with folder_lock(out):
        with folder_lock(out):
            pass
        assert (out / LOCK_FILE).is_file()  # the outer block still holds it
    assert not (out / LOCK_FILE).exists()


def test_a_file_removed_by_its_holder_is_not_taken_but_the_new_one_is(tmp_path: Path, monkeypatch) -> None:
    """The race of removing a flock file: B opens the file, A removes it and lets go, B's lock succeeds on a
    file no name points to while C locks the new file. B must notice and take the new file instead."""
    from perrec_eval import lock

    path = tmp_path / f".out{LOCK_FILE}"
    path.write_text("1\n")
    opened = open  # the file B opened before A removed it: an orphan once B locks it
    orphan = opened(path, "a+", encoding="utf-8")
    path.unlink()
    taken: list[int] = []

    def open_once_the_orphan(file, *args, **kwargs):
        if not taken:
            taken.append(orphan.fileno())
            return orphan
        return opened(file, *args, **kwargs)

    monkeypatch.setattr(lock, "open", open_once_the_orphan, raising=False)
    with file_lock(tmp_path / "out"):
        assert path.is_file()  # B made and locked a file that the name points to
        with opened(path, encoding="utf-8") as other:  # a third process: the lock is seen
            with pytest.raises(BlockingIOError):
                fcntl.flock(other, fcntl.LOCK_EX | fcntl.LOCK_NB)
            assert other.read().strip() == str(os.getpid())
    assert orphan.closed and taken


def test_a_held_lock_still_refuses_a_second_taker(tmp_path: Path) -> None:
    from tests.lock_holder import held_by_another_process

    with held_by_another_process(tmp_path / "out", "file") as pid:
        with pytest.raises(DataError, match=f"pid {pid}"), file_lock(tmp_path / "out"):
            pass
        assert (tmp_path / f".out{LOCK_FILE}").is_file()  # the holder's file is not ours to remove
