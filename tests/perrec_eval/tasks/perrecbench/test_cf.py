"""The collaborative-filtering baselines: past-only fitting, cold start, agreement with cornac, the CLI."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from dataset_builder.build import build
from dataset_builder.synth import write_synthetic
from perrec_eval.cli import main
from perrec_eval.tasks.perrecbench import cf
from perrec_eval.tasks.perrecbench.records import Group
from tests.dataset_builder.build_fixture import config

T = 1_000_000  # the group's window start


def _group(users: dict[str, list[tuple[str, float]]], query: str = "q", window_start: int = T) -> Group:
    """A group whose users have these (item, rating) histories (all before the window)."""
    rows = []
    for i, (user, history) in enumerate(users.items()):
        avg = float(np.mean([r for _, r in history]))
        rows.append(
            {
                "user_id": user,
                "rating": 3.0,
                "timestamp": window_start + i,
                "avg_rating": avg,
                "most_common_rating": 3.0,
                "relative_rating": float(i),
                "history": [
                    {"parent_asin": item, "title": item, "rating": r, "timestamp": window_start - 100 + k}
                    for k, (item, r) in enumerate(history)
                ],
            }
        )
    row = {
        "group_id": f"D:{query}",
        "domain": "D",
        "level": "full",
        "window_start": window_start,
        "query": {"parent_asin": query, "title": query},
        "users": rows,
    }
    return Group.from_row(row)


def _ratings(rows: list[tuple[str, str, float, int]]) -> cf.Ratings:
    """Ratings from (user, item, rating, timestamp) rows in any order."""
    users, items, values, times = (np.asarray(column) for column in zip(*rows, strict=True))
    order = np.argsort(times, kind="stable")
    names, item_codes = np.unique(items, return_inverse=True)
    user_codes = np.unique(users, return_inverse=True)[1]
    return cf.Ratings.make(
        user_codes[order],
        item_codes[order],
        values.astype(np.float64)[order],
        times.astype(np.int64)[order],
        {str(name): i for i, name in enumerate(names)},
    )


def _background(
    rng: np.random.Generator, n_users: int = 40, before: int = T
) -> list[tuple[str, str, float, int]]:
    """Ratings before ``before``: items a0..a9 and the query item q, rated by users b0.. at random."""
    rows = []
    for u in range(n_users):
        for item in [*(f"a{i}" for i in range(10)), "q"]:
            if rng.random() < 0.6:
                rows.append((f"b{u}", item, float(rng.integers(1, 6)), int(rng.integers(0, before))))
    return rows


def _future_raters_before(n_users: int = 200) -> list[tuple[str, str, float, int]]:
    """The future raters' neutral ratings before the window: the models know them (users, not items)."""
    return [(f"f{u}", "a2", 3.0, T - 1 - u) for u in range(n_users)]


def _future(n_users: int = 200) -> list[tuple[str, str, float, int]]:
    """A decisive signal dated at or after the window: whoever loves a0 loves q, whoever loves a1 hates it."""
    rows = []
    for u in range(n_users):
        likes = "a0" if u % 2 else "a1"
        rows += [
            (f"f{u}", likes, 5.0, T + u),
            (f"f{u}", "a1" if likes == "a0" else "a0", 1.0, T + u),
            (f"f{u}", "q", 5.0 if likes == "a0" else 1.0, T + u),
        ]
    return rows


GROUP_USERS = {
    "lover": [("a0", 5.0), ("a1", 1.0), ("a2", 3.0)],
    "hater": [("a0", 1.0), ("a1", 5.0), ("a2", 3.0)],
}


