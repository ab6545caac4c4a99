"""Which PerRecBench runs may share a table (refusals name what differs) and how rows are labelled, by the
shared report (`perrec_eval.leaderboard.family`) with PerRecBench's settings (`hooks.settings`)."""

from __future__ import annotations

import json
import shutil

import pytest

from perrec_eval.errors import DataError
from perrec_eval.leaderboard import family
from perrec_eval.registry import get
from perrec_eval.tasks.perrecbench.leaderboard.runs import differing_settings, load_run, load_runs


def labels(paths):
    return family.labels(get("perrecbench"), family.load_runs(paths))


def check_comparable(paths):
    family.check_comparable(family.load_runs(paths))


def _copy_with(run_dir, tmp_path, name, **changes):
    """A copy of a run folder whose run.json has `changes` (config.<key> for config keys)."""
    copy = tmp_path / name
    shutil.copytree(run_dir, copy)
    info = json.loads((copy / "run.json").read_text())
    for key, value in changes.items():
        if key in info["config"]:
            info["config"][key] = value
        else:
            info[key] = value
    (copy / "run.json").write_text(json.dumps(info))
    return copy


def test_compare_refuses_another_dataset_fingerprint(runs, tmp_path):
    other = _copy_with(runs["truth"], tmp_path, "other_build", dataset_fingerprint="0123456789ab" + "0" * 52)
    with pytest.raises(DataError) as err:
        check_comparable([runs["truth"], other])
    message = str(err.value)
    assert "differ in their builds (dataset fingerprints)" in message and "other_build" in message
    assert "--allow-mixed" in message and "\n" not in message


def test_compare_refuses_another_group_set(runs):
    with pytest.raises(
        DataError, match=r"\(all docs \(no --limit\) --seed 0\) .*\(--limit 4 --seed 0\).*doc sets"
    ):
        check_comparable([runs["truth"], runs["few4"]])


def test_compare_refuses_another_split(runs, tmp_path):
    other = _copy_with(runs["truth"], tmp_path, "train_split", split="train")
    with pytest.raises(DataError, match="differ in their splits"):
        check_comparable([runs["truth"], other])


def test_compare_runs_without_group_lists_use_their_predictions(runs, tmp_path):
    older = _copy_with(runs["baselines"] / "random", tmp_path, "older")  # written before runs listed groups
    info = json.loads((older / "run.json").read_text())
    del info["groups"]
    (older / "run.json").write_text(json.dumps(info))
    baseline = load_run(older)
    truth = load_run(runs["truth"])
    assert baseline.group_ids == truth.group_ids and len(truth.group_ids) == 6
    check_comparable([runs["truth"], older])


def test_compare_allow_mixed_makes_one_table_per_comparable_set(runs):
    loaded = family.load_runs([runs["truth"], runs["few4"], runs["reverse"]])
    sections = family.sections_of(loaded, n_resamples=200, allow_mixed=True)
    assert [len(section["rows"]) for section in sections] == [2, 1]
    assert [section["extras"]["num_groups"] for section in sections] == [6, 4]
    assert [section["number"] for section in sections] == [1, 2]
    assert "table 2" in family.heading(sections[1])


def test_compare_labels_name_the_settings_that_differ(runs):
    loaded = load_runs([runs["truth"], runs["heapsort"], runs["paper"]])
    assert differing_settings(loaded) == ["pairwise", "presentation", "metric", "failed"]
    assert labels([runs["truth"], runs["heapsort"], runs["paper"]]) == [
        "fake (pairwise=allpairs, presentation=balanced, metric=tau_b, failed=zero)",
        "fake (pairwise=heapsort, presentation=balanced, metric=tau_b, failed=zero)",
        "fake (pairwise=heapsort, presentation=dataset, metric=paper, failed=skip)",
    ]


def test_compare_labels_leave_out_settings_that_do_not_apply(runs):
    named = labels([runs["truth"], runs["heapsort"], runs["baselines"] / "random"])
    assert named[2] == "random"  # a label of its own: no setting shown
    assert named[1] == "fake (pairwise=heapsort)"


def test_compare_labels_tell_prompt_variants_apart(runs):
    assert labels([runs["constant"], runs["no_profile"]]) == [
        "fake (prompt=default)",
        "fake (prompt=no_profile)",
    ]


def test_compare_identical_settings_get_their_folder_names(runs):
    assert labels([runs["truth"], runs["reverse"]]) == ["fake [truth]", "fake [reverse]"]


def test_compare_identical_runs_in_same_named_folders_get_their_paths(runs, tmp_path):
    copy = tmp_path / "again" / "truth"
    shutil.copytree(runs["truth"], copy)
    assert labels([runs["truth"], copy]) == [f"fake [{runs['truth']}]", f"fake [{copy}]"]


def test_compare_labels_tell_structured_outputs_and_budgets_apart(runs, tmp_path):
    structured = _copy_with(runs["truth"], tmp_path, "structured", structured_outputs=True)
    capped = _copy_with(runs["truth"], tmp_path, "capped", max_new_tokens=["pairwise=8"])
    loaded = load_runs([runs["truth"], structured, capped])
    assert differing_settings(loaded) == ["structured", "max_tokens"]
    named = labels([runs["truth"], structured, capped])
    assert named[0].startswith("fake (structured=off, max_tokens=pointwise=800,pairwise=512,")
    assert "structured=on" in named[1] and "pairwise=8," in named[2]


def test_compare_rows_are_named_by_the_run_label(runs, tmp_path):
    labelled = _copy_with(runs["truth"], tmp_path, "labelled")
    info = json.loads((labelled / "run.json").read_text())
    (labelled / "run.json").write_text(json.dumps({**info, "label": "smollm2-135m"}))
    assert labels([labelled]) == ["smollm2-135m"]
