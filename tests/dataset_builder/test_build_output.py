"""The output folder: loading through datasets, schema, determinism, levels, resume, atomic writes, CLI."""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
import sys
from pathlib import Path

import datasets
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
import yaml

from dataset_builder.build import build
from dataset_builder.config import BuildError
from dataset_builder.perrecbench import assembly, schema, selection
from dataset_builder.perrecbench import builder as perrecbench_builder
from dataset_builder.perrecbench import stats as stats_mod
from dataset_builder.perrecbench.groups import most_common_rating
from dataset_builder.perrecbench.levels import level_rows, level_tables
from dataset_builder.perrecbench.schema import FEATURES
from dataset_builder.perrecbench.selection import run_domain
from dataset_builder.synth import write_synthetic
from perrec_eval.cli import main as cli_main
from tests.dataset_builder.build_fixture import config, five_user_source


@pytest.fixture(scope="module")
def raw(tmp_path_factory: pytest.TempPathFactory) -> Path:
    folder = tmp_path_factory.mktemp("synth")
    write_synthetic(folder, reviews_per_domain=6000, domains="Books", seed=1)
    return folder


@pytest.fixture(scope="module")
def built(raw: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    parent = tmp_path_factory.mktemp("built")
    return build(config(raw, parent / "perrecbench", min_history=10, test_groups=5))


def card_header(folder: Path) -> dict:
    return yaml.safe_load((folder / "README.md").read_text().split("---")[1])


def test_build_output_loads_by_folder_with_exact_features(built: Path, tmp_path: Path) -> None:
    test = datasets.load_dataset(str(built), "easy", split="test", cache_dir=str(tmp_path / "cache"))
    assert test.num_rows == 5
    assert test.features == FEATURES
    assert all(len(row["users"]) == 2 and row["level"] == "easy" for row in test)


def test_build_output_loads_by_name_from_parent(built: Path, tmp_path: Path, monkeypatch) -> None:
    monkeypatch.chdir(built.parent)
    data = datasets.load_dataset("perrecbench", "hard", cache_dir=str(tmp_path / "cache"))
    assert set(data) == {"test", "train"}
    dropped = json.loads((built / "stats.json").read_text())["split"]["train_groups_dropped"]
    assert data["train"].num_rows == 10 - 5 - dropped > 0
    assert all(len(row["users"]) == 4 for row in data["train"])


def test_build_output_levels_share_items_and_users(built: Path, tmp_path: Path) -> None:
    cache = str(tmp_path / "cache")
    rows = {
        name: datasets.load_dataset(str(built), name, split="train", cache_dir=cache).to_list()
        for name in ("easy", "medium", "hard", "full")
    }
    for easy, medium, hard, full in zip(*(rows[n] for n in ("easy", "medium", "hard", "full")), strict=True):
        assert easy["group_id"] == medium["group_id"] == hard["group_id"] == full["group_id"]
        assert easy["users"] == full["users"][:2] and hard["users"] == full["users"][:4]
        assert medium["users"] == full["users"][:3]
        assert len(full["users"]) == 5


def test_build_output_card_configs_point_at_hashed_files(built: Path) -> None:
    configs = {c["config_name"]: c["data_files"] for c in card_header(built)["configs"]}
    assert set(configs) == {"easy", "medium", "hard", "full"}
    for files in configs.values():
        assert [f["split"] for f in files] == ["test", "train"]
        for entry in files:
            assert (built / entry["path"]).is_file()
            assert entry["path"].split("/")[1].startswith(entry["split"] + "-")


def test_card_fills_every_template_variable_and_nothing_else(raw: Path, tmp_path: Path, monkeypatch) -> None:
    # jinja renders an unknown name as "": the values given must be exactly the template's names.
    import jinja2
    import jinja2.meta
    from huggingface_hub import DatasetCard

    given: dict = {}
    real = DatasetCard.from_template.__func__

    def spy(cls, card_data, template_path=None, template_str=None, **values):
        given.update(names=set(values) | set(card_data.to_dict()) | {"card_data"}, template=template_str)
        return real(cls, card_data, template_path, template_str, **values)

    monkeypatch.setattr(DatasetCard, "from_template", classmethod(spy))
    out = build(config(raw, tmp_path / "bench", min_history=10, test_groups=5))
    wanted = jinja2.meta.find_undeclared_variables(jinja2.Environment().parse(given["template"]))
    assert wanted <= given["names"] and given["names"] - wanted <= {"language", "license", "license_name",
        "task_categories", "tags", "size_categories", "configs"}  # fmt: skip
    assert (out / "README.md").read_text().startswith("---\npretty_name: PerRecBench")


def test_build_output_stats_and_manifest(built: Path, raw: Path) -> None:
    stats = json.loads((built / "stats.json").read_text())
    assert stats["splits"]["test"]["all"]["query_items"] == 5
    train = 10 - 5 - stats["split"]["train_groups_dropped"]
    assert stats["splits"]["train"]["all"]["reviews"] == train * 5
    assert sum(stats["splits"]["test"]["distributions"]["rating"].values()) == 25
    assert stats["split"]["leaks"]["test_reviews_in_train_histories"] == 0
    assert stats["splits"]["test"]["choice"]["chosen_users"]["users"] == 25
    manifest = json.loads((built / "manifest.json").read_text())
    assert manifest["parameters"]["min_history"] == 10
    assert len(manifest["split"]["dropped_train_groups"]) == stats["split"]["train_groups_dropped"]
    assert {f["kind"] for f in manifest["inputs"]} == {"reviews", "meta"}
    for entry in manifest["inputs"]:
        assert entry["hash"] == "sha256:" + hashlib.sha256((raw / entry["file"]).read_bytes()).hexdigest()
    assert manifest["bad_lines"]["count"] == 0
    assert manifest["versions"]["duckdb"]


def test_build_output_published_files_hold_no_local_paths(built: Path, raw: Path) -> None:
    for name in ("manifest.json", "stats.json", "README.md"):
        text = (built / name).read_text()
        assert str(raw) not in text and str(built) not in text, name
    manifest = json.loads((built / "manifest.json").read_text())
    assert all("/" not in f["file"] for f in manifest["inputs"])


def test_build_output_same_inputs_and_seed_give_identical_files(raw: Path, tmp_path: Path) -> None:
    first = build(config(raw, tmp_path / "a" / "bench", min_history=10, test_groups=5))
    second = build(config(raw, tmp_path / "b" / "bench", min_history=10, test_groups=5))
    files = sorted(p.relative_to(first) for p in first.rglob("*") if p.is_file())
    assert files == sorted(p.relative_to(second) for p in second.rglob("*") if p.is_file())
    for name in files:
        assert (first / name).read_bytes() == (second / name).read_bytes(), name


def test_build_output_other_seed_changes_split_or_order(raw: Path, tmp_path: Path) -> None:
    first = build(config(raw, tmp_path / "a" / "bench", min_history=10, test_groups=5, seed=0))
    second = build(config(raw, tmp_path / "b" / "bench", min_history=10, test_groups=5, seed=1))
    assert card_header(first)["configs"] != card_header(second)["configs"]


def _fail(*args, **kwargs):
    raise AssertionError("the domain was selected again")


def test_build_output_second_run_resumes_from_stage_files(raw: Path, tmp_path: Path, monkeypatch) -> None:
    build(config(raw, tmp_path / "bench", min_history=10, test_groups=5))
    monkeypatch.setattr(perrecbench_builder, "run_domain", _fail)
    build(config(raw, tmp_path / "bench", min_history=10, test_groups=6, split_rule="none", overwrite=True))
    for changed in ({"min_history": 11}, {"seed": 3}):  # selection settings; the seed draws each group
        with pytest.raises(AssertionError, match="selected again"):
            build(
                config(
                    raw, tmp_path / "bench", test_groups=5, overwrite=True, **{"min_history": 10, **changed}
                )
            )


def test_build_output_file_rewritten_with_same_size_and_mtime_is_selected_again(
    tmp_path: Path, monkeypatch
) -> None:
    source = five_user_source(tmp_path / "raw")
    reviews = source / "Books.jsonl"
    first = build(config(source, tmp_path / "bench"))
    before = reviews.stat()
    text = reviews.read_text()
    assert text.startswith('{"rating": 3.0')  # U0's oldest history review
    reviews.write_text(text.replace('"rating": 3.0', '"rating": 4.0', 1))  # same size, other bytes
    os.utime(reviews, ns=(before.st_atime_ns, before.st_mtime_ns))
    assert (reviews.stat().st_size, reviews.stat().st_mtime_ns) == (before.st_size, before.st_mtime_ns)
    calls = []
    counted = lambda *a, **k: calls.append(1) or run_domain(*a, **k)  # noqa: E731
    monkeypatch.setattr(perrecbench_builder, "run_domain", counted)
    second = build(config(source, first, overwrite=True))
    assert calls == [1]
    [entry] = [
        e for e in json.loads((second / "manifest.json").read_text())["inputs"] if e["kind"] == "reviews"
    ]
    assert entry["hash"] == "sha256:" + hashlib.sha256(reviews.read_bytes()).hexdigest()
    [group] = pq.read_table(
        second / json.loads((second / "manifest.json").read_text())["outputs"]["full"]["test"]
    ).to_pylist()
    assert next(u for u in group["users"] if u["user_id"] == "U0")["avg_rating"] == pytest.approx(64 / 21)


def test_build_output_refuses_existing_folder_without_overwrite(tmp_path: Path) -> None:
    source = five_user_source(tmp_path / "raw")
    out = build(config(source, tmp_path / "bench"))
    with pytest.raises(BuildError, match="--overwrite"):
        build(config(source, out))
    build(config(source, out, overwrite=True))
    assert sorted(p.name for p in tmp_path.iterdir()) == ["bench", "bench.stages", "raw"]


def test_build_output_failure_leaves_nothing_half_written(tmp_path: Path, monkeypatch) -> None:
    source = five_user_source(tmp_path / "raw")

    def broken(*args, **kwargs):
        raise RuntimeError("disk full")

    monkeypatch.setattr(perrecbench_builder, "build_card", broken)
    with pytest.raises(RuntimeError, match="disk full"):
        build(config(source, tmp_path / "bench"))
    assert sorted(p.name for p in tmp_path.iterdir()) == ["bench.stages", "raw"]
    assert not list((tmp_path / "bench.stages" / "Books").glob("work-*"))


def test_build_output_stage_failure_keeps_no_stage(tmp_path: Path, monkeypatch) -> None:
    source = five_user_source(tmp_path / "raw")

    def broken(*args, **kwargs):
        raise RuntimeError("killed")

    monkeypatch.setattr(selection, "_search", broken)
    with pytest.raises(RuntimeError, match="killed"):
        build(config(source, tmp_path / "bench"))
    assert not (tmp_path / "bench").exists()
    assert list((tmp_path / "bench.stages").rglob("*")) == [tmp_path / "bench.stages" / "Books"]


def test_build_output_too_few_groups_leaves_train_out(tmp_path: Path) -> None:
    source = five_user_source(tmp_path / "raw")
    out = build(config(source, tmp_path / "bench", test_groups=200))
    configs = card_header(out)["configs"]
    assert all([f["split"] for f in c["data_files"]] == ["test"] for c in configs)
    data = datasets.load_dataset(str(out), "medium", cache_dir=str(tmp_path / "cache"))
    assert list(data) == ["test"] and data["test"].num_rows == 1


def test_build_output_cli_prints_statistics(tmp_path: Path, capsys) -> None:
    source = five_user_source(tmp_path / "raw")
    code = cli_main(
        [
            "build",
            "--source",
            str(source),
            "--out",
            str(tmp_path / "bench"),
            "--domains",
            "Books",
            "--test-groups",
            "1",
            "--threads",
            "1",
            "--no-progress",
        ]
    )
    printed = capsys.readouterr().out
    assert code == 0
    assert "# Rating History" in printed and "105" in printed  # 5 users x 21 history reviews
    assert "groups: Books" in printed


def test_build_output_cli_reports_errors_with_exit_code(tmp_path: Path, capsys) -> None:
    code = cli_main(["build", "--source", str(tmp_path / "nope"), "--out", str(tmp_path / "bench")])
    assert code == 2
    assert "no such folder" in capsys.readouterr().err


def _full_rows(folder: Path) -> dict[str, list[dict]]:
    files = json.loads((folder / "manifest.json").read_text())["outputs"]["full"]
    return {split: pq.read_table(folder / path).to_pylist() for split, path in files.items()}


def test_build_output_levels_follow_the_reference_rule(built: Path) -> None:
    # The Arrow path (level_tables) against the one-row rule (level_rows) on every group and config.
    manifest = json.loads((built / "manifest.json").read_text())
    for split, rows in _full_rows(built).items():
        by_rating = [{**row, "users": sorted(row["users"], key=_rank)} for row in rows]
        expected = [level_rows(row, 0) for row in by_rating]
        for name, files in manifest["outputs"].items():
            got = pq.read_table(built / files[split]).to_pylist()
            assert got == [levels[name] for levels in expected]
    table = pa.table(
        {"group_id": ["g"], "level": ["full"], "users": [[{"user_id": str(i)} for i in range(3)]]}
    )
    assert set(level_tables(table, 0)) == {"easy", "medium", "full"}  # hard needs 4 users


def _rank(user: dict) -> tuple:
    return (user["relative_rating"], user["timestamp"], user["user_id"])


def test_build_output_histories_are_ordered_and_modes_match(built: Path) -> None:
    for rows in _full_rows(built).values():
        for row in rows:
            assert row["window_start"] == min(u["timestamp"] for u in row["users"])
            for user in row["users"]:
                history = user["history"]
                assert history and all(h["timestamp"] < user["timestamp"] for h in history)
                keys = [(h["timestamp"], h["parent_asin"]) for h in history]
                assert keys == sorted(keys) and len(set(keys)) == len(keys)
                assert user["most_common_rating"] == most_common_rating([h["rating"] for h in history])
                ratings = [h["rating"] for h in history]
                assert user["avg_rating"] == pytest.approx(sum(ratings) / len(ratings), abs=1e-12)


def test_build_output_stats_equal_the_python_reference(built: Path) -> None:
    stats = json.loads((built / "stats.json").read_text())
    for split, rows in _full_rows(built).items():
        assert stats["splits"][split]["all"] == stats_mod.table4(rows)
        assert stats["splits"][split]["domains"]["Books"] == stats_mod.table4(rows)
        assert stats["splits"][split]["distributions"] == stats_mod.distributions(rows)


def _ten_rows() -> pa.Table:
    rows = [
        {
            "group_id": f"g{i}",
            "domain": "Books",
            "level": "full",
            "query": None,
            "window_start": i,
            "users": [],
        }
        for i in range(10)
    ]
    return pa.Table.from_pylist(rows, schema=FEATURES.arrow_schema)


def test_build_output_row_groups_do_not_depend_on_batching(tmp_path: Path) -> None:
    table = _ten_rows()
    contents = []
    for name, chunks in (("one", [10]), ("many", [1, 2, 3, 4]), ("other", [7, 0, 3])):
        writer = assembly.RowGroupWriter(tmp_path / f"{name}.parquet", rows_per_group=4)
        start = 0
        for size in chunks:
            writer.write(table.slice(start, size))
            start += size
        writer.close()
        assert writer.rows == 10
        assert pq.ParquetFile(writer.path).metadata.num_row_groups == 3
        contents.append(writer.path.read_bytes())
    assert contents[0] == contents[1] == contents[2]
    empty = assembly.RowGroupWriter(tmp_path / "empty.parquet")
    empty.close()
    assert not empty.path.exists()


def test_build_output_row_group_writer_error_leaves_no_file(tmp_path: Path) -> None:
    with pytest.raises(RuntimeError, match="killed"):
        with assembly.RowGroupWriter(tmp_path / "part.parquet", rows_per_group=4) as writer:
            writer.write(_ten_rows())  # two row groups are already in the temp file
            raise RuntimeError("killed")
    assert list(tmp_path.iterdir()) == []


def test_build_output_small_batches_give_the_same_content(
    raw: Path, built: Path, tmp_path: Path, monkeypatch
) -> None:
    # Tiny Arrow batches: groups are cut across batches and streams are consumed a few rows at a time.
    monkeypatch.setattr(selection, "_BATCH_ROWS", 7)
    monkeypatch.setattr(assembly, "_BATCH_ROWS", 7)
    monkeypatch.setattr(assembly, "_WRITE_BATCH", 3)
    other = build(config(raw, tmp_path / "perrecbench", min_history=10, test_groups=5))
    assert _full_rows(other) == _full_rows(built)
    manifest = json.loads((built / "manifest.json").read_text())
    assert json.loads((other / "manifest.json").read_text())["outputs"] == manifest["outputs"]
    assert (other / "stats.json").read_bytes() == (built / "stats.json").read_bytes()


def test_build_output_arrow_schema_is_what_datasets_makes_of_the_features() -> None:
    assert schema.ARROW_SCHEMA.equals(FEATURES.arrow_schema, check_metadata=True)


def test_build_output_builder_does_not_import_datasets() -> None:
    # datasets costs ≈ 0.4 s of start-up; the builder writes the schema's metadata itself.
    code = "import sys, dataset_builder.build, dataset_builder.cli; print('datasets' in sys.modules)"
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert done.stdout.strip() == "False"


def test_build_output_stage_file_reads_back_in_any_batch_size(tmp_path: Path) -> None:
    table = _ten_rows()
    path = tmp_path / "stage.arrow"
    with pa.OSFile(str(path), "wb") as handle, pa.ipc.new_file(handle, schema.ARROW_SCHEMA) as writer:
        writer.write_table(table.slice(0, 3).cast(schema.ARROW_SCHEMA))
        writer.write_table(table.slice(3).cast(schema.ARROW_SCHEMA))
    for rows in (1, 4, 10, 64):
        parts = list(assembly.read_stage(path, rows))
        assert max(part.num_rows for part in parts) <= rows
        assert pa.concat_tables(parts).equals(table)