@pytest.mark.parametrize(
    ("name", "params"), [("mf", cf.MFParams(iterations=5)), ("item-knn", cf.KNNParams())]
)
def test_cf_fit_for_a_group_never_sees_ratings_at_or_after_its_window(name, params):
    past = _background(np.random.default_rng(0)) + _future_raters_before()
    group = _group(GROUP_USERS)
    without, _ = cf.predict_groups(name, {"D": _ratings(past)}, [group], params)
    with_future, _ = cf.predict_groups(name, {"D": _ratings(past + _future())}, [group], params)
    assert with_future[0].ratings == without[0].ratings
    # The planted signal is decisive once it is in the past: a later window sees it and ranks lover first.
    later = _group(GROUP_USERS, window_start=T + 10_000)
    seen, _ = cf.predict_groups(name, {"D": _ratings(past + _future())}, [later], params)
    lover, hater = cf.relative(later, seen[0].ratings)
    assert lover - hater > 1.0
    unseen_lover, unseen_hater = cf.relative(group, without[0].ratings)
    assert abs(unseen_lover - unseen_hater) < lover - hater


def test_cf_mf_models_are_cut_at_or_before_every_window_they_serve():
    starts = [50, 10, 30, 20, 40, 60, 70]
    plan = cf.cut_plan(starts, 3)
    assert all(plan[s] <= s for s in starts)
    assert len(set(plan.values())) == 3


@pytest.mark.parametrize(
    ("name", "params"), [("mf", cf.MFParams(iterations=5)), ("item-knn", cf.KNNParams())]
)
def test_cf_cold_query_item_falls_back_to_the_user_average_and_is_counted(name, params):
    past = [row for row in _background(np.random.default_rng(1)) if row[1] != "q"] + _future_raters_before()
    group = _group(GROUP_USERS)
    outcomes, _ = cf.predict_groups(name, {"D": _ratings(past + _future())}, [group], params)
    assert outcomes[0].cold and outcomes[0].fallback == 2
    assert cf.relative(group, outcomes[0].ratings) == [0.0, 0.0]
    by_level, info = cf.run(name, {"D": _ratings(past + _future())}, {"easy": [group]}, [])
    assert info["cells"]["easy/pointwise"] == {
        "groups": 1,
        "users": 2,
        "cold_query_items": 1,
        "fallback_users": 2,
    }
    assert info["tuning"]["note"].startswith("no train split")


def test_cf_item_knn_user_without_a_similar_item_falls_back_and_is_counted():
    past = _background(np.random.default_rng(2))
    group = _group({**GROUP_USERS, "stranger": [("z1", 4.0), ("z2", 2.0)]})
    (outcome,), _ = cf.predict_groups("item-knn", {"D": _ratings(past)}, [group], cf.KNNParams())
    assert not outcome.cold and outcome.fallback == 1
    assert outcome.ratings[2] == 3.0  # the stranger's average


def test_cf_tuning_reads_train_groups_only():
    past = _background(np.random.default_rng(3))
    test = _group(GROUP_USERS, query="q")
    _, info = cf.run("item-knn", {"D": _ratings(past)}, {"easy": [test]}, [_group(GROUP_USERS)])
    assert info["tuning"]["split"] == "train" and info["tuning"]["groups"] == 1
    assert [g["params"] for g in info["tuning"]["grid"]] == [
        {"neighbours": p.neighbours} for p in cf.GRIDS["item-knn"]
    ]
    assert info["params"] in [g["params"] for g in info["tuning"]["grid"]]


# ------------------------------------------------------------------------------------ against cornac


def _dense_data(seed: int, n_users: int, n_items: int, density: float, rank: int = 3):
    rng = np.random.default_rng(seed)
    p, q = rng.normal(0, 0.7, (n_users, rank)), rng.normal(0, 0.7, (n_items, rank))
    bu, bi = rng.normal(0, 0.5, n_users), rng.normal(0, 0.5, n_items)
    truth = np.clip(3.5 + bu[:, None] + bi[None, :] + p @ q.T, 1, 5)
    observed = rng.random((n_users, n_items)) < density
    noisy = np.clip(truth + rng.normal(0, 0.3, truth.shape), 1, 5)
    triples = [(f"u{u}", f"i{i}", float(noisy[u, i])) for u, i in zip(*np.nonzero(observed), strict=True)]
    return triples, observed, truth


