"""`perrecbench sft data` for PerRecBench (the default family): its handler, importing the work lazily."""

from __future__ import annotations

from sft.perrecbench.config import DataConfig


def run_data(config: DataConfig) -> int:
    from perrec_eval import outputs
    from perrec_eval.lock import file_lock
    from sft.perrecbench.data import build

    outputs.target(config.out)  # before the lock, which sits beside --out
    with file_lock(config.out):  # a second `sft data` into the same folder is refused
        path, info = build(config)
    counts = ", ".join(f"{fmt} {n:,}" for fmt, n in info["examples_per_format"].items())
    left_out = sum(info["test_label_groups_left_out"].values())
    print(f"{info['examples']:,} examples ({counts}) from {info['groups']:,} train groups -> {path}")
    print(f"prompt variant {info['variant']}; {left_out} train groups left out for showing a test rating")
    print(
        f"next: perrecbench sft train --model_name_or_path MODEL --data {config.out} --output_dir ADAPTER_DIR"
    )
    return 0
