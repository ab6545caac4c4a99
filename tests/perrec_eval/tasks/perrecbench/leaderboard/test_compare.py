"""Which runs may share a table (refusals name what differs) and how rows are labelled."""

from __future__ import annotations

import json
import shutil

import pytest

from perrec_eval.errors import DataError
from perrec_eval.tasks.perrecbench.leaderboard import compare
from perrec_eval.tasks.perrecbench.leaderboard.assemble import assemble
from perrec_eval.tasks.perrecbench.leaderboard.runs import load_run, load_runs


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
        compare.check_comparable(load_runs([runs["truth"], other]))
    message = str(err.value)
    assert "dataset fingerprint differs" in message and "0123456789ab" in message
    assert "--allow-mixed" in message and "\n" not in message


def test_compare_refuses_another_group_set(runs):
    with pytest.raises(DataError, match=r"group sets differ \(.*: 6 groups; .*: 4 groups; 4 shared by all\)"):
        compare.check_comparable(load_runs([runs["truth"], runs["few4"]]))


def test_compare_refuses_another_split(runs, tmp_path):
    other = _copy_with(runs["truth"], tmp_path, "train_split", split="train")
    with pytest.raises(DataError, match="split differs"):
        compare.check_comparable(load_runs([runs["truth"], other]))


def test_compare_runs_without_group_lists_use_their_predictions(runs, tmp_path):
    older = _copy_with(runs["baselines"] / "random", tmp_path, "older")  # written before runs listed groups
    info = json.loads((older / "run.json").read_text())
    del info["groups"]
    (older / "run.json").write_text(json.dumps(info))
    baseline = load_run(older)
    truth = load_run(runs["truth"])
    assert baseline.group_ids == truth.group_ids and len(truth.group_ids) == 6
    compare.check_comparable([truth, baseline])


def test_compare_allow_mixed_makes_one_table_per_comparable_set(runs):
    report = assemble(load_runs([runs["truth"], runs["few4"], runs["reverse"]]), allow_mixed=True)
    assert [len(table.rows) for table in report.tables] == [2, 1]
    assert [table.num_groups for table in report.tables] == [6, 4]


def test_compare_labels_name_the_settings_that_differ(runs):
    loaded = load_runs([runs["truth"], runs["heapsort"], runs["paper"]])
    labels = compare.labels(loaded)
    assert compare.differing_settings(loaded) == ["pairwise", "presentation", "metric", "failed"]
    assert labels == [
        "fake (pairwise=allpairs, presentation=balanced, metric=tau_b, failed=zero)",
        "fake (pairwise=heapsort, presentation=balanced, metric=tau_b, failed=zero)",
        "fake (pairwise=heapsort, presentation=dataset, metric=paper, failed=skip)",
    ]


def test_compare_labels_leave_out_settings_that_do_not_apply(runs):
    loaded = load_runs([runs["truth"], runs["heapsort"], runs["baselines"] / "random"])
    labels = compare.labels(loaded)
    assert labels[2] == "random"  # a pointwise baseline has no pairwise strategy
    assert labels[1] == "fake (pairwise=heapsort)"


def test_compare_labels_tell_prompt_variants_apart(runs):
    labels = compare.labels(load_runs([runs["constant"], runs["no_profile"]]))
    assert labels == ["fake (prompt=default)", "fake (prompt=no_profile)"]


def test_compare_identical_settings_get_their_folder_names(runs):
    labels = compare.labels(load_runs([runs["truth"], runs["reverse"]]))
    assert labels == ["fake [truth]", "fake [reverse]"]


def test_compare_identical_runs_in_same_named_folders_get_their_paths(runs, tmp_path):
    copy = tmp_path / "again" / "truth"
    shutil.copytree(runs["truth"], copy)
    labels = compare.labels(load_runs([runs["truth"], copy]))
    assert labels == [f"fake [{runs['truth']}]", f"fake [{copy}]"]


def test_compare_labels_tell_structured_outputs_and_budgets_apart(runs, tmp_path):
    structured = _copy_with(runs["truth"], tmp_path, "structured", structured_outputs=True)
    capped = _copy_with(runs["truth"], tmp_path, "capped", max_new_tokens=["pairwise=8"])
    loaded = load_runs([runs["truth"], structured, capped])
    assert compare.differing_settings(loaded) == ["structured", "max_tokens"]
    labels = compare.labels(loaded)
    assert labels[0].startswith("fake (structured=off, max_tokens=pointwise=800,pairwise=512,")
    assert "structured=on" in labels[1] and "pairwise=8," in labels[2]


def test_compare_rows_are_named_by_the_run_label(runs, tmp_path):
    labelled = _copy_with(runs["truth"], tmp_path, "labelled")
    info = json.loads((labelled / "run.json").read_text())
    (labelled / "run.json").write_text(json.dumps({**info, "label": "smollm2-135m"}))
    assert compare.labels(load_runs([labelled])) == ["smollm2-135m"]
