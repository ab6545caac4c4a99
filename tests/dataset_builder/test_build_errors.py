"""Bad input: every fault names the file, the line and the fix; `skip` counts and reports bad lines."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from dataset_builder.build import build
from dataset_builder.config import BuildError
from dataset_builder.perrecbench.config import BuildConfig
from dataset_builder.synth import write_synthetic
from tests.dataset_builder.build_fixture import Scenario, config, five_users

GOOD = {"rating": 4.0, "parent_asin": "X1", "user_id": "someone", "timestamp": 1_600_000_000_000}


def write_with(tmp_path: Path, extra: list[str], meta_extra: list[str] | None = None) -> tuple[Path, int]:
    """Valid scenario plus extra review lines; returns the folder and the 1-based line of the first extra."""
    scenario = Scenario()
    five_users(scenario)
    return scenario.write(tmp_path / "raw", extra, meta_extra), len(scenario.reviews) + 1


@pytest.mark.parametrize(
    ("line", "problem"),
    [
        (json.dumps(GOOD)[:30], "not valid JSON"),
        (json.dumps({**GOOD, "rating": "five"}), "field 'rating' must be a number in [1, 5], got 'five'"),
        (json.dumps({**GOOD, "rating": 7}), "field 'rating' must be a number in [1, 5], got 7"),
        (
            json.dumps({k: v for k, v in GOOD.items() if k != "user_id"}),
            "field 'user_id' must be a non-empty",
        ),
        (json.dumps({**GOOD, "timestamp": -5}), "field 'timestamp' must be a non-negative integer"),
        (json.dumps({**GOOD, "timestamp": "yesterday"}), "field 'timestamp' must be a non-negative integer"),
        ("[1, 2, 3]", "must be a JSON object"),
    ],
    ids=["truncated", "non-numeric", "out-of-range", "missing", "negative-ts", "string-ts", "not-object"],
)
def test_build_errors_bad_review_line_names_file_line_and_fix(
    tmp_path: Path, line: str, problem: str
) -> None:
    source, number = write_with(tmp_path, [line])
    with pytest.raises(BuildError) as err:
        build(config(source, tmp_path / "bench"))
    message = str(err.value)
    assert f"{source / 'Books.jsonl'}:{number}: " in message
    assert problem in message and "--on-bad-line skip" in message
    assert not (tmp_path / "bench").exists()


def test_build_errors_skip_counts_and_reports_bad_lines(tmp_path: Path) -> None:
    lines = [json.dumps(GOOD)[:30], "", json.dumps({**GOOD, "rating": "five"})]
    source, number = write_with(tmp_path, lines)
    out = build(config(source, tmp_path / "bench", on_bad_line="skip"))
    manifest = json.loads((out / "manifest.json").read_text())
    assert manifest["bad_lines"]["count"] == 2
    [report] = manifest["bad_lines"]["files"]
    assert report["file"] == "Books.jsonl"  # published manifests name files, never local paths
    assert [entry["line"] for entry in report["first_lines"]] == [number, number + 2]
    assert report["reasons"] == {
        "field 'rating' must be a number in [1": 1,
        "not valid JSON (JSONDecodeError": 1,
    }
    assert manifest["selection"]["Books"]["bad_lines"] == 2


def test_build_errors_bad_metadata_line_names_meta_file(tmp_path: Path) -> None:
    source, _ = write_with(tmp_path, [], ['{"title": "no asin"}'])
    with pytest.raises(BuildError, match=r"meta_Books\.jsonl:\d+: field 'parent_asin'"):
        build(config(source, tmp_path / "bench"))


def test_build_errors_synth_dirty_faults_stop_at_the_first(tmp_path: Path) -> None:
    write_synthetic(tmp_path / "raw", reviews_per_domain=300, domains="Books", seed=0, dirty=True)
    truth = json.loads((tmp_path / "raw" / "synth_truth.json").read_text())
    first_bad = min(
        f["line"]
        for f in truth["faults"]
        if f["kind"] in ("non_numeric_rating", "missing_field", "truncated_line")
    )
    with pytest.raises(BuildError, match=rf"Books\.jsonl:{first_bad}: "):
        build(config(tmp_path / "raw", tmp_path / "bench", min_history=2))


def test_build_errors_unknown_domain_lists_valid_ones(tmp_path: Path) -> None:
    with pytest.raises(
        BuildError, match="unknown domain.*'Toys'.*All_Beauty, Amazon_Fashion.*Video_Games, Unknown"
    ):
        BuildConfig(source=str(tmp_path), out=tmp_path / "o", domains=("Books", "Toys"))
    with pytest.raises(BuildError, match="--domains all stands alone"):
        BuildConfig(source=str(tmp_path), out=tmp_path / "o", domains=("Books", "all"))


def test_build_errors_empty_source_folder(tmp_path: Path) -> None:
    (tmp_path / "raw").mkdir()
    with pytest.raises(BuildError, match="has no .jsonl or .jsonl.gz files"):
        build(config(tmp_path / "raw", tmp_path / "bench"))


def test_build_errors_missing_source_folder(tmp_path: Path) -> None:
    with pytest.raises(BuildError, match="no such folder.*perrecbench synth"):
        build(config(tmp_path / "absent", tmp_path / "bench"))


def test_build_errors_missing_metadata_file_names_expected_files(tmp_path: Path) -> None:
    source, _ = write_with(tmp_path, [])
    (source / "meta_Books.jsonl").unlink()
    with pytest.raises(BuildError, match="no meta file for domain Books; expected one of .*meta_Books.jsonl"):
        build(config(source, tmp_path / "bench"))


def test_build_errors_domain_not_in_source(tmp_path: Path) -> None:
    source, _ = write_with(tmp_path, [])
    with pytest.raises(BuildError, match="no reviews file for domain Electronics"):
        build(config(source, tmp_path / "bench", domains=("Books", "Electronics")))


def test_build_errors_empty_review_file(tmp_path: Path) -> None:
    source, _ = write_with(tmp_path, [])
    (source / "Books.jsonl").write_text("\n")
    with pytest.raises(BuildError, match=r"Books\.jsonl has no lines"):
        build(config(source, tmp_path / "bench"))


def test_build_errors_no_group_reports_each_criterion(tmp_path: Path) -> None:
    scenario = Scenario()
    five_users(scenario, ratings=(3.0, 3.0, 3.0, 3.0, 3.0))
    source = scenario.write(tmp_path / "raw")
    with pytest.raises(BuildError) as err:
        build(config(source, tmp_path / "bench"))
    message = str(err.value)
    for counted in (
        "reviews=110",
        "active_reviews=5",
        "items_with_enough_in_one_window=1",
        "items_with_group=0",
    ):
        assert counted in message
    assert "relax --min-history, --window-days or --min-gap" in message


def test_build_errors_too_small_memory_limit_is_one_line_naming_the_flag(tmp_path: Path) -> None:
    source, _ = write_with(tmp_path, [])
    with pytest.raises(BuildError) as err:
        build(config(source, tmp_path / "bench", memory_limit="1MB"))
    message = str(err.value)
    assert message.startswith("DuckDB ran out of memory in Books: read reviews with --memory-limit 1MB (")
    assert "raise --memory-limit" in message and len(message.splitlines()) == 1
    assert not (tmp_path / "bench").exists()


@pytest.mark.parametrize(
    ("field", "value", "match"),
    [
        ("memory_limit", "lots", "--memory-limit 'lots' is not a size"),
        ("group_size", 1, "--group-size must be at least 2"),
        ("test_groups", 0, "--test-groups must be at least 1"),
        ("min_gap", -0.1, "--min-gap must be >= 0"),
        ("avg_scope", "mean", "--avg-scope must be history or all"),
        ("split_rule", "random", "--split-rule must be leak-free, user-disjoint or none"),
        ("push_to_hub", "noslash", "--push-to-hub wants ORG/NAME"),
        ("push_to_hub", "org/-x", "--push-to-hub wants ORG/NAME"),
        ("seed", -1, "--seed must be an integer >= 0, got -1"),
        ("threads", 10**20, "--threads must be in 1..4096"),
        ("window_days", 1e300, "--window-days must be a number of days in 0..36,500"),
        ("memory_limit", "99999999999999999999GB", "is larger than any machine's memory"),
        ("work_dir", ".", "--work-dir . is the current folder or one above it"),
    ],
)
def test_build_errors_invalid_parameters(tmp_path: Path, field: str, value: object, match: str) -> None:
    with pytest.raises(BuildError, match=match):
        BuildConfig(source=str(tmp_path), out=tmp_path / "o", **{field: value})


@pytest.mark.parametrize(
    ("settings", "match"),
    [
        ({"seed": -1}, "--seed must be an integer >= 0, got -1"),
        ({"reviews_per_domain": 99_999_999_999}, "--reviews-per-domain 99,999,999,999 needs about .* GiB"),
    ],
)
def test_build_errors_synth_refuses_a_negative_seed_and_a_size_beyond_memory(tmp_path, settings, match):
    from dataset_builder.config import SynthConfig

    with pytest.raises(BuildError, match=match):
        SynthConfig(out=tmp_path / "raw", **settings)
    assert not (tmp_path / "raw").exists()