def test_cf_item_knn_agrees_with_cornac_item_knn():
    cornac = pytest.importorskip("cornac", reason="cornac (pip install perrecbench[cf]) is the reference")
    triples, observed, _ = _dense_data(0, 40, 25, 0.5)
    train = cornac.data.Dataset.from_uir(triples, seed=0)
    reference = cornac.models.ItemKNN(k=5, similarity="cosine", mean_centered=True, verbose=False, seed=0)
    reference.fit(train)
    ratings = _ratings([(u, i, r, 0) for u, i, r in triples])
    checked = 0
    for u, i in zip(*np.nonzero(~observed), strict=True):
        user, item = f"u{u}", f"i{i}"
        history = [(it, r) for uu, it, r in triples if uu == user]
        codes, sims = cf.knn_similarities(ratings, ratings.item_codes[item], len(ratings.values))
        items = np.array([ratings.item_codes[it] for it, _ in history])
        values = np.array([r for _, r in history])
        ours = cf.knn_predict(codes, sims, items, values, float(values.mean()), 5)
        theirs = reference.score(train.uid_map[user], train.iid_map[item])
        assert ours == pytest.approx(float(theirs), abs=1e-6), (user, item)
        checked += 1
    assert checked > 100


def test_cf_mf_agrees_with_cornac_biased_mf():
    cornac = pytest.importorskip("cornac", reason="cornac (pip install perrecbench[cf]) is the reference")
    triples, observed, truth = _dense_data(1, 150, 80, 0.3)
    train = cornac.data.Dataset.from_uir(triples, seed=0)
    reference = cornac.models.MF(
        k=3,
        max_iter=200,
        learning_rate=0.01,
        lambda_reg=0.05,
        use_bias=True,
        early_stop=False,
        verbose=False,
        seed=0,
    )
    reference.fit(train)
    ratings = _ratings([(u, i, r, 0) for u, i, r in triples])
    users = {name: code for code, name in enumerate(sorted({u for u, _, _ in triples}))}
    model = cf.MFModel.fit(ratings, len(ratings.values), cf.MFParams(factors=3, reg=0.05, iterations=20))
    held_out = list(zip(*np.nonzero(~observed), strict=True))
    ours = np.array([model.score(users[f"u{u}"], ratings.item_codes[f"i{i}"]) for u, i in held_out])
    theirs = np.array([reference.score(train.uid_map[f"u{u}"], train.iid_map[f"i{i}"]) for u, i in held_out])
    true = np.array([truth[u, i] for u, i in held_out])
    assert np.corrcoef(ours, theirs)[0, 1] > 0.9
    rmse_ours, rmse_theirs = np.sqrt(np.mean((ours - true) ** 2)), np.sqrt(np.mean((theirs - true) ** 2))
    assert abs(rmse_ours - rmse_theirs) < 0.1
    assert rmse_ours < np.sqrt(np.mean((true - true.mean()) ** 2))  # better than the global mean


# ------------------------------------------------------------------------------------ end to end


