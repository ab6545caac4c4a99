"""The tiny chat model and two LoRA adapters the integration suite runs on (run with the main venv's python).

``python -m tests_vllm.models OUT`` writes ``OUT/model`` (tests/tiny_model.py) and ``OUT/adapter-one``,
``OUT/adapter-two``: PEFT LoRA adapters on every attention and MLP projection whose B matrices are random and
non-zero (a fresh adapter's B is zero, which would answer exactly like the base model), so the two adapters
and the base model answer differently.
"""

from __future__ import annotations

import sys
from pathlib import Path

from tests.tiny_model import build_tiny_chat_model

TARGETS = ["q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj"]
RANK = 8


def build_adapter(model: Path, out: Path, seed: int) -> Path:
    """A rank-8 LoRA adapter of `model` with random A and B (seeded), saved in PEFT's format to `out`."""
    import torch
    from peft import LoraConfig, get_peft_model
    from transformers import AutoModelForCausalLM

    torch.manual_seed(seed)
    base = AutoModelForCausalLM.from_pretrained(model)
    config = LoraConfig(
        r=RANK, lora_alpha=16, lora_dropout=0.0, target_modules=TARGETS, task_type="CAUSAL_LM"
    )
    peft_model = get_peft_model(base, config)
    with torch.no_grad():
        for name, parameter in peft_model.named_parameters():
            if "lora_B" in name:
                parameter.normal_(0.0, 0.05)
    peft_model.save_pretrained(out)
    return out


def build_all(out: Path) -> None:
    model = build_tiny_chat_model(out / "model")
    build_adapter(model, out / "adapter-one", seed=1)
    build_adapter(model, out / "adapter-two", seed=2)


if __name__ == "__main__":
    build_all(Path(sys.argv[1]))
