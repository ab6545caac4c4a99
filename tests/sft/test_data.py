"""`perrecbench sft data`: the runner's requests for train groups with true answers, never a test label."""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path

import datasets
import pytest

from perrec_eval.engines.fake import FakeEngine, constant
from perrec_eval.errors import ConfigError, DataError
from perrec_eval.tasks.perrecbench import context, protocols
from perrec_eval.tasks.perrecbench.config import EvalConfig
from perrec_eval.tasks.perrecbench.run import evaluate
from sft.examples import INFO_FILE
from sft.perrecbench.config import DataConfig
from sft.perrecbench.data import build, build_examples, load_train_contexts
from tests.benchmark_fixture import write_tiny_benchmark
from tests.sft.conftest import write_sft_benchmark


def data_config(bench: Path, out: Path, fmt: str, **kwargs) -> DataConfig:
    return DataConfig(data=str(bench), format=fmt, out=str(out), **{"no_profile": True, **kwargs})


@pytest.fixture(scope="module")
def examples(sft_bench):
    """The examples of each format (and mixed) built from the tiny benchmark."""
    contexts, _ = load_train_contexts(data_config(sft_bench, Path("unused"), "mixed"))
    built = {m: build_examples((m,), contexts, "no_profile") for m in ("pointwise", "pairwise", "listwise")}
    built["mixed"] = build_examples(("pointwise", "pairwise", "listwise"), contexts, "no_profile", seed=0)
    return built


def train_users(bench: Path) -> dict[str, dict]:
    """Every train user of the full level by user id (the truth for each example)."""
    return {u.user_id: u for g in context.load_groups(str(bench), "full", "train") for u in g.users}


def test_sft_data_answers_parse_back_to_the_truth(examples, sft_bench):
    users = train_users(sft_bench)
    for example in examples["mixed"]:
        text = example.completion[0]["content"]
        parsed = protocols.parse(example.format, text, n_users=len(example.user_ids))
        assert parsed.ok and parsed.value == example.answer
        shown = [users[user_id] for user_id in example.user_ids]
        if example.format == "pointwise":
            assert example.answer == shown[0].rating
        elif example.format == "pairwise":
            assert example.answer == ("A" if shown[0].relative_rating > shown[1].relative_rating else "B")
        else:
            best_first = sorted(range(len(shown)), key=lambda i: -shown[i].relative_rating)
            assert example.answer == [i + 1 for i in best_first]


def test_sft_data_formats_have_one_example_per_user_pair_and_group(examples, sft_bench):
    levels = {lv: context.load_groups(str(sft_bench), lv, "train") for lv in ("easy", "medium", "hard")}
    users = {(g.group_id, u.user_id) for gs in levels.values() for g in gs for u in g.users}
    pairs = {
        (g.group_id, a.user_id, b.user_id)
        for gs in levels.values()
        for g in gs
        for a in g.users
        for b in g.users
    } - {(g, a, a) for g, a in users}
    assert Counter(e.format for e in examples["pointwise"]) == {"pointwise": len(users)}
    assert {(e.group_id, *e.user_ids) for e in examples["pointwise"]} == users
    assert {(e.group_id, *e.user_ids) for e in examples["pairwise"]} == pairs
    assert len(examples["pairwise"]) == len(pairs)  # both orders of each pair, each once
    assert sorted((e.group_id, e.level) for e in examples["listwise"]) == sorted(
        (g.group_id, lv) for lv, gs in levels.items() for g in gs
    )


def test_sft_data_pairwise_answers_are_balanced(examples):
    assert Counter(e.answer for e in examples["pairwise"]) == {
        "A": len(examples["pairwise"]) // 2,
        "B": len(examples["pairwise"]) // 2,
    }


def test_sft_data_mixed_is_the_union_shuffled_with_the_seed(examples, sft_bench):
    union = [e for m in ("pointwise", "pairwise", "listwise") for e in examples[m]]
    assert sorted(map(repr, examples["mixed"])) == sorted(map(repr, union))
    assert examples["mixed"] != union
    contexts, _ = load_train_contexts(data_config(sft_bench, Path("unused"), "mixed"))
    methods = ("pointwise", "pairwise", "listwise")
    assert build_examples(methods, contexts, "no_profile", seed=0) == examples["mixed"]
    assert build_examples(methods, contexts, "no_profile", seed=1) != examples["mixed"]


