"""Fine-tuning test fixtures: a leak-free tiny benchmark, random LoRA adapters, one trained adapter."""

from __future__ import annotations

import hashlib
import random
from pathlib import Path

import datasets
import pytest

from dataset_builder.perrecbench.schema import CONFIGS, FEATURES
from tests.benchmark_fixture import make_rows, write_manifest

TARGETS = ("q_proj", "v_proj", "down_proj")


def write_sft_benchmark(
    folder: Path, n_test: int = 6, n_train: int = 4, seed: int = 0, leak: bool = False
) -> Path:
    """A tiny benchmark (all configs, test and train) whose train users and query items are not test ones.

    Train users and items are renamed (as `tests.benchmark_fixture.write_tiny_benchmark` does). With `leak`,
    the first train group
    gets a test user whose history shows that user's test review (the one group `sft data` must leave out).
    """
    folder = Path(folder)
    test, train = make_rows(n_test, seed, "t"), make_rows(n_train, seed + 1, "h")
    for row in train:
        row["query"]["parent_asin"] = "TRAIN-" + row["query"]["parent_asin"]
        for user in row["users"]:
            user["user_id"] = "TRAIN-" + user["user_id"]
    if leak:
        leaker, test_row = train[0]["users"][0], test[0]
        leaker["user_id"] = test_row["users"][0]["user_id"]
        seen = {
            **leaker["history"][0],
            "parent_asin": test_row["query"]["parent_asin"],
            "title": "the test item",
        }
        leaker["history"] = [seen, *leaker["history"][1:]]
    lines = ["---", "configs:"]
    rng = random.Random(seed)
    for config, size in CONFIGS.items():
        lines += [f"- config_name: {config}", "  data_files:"]
        for split, rows in {"test": test, "train": train}.items():
            level_rows = [
                {
                    **row,
                    "level": config,
                    "users": rng.sample(row["users"], size) if size < 5 else row["users"],
                }
                for row in rows
            ]
            # Named by content, as a build names its files (the check of every read holds the name to its
            # bytes): datasets 5.2 caches a folder by its name and relative file names, so two fixture
            # folders called alike would otherwise share rows (PITFALLS 1).
            (folder / config).mkdir(parents=True, exist_ok=True)
            tmp = folder / config / f".{split}.parquet"
            datasets.Dataset.from_list(level_rows, features=FEATURES).to_parquet(str(tmp))
            name = f"{config}/{split}-{hashlib.sha256(tmp.read_bytes()).hexdigest()[:12]}.parquet"
            tmp.replace(folder / name)
            lines += [f"  - split: {split}", f"    path: {name}"]
    (folder / "README.md").write_text(
        "\n".join([*lines, "---", "# tiny sft benchmark", ""]), encoding="utf-8"
    )
    return write_manifest(folder)


def make_lora(base: Path, out: Path, *, seed: int, r: int = 4, alpha: int = 8, targets=TARGETS) -> Path:
    """A LoRA adapter on `base` with random A and B (a fresh one has B = 0 and changes nothing)."""
    import torch
    from peft import LoraConfig, get_peft_model
    from transformers import AutoModelForCausalLM

    model = get_peft_model(
        AutoModelForCausalLM.from_pretrained(base),
        LoraConfig(r=r, lora_alpha=alpha, target_modules=list(targets), lora_dropout=0.0),
    )
    generator = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for name, parameter in model.named_parameters():
            if "lora_" in name:
                parameter.copy_(torch.randn(parameter.shape, generator=generator) * 0.3)
    model.save_pretrained(out)
    return out


@pytest.fixture(scope="session")
def sft_bench(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return write_sft_benchmark(tmp_path_factory.mktemp("sft_bench"))


@pytest.fixture(scope="session")
def pairwise_data(sft_bench: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    from sft.perrecbench.config import DataConfig
    from sft.perrecbench.data import build

    out = tmp_path_factory.mktemp("sft_data") / "pairwise"
    build(DataConfig(data=str(sft_bench), format="pairwise", no_profile=True, out=str(out)))
    return out


@pytest.fixture(scope="session")
def trained(tiny_model_dir: Path, pairwise_data: Path, tmp_path_factory: pytest.TempPathFactory):
    """(adapter folder, sft_train.json record) of a short training run on the pairwise examples."""
    from sft.train import parse, train

    out = tmp_path_factory.mktemp("adapters") / "pairwise"
    return out, train(*parse(tiny_args(tiny_model_dir, pairwise_data, out, "--max_steps", "10")))


def tiny_args(model: Path, data: Path, out: Path, *more: str) -> list[str]:
    """`sft train` arguments for a few quick CPU steps: batch 4 in one step, no warmup, no checkpoints."""
    return [
        *("--model_name_or_path", str(model), "--data", str(data), "--output_dir", str(out)),
        *("--per_device_train_batch_size", "4", "--gradient_accumulation_steps", "1"),
        *("--learning_rate", "3e-3", "--warmup_steps", "0", "--logging_steps", "1"),
        *("--activation_checkpointing", "false", "--save_strategy", "no", "--disable_tqdm", "true", *more),
    ]


@pytest.fixture(scope="session")
def random_adapters(tiny_model_dir: Path, tmp_path_factory: pytest.TempPathFactory) -> list[Path]:
    """Three random LoRA adapters of one rank and alpha, and a fourth of another rank and alpha."""
    root = tmp_path_factory.mktemp("random_adapters")
    shapes = [(4, 8), (4, 8), (4, 8), (2, 6)]
    return [
        make_lora(tiny_model_dir, root / f"a{i}", seed=i, r=r, alpha=alpha)
        for i, (r, alpha) in enumerate(shapes)
    ]
