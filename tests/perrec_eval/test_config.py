"""Settings shared by several commands (`DataSpec`, `PromptSpec`) are checked once, the same everywhere."""

from __future__ import annotations

import pytest

from perrec_eval.errors import ConfigError
from perrec_eval.tasks.perrecbench.config import EvalConfig, ProfilesConfig
from sft.perrecbench.config import DataConfig

DATA_COMMANDS = {
    "evaluate": lambda **kw: EvalConfig(data="d", out="o", engine="fake", model="m", **kw),
    "profiles": lambda **kw: ProfilesConfig(data="d", out="o.jsonl", engine="fake", model="m", **kw),
    "sft data": lambda **kw: DataConfig(data="d", out="o", format="pairwise", **{"no_profile": True, **kw}),
}


@pytest.mark.parametrize("command", DATA_COMMANDS)
@pytest.mark.parametrize(
    ("settings", "message"),
    [
        ({"levels": ("extreme",)}, "--levels must be a non-empty subset of easy,medium,hard"),
        ({"levels": ()}, "--levels must be a non-empty subset"),
        ({"levels": ("easy", "easy")}, "--levels lists easy more than once"),
        ({"max_groups": 0}, "--max-groups must be >= 1, got 0"),
        ({"seed": -1}, "--seed must be an integer >= 0, got -1"),
    ],
)
def test_data_spec_refuses_bad_levels_and_group_counts_in_every_command(command, settings, message):
    with pytest.raises(ConfigError, match=message):
        DATA_COMMANDS[command](**settings)


@pytest.mark.parametrize("command", ["evaluate", "sft data"])
def test_prompt_spec_refuses_k_below_one_and_profiles_with_no_profile(command):
    with pytest.raises(ConfigError, match="--k must be >= 1, got 0"):
        DATA_COMMANDS[command](k=0)
    with pytest.raises(ConfigError, match="--profiles and --no-profile exclude each other"):
        DATA_COMMANDS[command](profiles="p.jsonl", no_profile=True)


def test_data_spec_full_level_is_sft_data_only():
    assert DATA_COMMANDS["sft data"](levels=("full",)).levels == ("full",)
    with pytest.raises(ConfigError, match="subset of easy,medium,hard, got"):
        DATA_COMMANDS["evaluate"](levels=("full",))


def test_data_spec_fields_keep_their_place_in_run_json():
    config = DATA_COMMANDS["evaluate"](levels=("easy",), max_groups=3, seed=7, k=2)
    from perrec_eval.tasks.perrecbench.run import run_record

    record = run_record(config)
    assert {key: record[key] for key in ("data", "levels", "max_groups", "seed", "k")} == {
        "data": "d", "levels": ["easy"], "max_groups": 3, "seed": 7, "k": 2
    }  # fmt: skip
    assert "progress" not in record


def test_eval_config_refuses_more_samples_than_memory_holds():
    with pytest.raises(ConfigError, match="--samples must be at most 1000"):
        DATA_COMMANDS["evaluate"](samples=10**20)


@pytest.mark.parametrize("repo", ["-1", "/", "org/a b", "org/" + "x" * 300])
def test_profiles_config_refuses_a_push_to_hub_that_is_no_repository_id(repo):
    with pytest.raises(ConfigError, match="--push-to-hub wants ORG/NAME"):
        DATA_COMMANDS["profiles"](push_to_hub=repo)


@pytest.mark.parametrize("label", ["two\nlines", "tab\there", "caf\udce9"])
def test_eval_config_refuses_a_label_that_would_break_a_table_row(label):
    with pytest.raises(ConfigError, match="--label="):
        DATA_COMMANDS["evaluate"](label=label)