def test_sft_data_prompts_are_the_runners_requests(examples, sft_bench, tmp_path):
    seen = set()

    def record(request, params, sample):
        seen.add(json.dumps(request.messages, sort_keys=True))
        return constant(request, params, sample)

    config = EvalConfig(
        engine="fake",
        model="constant",
        data=str(sft_bench),
        split="train",
        no_profile=True,
        out=str(tmp_path),
    )
    evaluate(config, engine=FakeEngine(record))
    assert {json.dumps(e.prompt, sort_keys=True) for e in examples["mixed"]} == seen


def test_sft_data_never_holds_a_test_group_or_label(tmp_path):
    bench = write_sft_benchmark(tmp_path / "leaky_bench", leak=True)
    path, info = build(data_config(bench, tmp_path / "out", "mixed"))
    rows = datasets.Dataset.from_parquet(str(path)).to_list()
    test = context.load_groups(str(bench), "full", "test")
    labels = {(u.user_id, g.query.parent_asin) for g in test for u in g.users}
    leaker = test[0].users[0].user_id  # planted in train group h0000, shown in the levels that drew them
    shown = {
        lv: int(
            any(u.user_id == leaker for g in context.load_groups(str(bench), lv, "train") for u in g.users)
        )
        for lv in ("easy", "medium", "hard")
    }
    assert info["test_label_groups_left_out"] == shown and sum(shown.values()) >= 1
    assert leaker not in {user for row in rows for user in row["user_ids"]}
    assert not {row["group_id"] for row in rows} & {g.group_id for g in test}
    for row in rows:
        text = json.dumps(row["prompt"])
        assert not any(asin in text for _, asin in labels) and "the test item" not in text
        assert all((user, asin) not in labels for user in row["user_ids"] for _, asin in labels)


def test_sft_data_refuses_a_train_split_that_only_shows_test_labels(tmp_path):
    # Train groups made of the test users and query items: every train group shows a label.
    bench = write_tiny_benchmark(tmp_path / "runner_fixture_bench", leaky_train=True)
    with pytest.raises(DataError, match="no usable train groups"):
        build(data_config(bench, tmp_path / "out", "pairwise"))


def test_sft_data_writes_a_loadable_folder_named_by_content(sft_bench, tmp_path):
    out = tmp_path / "data"
    first, _ = build(data_config(sft_bench, out, "listwise"))
    assert first.name.startswith("train-") and len(first.stem) == len("train-") + 12
    assert build(data_config(sft_bench, out, "listwise"))[0] == first
    second, info = build(data_config(sft_bench, out, "pointwise"))
    assert second != first and not first.exists()  # a rebuild never reuses a name for other rows
    loaded = datasets.load_dataset(str(out), split="train")
    assert len(loaded) == info["examples"] != 0 and set(loaded[0]["prompt"][0]) == {"role", "content"}
    assert json.loads((out / INFO_FILE).read_text())["format"] == "pointwise"
    card = (out / "README.md").read_text()
    assert f"path: {second.name}" in card and "| pointwise |" in card and "characters" in card


def test_sft_data_card_counts_tokens_with_a_tokenizer(sft_bench, tmp_path, tiny_model_dir):
    _, info = build(data_config(sft_bench, tmp_path / "data", "listwise", tokenizer=str(tiny_model_dir)))
    assert info["length_unit"] == "tokens" and 0 < info["lengths"]["listwise"]["min"] < 2000
    assert "in tokens (tokenizer" in (tmp_path / "data" / "README.md").read_text()


def test_sft_data_shows_the_profiles_it_is_given(sft_bench, tmp_path):
    groups = context.load_groups(str(sft_bench), "full", "train")
    path = tmp_path / "profiles.jsonl"
    path.write_text(
        "".join(
            json.dumps({"group_id": g.group_id, "user_id": u.user_id, "profile": f"PROFILE OF {u.user_id}"})
            + "\n"
            for g in groups
            for u in g.users
        )
    )
    out, info = build(
        data_config(sft_bench, tmp_path / "data", "pointwise", no_profile=False, profiles=str(path))
    )
    row = datasets.Dataset.from_parquet(str(out))[0]
    assert info["variant"] == "default" and f"PROFILE OF {row['user_ids'][0]}" in row["prompt"][1]["content"]
    path.write_text(path.read_text().splitlines(keepends=True)[0])
    with pytest.raises(DataError, match="--splits train"):
        build(data_config(sft_bench, tmp_path / "data", "pointwise", no_profile=False, profiles=str(path)))