@pytest.fixture(scope="module")
def builds(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    raw = tmp_path_factory.mktemp("synth")
    write_synthetic(raw, reviews_per_domain=6000, domains="Books", seed=1)
    parent = tmp_path_factory.mktemp("built")
    plain = build(config(raw, parent / "plain", min_history=10, test_groups=6))
    rich = build(config(raw, parent / "rich", min_history=10, test_groups=6, with_interactions=True))
    return plain, rich


def test_cf_cli_refuses_a_build_without_interactions_in_one_line(builds, tmp_path, capsys):
    plain, _ = builds
    args = ["evaluate", "--data", str(plain), "--engine", "baseline", "--model", "mf", "--out", str(tmp_path)]
    assert main(args) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "--with-interactions" in err


def test_cf_cli_all_skips_them_without_interactions_and_says_why(builds, tmp_path, capsys):
    plain, _ = builds
    args = [
        "evaluate",
        "--data",
        str(plain),
        "--engine",
        "baseline",
        "--model",
        "all",
        "--out",
        str(tmp_path),
    ]
    assert main([*args, "--levels", "easy"]) == 0
    assert "skipping mf, item-knn" in capsys.readouterr().err
    assert not (tmp_path / "mf").exists() and (tmp_path / "random").is_dir()


def test_cf_cli_all_runs_them_and_records_how(builds, tmp_path, capsys):
    _, rich = builds
    args = ["evaluate", "--data", str(rich), "--engine", "baseline", "--model", "all", "--out", str(tmp_path)]
    assert main(args) == 0
    printed = capsys.readouterr().out
    assert "| mf |" in printed and "| item-knn |" in printed
    for name in cf.CF_BASELINES:
        info = json.loads((tmp_path / name / "run.json").read_text())
        assert info["engine"] == {"name": "baseline", "model": name}
        assert info["cf"]["tuning"]["split"] == "train" and info["cf"]["params"]
        assert set(info["cf"]["cells"]) == {"easy/pointwise", "medium/pointwise", "hard/pointwise"}
        cells = json.loads((tmp_path / name / "scores.json").read_text())["cells"]
        assert all(c["num_docs"] == 6 for c in cells)
        easy = info["cf"]["cells"]["easy/pointwise"]
        cold, fallback = easy["cold_query_items"], easy["fallback_users"]
        shown = f"| {name} | easy | pointwise | {cold} of 6 | {fallback} of "
        assert shown in (tmp_path / name / "report.md").read_text()
        assert shown in (tmp_path / "report.md").read_text()  # the run's report of every baseline too
    assert "Cold start" not in (tmp_path / "random" / "report.md").read_text()


def test_cf_report_compares_them_with_an_llm_run_on_the_build_without_interactions(builds, tmp_path, capsys):
    plain, rich = builds
    llm, cf_run = tmp_path / "llm", tmp_path / "mf"
    args = [
        "evaluate",
        "--data",
        str(plain),
        "--engine",
        "fake",
        "--model",
        "constant",
        "--methods",
        "pointwise",
    ]
    assert main([*args, "--out", str(llm)]) == 0
    assert (
        main(["evaluate", "--data", str(rich), "--engine", "baseline", "--model", "mf", "--out", str(cf_run)])
        == 0
    )
    assert main(["report", str(llm), str(cf_run), "--no-plots", "--out", str(tmp_path / "report")]) == 0
    board = json.loads((tmp_path / "report" / "leaderboard.json").read_text())
    assert len(board) == 1  # one comparable set: same groups, same fingerprint
    table = (tmp_path / "report" / "leaderboard.md").read_text()
    assert "| mf |" in table and "### LLM runs against the baselines" in table
    assert "| fake:constant | mf | easy pointwise |" in table
    hard = json.loads((cf_run / "run.json").read_text())["cf"]["cells"]["hard/pointwise"]
    assert "### Cold start (classic recommenders)" in table
    cold = f"| mf | hard | pointwise | {hard['cold_query_items']} of 6 | {hard['fallback_users']} of "
    assert cold in table
    assert "| constant | hard |" not in table.split("### Cold start")[1].split("###")[0]
    assert main(["score", str(cf_run), "--variant", "paper", "--write"]) == 0  # rewrites report.md
    assert cold in (cf_run / "report.md").read_text()
    versus = board[0]["extras"]["analyses"]["versus_baselines"]
    assert {(v["model"], v["baseline"], v["level"], v["method"]) for v in versus} == {
        ("fake:constant", "mf", level, "pointwise") for level in ("easy", "medium", "hard")
    }
    assert all(v["num_compared"] == 6 and 0 < v["p_value"] <= 1 for v in versus)


# ------------------------------------------------------------------------------------ the fit's memory path


def _naive_als(ratings: cf.Ratings, n: int, params: cf.MFParams) -> tuple[np.ndarray, np.ndarray]:
    """ALS written row by row on the first n ratings: the reference for the blocked, prefix-sliced fit."""
    users, items, values = ratings.users[:n], ratings.items[:n], ratings.values[:n]
    n_users, n_items = len(ratings.user_edges) - 1, len(ratings.item_codes)
    mu = values.mean()
    rng = np.random.default_rng(params.seed)
    item_w = np.hstack([np.zeros((n_items, 1)), rng.normal(0.0, 0.1, (n_items, params.factors))])
    user_w = np.zeros((n_users, params.factors + 1))

    def solve(design: np.ndarray, target: np.ndarray) -> np.ndarray:
        gram = design.T @ design + params.reg * len(target) * np.eye(design.shape[1])
        return np.linalg.solve(gram, design.T @ target)

    for _ in range(params.iterations):
        for u in range(n_users):
            mine = users == u
            if mine.any():
                design = np.hstack([np.ones((mine.sum(), 1)), item_w[items[mine], 1:]])
                user_w[u] = solve(design, values[mine] - mu - item_w[items[mine], 0])
        for i in range(n_items):
            mine = items == i
            item_w[i] = 0.0
            if mine.any():
                design = np.hstack([np.ones((mine.sum(), 1)), user_w[users[mine], 1:]])
                item_w[i] = solve(design, values[mine] - mu - user_w[users[mine], 0])
    return user_w, item_w


@pytest.mark.parametrize("block", [7, 65_536])
def test_cf_mf_fit_on_a_prefix_in_small_blocks_equals_row_by_row_als(monkeypatch, block):
    rng = np.random.default_rng(3)
    pairs = {
        (int(u), int(i)) for u, i in zip(rng.integers(0, 30, 400), rng.integers(0, 25, 400), strict=True)
    }
    rows = [
        (f"u{u}", f"i{i}", float(rng.integers(1, 6)), int(rng.integers(0, 1000))) for u, i in sorted(pairs)
    ]
    ratings = _ratings(rows)
    n = ratings.before(600)  # a cut: a prefix of the time-ordered ratings, later ones unseen
    assert 0 < n < len(ratings.values)
    monkeypatch.setattr(cf, "_ENTRY_BLOCK", block)  # 7: many blocks, rows larger than a block alone
    params = cf.MFParams(factors=3, reg=0.1, iterations=3)
    model = cf.MFModel.fit(ratings, n, params)
    user_w, item_w = _naive_als(ratings, n, params)
    np.testing.assert_allclose(model.user_bias, user_w[:, 0], atol=1e-10)
    np.testing.assert_allclose(model.user_factors, user_w[:, 1:], atol=1e-10)
    np.testing.assert_allclose(model.item_bias, item_w[:, 0], atol=1e-10)
    np.testing.assert_allclose(model.item_factors, item_w[:, 1:], atol=1e-10)


def test_cf_read_ratings_keeps_ids_and_time_order(tmp_path):
    import pyarrow as pa
    import pyarrow.parquet as pq

    table = pa.table(
        {
            "user_id": ["u2", "u1", "u2", "u3"],
            "parent_asin": ["b", "a", "a", "c"],
            "rating": [4.0, 5.0, 2.0, 1.0],
            "timestamp": [1, 2, 3, 4],
        }
    )
    path = tmp_path / "Books.parquet"
    pq.write_table(table, path, row_group_size=2)  # two row groups: two dictionaries to unify
    ratings = cf.read_ratings(path)
    names = {code: name for name, code in ratings.item_codes.items()}
    assert [names[i] for i in ratings.items] == ["b", "a", "a", "c"]
    assert ratings.users[0] == ratings.users[2] != ratings.users[1]
    assert ratings.values.tolist() == [4.0, 5.0, 2.0, 1.0] and ratings.before(3) == 2


# ------------------------------------------------------------------------------------ integrity and the Hub


def _tampered(rich: Path, tmp_path: Path) -> Path:
    import shutil

    import pyarrow.parquet as pq

    copy = tmp_path / "bench"
    shutil.copytree(rich, copy)
    info = json.loads((copy / "manifest.json").read_text())["interactions"]["Books"]
    table = pq.read_table(copy / info["path"])
    pq.write_table(table.slice(1), copy / info["path"])  # one rating fewer: still valid parquet
    return copy


def test_cf_interactions_changed_since_the_build_are_refused_naming_the_rebuild(builds, tmp_path, capsys):
    _, rich = builds
    assert len(cf.load_interactions(rich)["Books"].values) > 0  # the untouched build passes its check
    bench = _tampered(rich, tmp_path)
    files = cf.load_interactions(bench)  # listing is cheap; the check runs when a domain is read
    with pytest.raises(cf.DataError, match="sha256.*rebuild with --with-interactions"):
        files["Books"]
    args = ["evaluate", "--data", str(bench), "--engine", "baseline", "--model", "mf"]
    assert main([*args, "--out", str(tmp_path / "runs")]) == 2
    err = capsys.readouterr().err.strip()  # after the datasets library's progress lines: one line
    assert "Traceback" not in err and "sha256" in err.splitlines()[-1]
    assert err.splitlines()[-1].endswith("rebuild with --with-interactions")


def _fake_hub(monkeypatch, folder: Path, calls: list[str]) -> None:
    import huggingface_hub
    from huggingface_hub.errors import EntryNotFoundError

    def download(repo_id: str, filename: str, *, repo_type: str | None = None, **_: object) -> str:
        assert repo_id == "org/bench" and repo_type == "dataset"
        calls.append(filename)
        if not (folder / filename).is_file():
            raise EntryNotFoundError(f"{filename} not found")
        return str(folder / filename)

    monkeypatch.setattr(huggingface_hub, "hf_hub_download", download)


def test_cf_interactions_from_a_hub_dataset_id_are_fetched_lazily_and_checked(builds, tmp_path, monkeypatch):
    plain, rich = builds
    calls: list[str] = []
    _fake_hub(monkeypatch, rich, calls)
    assert cf.has_interactions("org/bench")
    files = cf.load_interactions("org/bench")
    assert calls[-1] == "manifest.json" and list(files) == ["Books"]  # no parquet fetched yet
    hub, local = files["Books"], cf.load_interactions(rich)["Books"]
    assert calls[-1].startswith("interactions/")
    assert hub.values.tolist() == local.values.tolist() and hub.item_codes == local.item_codes
    _fake_hub(monkeypatch, _tampered(rich, tmp_path), calls)
    with pytest.raises(cf.DataError, match="sha256"):
        cf.load_interactions("org/bench")["Books"]
    _fake_hub(monkeypatch, plain, calls)  # a build without interactions uploaded
    assert not cf.has_interactions("org/bench")
    with pytest.raises(cf.DataError, match="--with-interactions"):
        cf.load_interactions("org/bench")


def test_cf_hub_fetch_failure_is_one_line_naming_the_fix(monkeypatch):
    import huggingface_hub

    def offline(*_: object, **__: object) -> str:
        raise OSError("offline mode is enabled\nsecond line")

    monkeypatch.setattr(huggingface_hub, "hf_hub_download", offline)
    with pytest.raises(cf.DataError) as err:
        cf.load_interactions("org/bench")
    assert "\n" not in str(err.value) and "local build folder" in str(err.value)


# ------------------------------------------------------------------------------------ batched = one by one


def _random_histories(rng: np.random.Generator, users: int, items: int) -> tuple[np.ndarray, ...]:
    """Histories of 0..60 items (some -1: unknown to the domain) with ratings 1..5, as flat arrays."""
    lengths = rng.integers(0, 61, users)
    codes = rng.integers(-1, items, int(lengths.sum()))
    values = rng.integers(1, 6, int(lengths.sum())).astype(np.float64)
    return codes, values, lengths


def test_cf_mf_batched_fold_ins_equal_one_at_a_time_bit_for_bit():
    triples, _, _ = _dense_data(2, 60, 40, 0.4)
    ratings = _ratings([(u, i, r, t) for t, (u, i, r) in enumerate(triples)])
    n = len(ratings.values) * 3 // 4  # items rated only later are unknown to the model
    model = cf.MFModel.fit(ratings, n, cf.MFParams(reg=0.1))
    rng = np.random.default_rng(0)
    items = rng.integers(-1, len(ratings.item_codes), 50)
    ns = rng.integers(0, len(ratings.values) + 1, 50)
    vectors, found = model.fold_in_items(ratings, items, ns)
    for row, (item, cut) in enumerate(zip(items.tolist(), ns.tolist(), strict=True)):
        alone = model.fold_in_item(ratings, item, cut)
        assert found[row] == (alone is not None)
        if alone is not None:
            assert vectors[row].tolist() == alone.tolist()  # exactly, not approximately
    codes, values, lengths = _random_histories(rng, 300, len(ratings.item_codes))
    queries = vectors[rng.integers(0, len(vectors), len(lengths))]
    batched = model.predict_many(queries, codes, values, lengths).tolist()
    starts = np.cumsum(lengths) - lengths
    alone = [
        model.predict(queries[u], codes[s : s + k], values[s : s + k])
        for u, (s, k) in enumerate(zip(starts.tolist(), lengths.tolist(), strict=True))
    ]
    assert batched == alone


def test_cf_item_knn_batched_predictions_equal_one_user_at_a_time_bit_for_bit():
    triples, _, _ = _dense_data(3, 60, 40, 0.4)
    ratings = _ratings([(u, i, r, t) for t, (u, i, r) in enumerate(triples)])
    rng = np.random.default_rng(1)
    tables = [cf.knn_similarities(ratings, int(q), len(ratings.values)) for q in rng.integers(0, 40, 6)]
    codes, values, lengths = _random_histories(rng, 200, len(ratings.item_codes))
    owner = rng.integers(0, len(tables), len(lengths))  # each user's table (its group's query item)
    avgs = rng.uniform(1, 5, len(lengths))
    for neighbours in (1, 5, 20):
        sims = cf._table_lookup(tables, np.repeat(owner, lengths), codes)
        predicted, scored = cf._knn_rates(sims, values, lengths, avgs, neighbours)
        starts = np.cumsum(lengths) - lengths
        for u, (s, k) in enumerate(zip(starts.tolist(), lengths.tolist(), strict=True)):
            table_codes, table_sims = tables[owner[u]]
            alone = cf.knn_predict(
                table_codes, table_sims, codes[s : s + k], values[s : s + k], float(avgs[u]), neighbours
            )
            assert (alone is not None) == scored[u]
            if alone is not None:
                assert predicted[u] == alone  # exactly, not approximately
        assert scored.sum() > 100 and (~scored).sum() > 0


def test_cf_histories_read_as_columns_are_those_of_the_records(builds):
    from perrec_eval.tasks.perrecbench import context

    _, rich = builds
    for level, split in (("easy", "test"), ("full", "train")):
        records = list(context.stream_groups(rich, level, split))
        columns = list(context.stream_histories(rich, level, split))
        assert len(records) == len(columns) > 0
        for groups, histories in zip(records, columns, strict=True):
            expected = context.Histories.of_groups(groups)
            assert histories.group_ids == expected.group_ids
            assert histories.users.tolist() == expected.users.tolist()
            assert histories.lengths.tolist() == expected.lengths.tolist()
            assert histories.items.to_pylist() == expected.items.to_pylist()
            assert histories.ratings.tolist() == expected.ratings.tolist()


def test_evaluate_prints_the_table_of_the_runs_it_wrote_without_reading_them_back(
    builds, tmp_path, capsys, monkeypatch
):
    from perrec_eval.leaderboard.family import load_runs
    from perrec_eval.tasks.perrecbench import report
    from perrec_eval.tasks.perrecbench import rundir as run_files
    from perrec_eval.tasks.perrecbench.baselines import BASELINES

    _, rich = builds
    args = ["evaluate", "--data", str(rich), "--engine", "baseline", "--model", "all", "--out", str(tmp_path)]
    read = run_files.read_predictions

    def refuse(folder):  # noqa: ANN001, ANN202
        raise AssertionError(f"{folder}/predictions.jsonl read back")

    monkeypatch.setattr(run_files, "read_predictions", refuse)
    assert main(args) == 0
    printed = capsys.readouterr().out
    monkeypatch.setattr(run_files, "read_predictions", read)
    folders = [tmp_path / name for name in (*BASELINES, *cf.CF_BASELINES)]  # as written
    assert all((folder / "predictions.jsonl").is_file() for folder in folders)
    assert printed.startswith(report.table(load_runs(folders)) + "\n")  # as read back
    assert (tmp_path / "report.md").read_text() == report.render_report(load_runs(folders))