def test_sft_data_refuses_profiles_of_two_writers_and_records_the_one(sft_bench, tmp_path):
    groups = context.load_groups(str(sft_bench), "full", "train")
    path = tmp_path / "profiles.jsonl"
    keys = [(g.group_id, u.user_id) for g in groups for u in g.users]

    def write(models):
        path.write_text(
            "".join(
                json.dumps({"group_id": g, "user_id": u, "profile": "Likes tea.", "engine": "hf", "model": m})
                + "\n"
                for (g, u), m in zip(keys, models, strict=True)
            )
        )

    write(["m0"] * len(keys))
    config = data_config(sft_bench, tmp_path / "d1", "pointwise", no_profile=False, profiles=str(path))
    _, info = build(config)
    assert info["profiles_writer"] == {"engine": "hf", "model": "m0"}
    write([f"m{i % 2}" for i in range(len(keys))])
    with pytest.raises(DataError, match="other settings"):
        build(data_config(sft_bench, tmp_path / "d2", "pointwise", no_profile=False, profiles=str(path)))


def test_sft_data_with_a_missing_tokenizer_folder_is_one_config_error(sft_bench, tmp_path):
    with pytest.raises(ConfigError, match="--tokenizer .*nonexist: no such folder"):
        build(data_config(sft_bench, tmp_path / "data", "listwise", tokenizer=str(tmp_path / "nonexist")))


def test_sft_data_needs_profiles_or_no_profile():
    with pytest.raises(ConfigError, match="--no-profile"):
        DataConfig(data="d", format="pairwise", out="o")
    with pytest.raises(ConfigError, match="exclude"):
        DataConfig(data="d", format="pairwise", out="o", profiles="p.jsonl", no_profile=True)


def _snapshot(folder: Path) -> dict[str, bytes]:
    return {str(p.relative_to(folder)): p.read_bytes() for p in folder.rglob("*") if p.is_file()}


def test_sft_data_refuses_a_folder_it_did_not_write(sft_bench, tmp_path):
    out = tmp_path / "my_dataset"
    out.mkdir()
    (out / "train-00000-of-00001.parquet").write_bytes(b"someone's data")
    (out / "README.md").write_text("their card")
    before = _snapshot(out)
    with pytest.raises(ConfigError, match="did not write"):
        build(data_config(sft_bench, out, "pairwise"))
    assert _snapshot(out) == before


def test_sft_data_refuses_an_earlier_folder_holding_a_file_it_did_not_write(sft_bench, tmp_path):
    out = tmp_path / "examples"
    build(data_config(sft_bench, out, "pairwise"))
    (out / "NOTES.txt").write_text("mine")  # a replacement of the whole folder would delete it (issue 29, F1)
    before = _snapshot(out)
    with pytest.raises(DataError, match="NOTES.txt, which `perrecbench sft data` did not write"):
        build(data_config(sft_bench, out, "pairwise"))
    assert _snapshot(out) == before


def test_sft_data_through_a_symlinked_out_keeps_the_link(sft_bench, tmp_path):
    (tmp_path / "examples").mkdir()
    (tmp_path / "link").symlink_to("examples")
    build(data_config(sft_bench, tmp_path / "link", "pairwise"))
    build(data_config(sft_bench, tmp_path / "link", "pairwise"))  # replaces the real folder, not the link
    assert (tmp_path / "link").is_symlink() and (tmp_path / "examples" / INFO_FILE).is_file()


@pytest.mark.parametrize("where", ["same", "parent", "inside"])
def test_sft_data_refuses_an_out_overlapping_the_benchmark(sft_bench, tmp_path, where):
    out = {"same": sft_bench, "parent": sft_bench.parent, "inside": sft_bench / "sft"}[where]
    before = _snapshot(sft_bench)
    with pytest.raises(ConfigError, match="--data"):
        build(data_config(sft_bench, out, "pairwise"))
    assert _snapshot(sft_bench) == before  # the benchmark's card and files are untouched


def test_sft_data_killed_while_writing_leaves_the_earlier_folder(sft_bench, tmp_path, monkeypatch):
    import sft.perrecbench.data

    out = tmp_path / "data"
    build(data_config(sft_bench, out, "listwise"))
    before = _snapshot(out)

    def killed(info):  # the new parquet and sft_data.json are written, the card is not
        raise KeyboardInterrupt

    monkeypatch.setattr(sft.perrecbench.data, "card", killed)
    with pytest.raises(KeyboardInterrupt):
        build(data_config(sft_bench, out, "pointwise"))
    assert _snapshot(out) == before
    assert sorted(p.name for p in tmp_path.iterdir()) == ["data"]
    monkeypatch.undo()
    path, _ = build(data_config(sft_bench, out, "pointwise"))
    assert json.loads((out / INFO_FILE).read_text())["format"] == "pointwise"
    assert list(out.glob("train-*.parquet")) == [path]
