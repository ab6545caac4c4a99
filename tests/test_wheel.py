"""The built wheel, installed into a fresh environment, ships the PTC `evaluate` module and its templates.

The wheel is built from this checkout (pip's own build; without isolation when the test environment has
setuptools) and installed without dependencies into a fresh venv whose only other path is the test
environment's site-packages as a plain directory: its `.pth` files (the editable install of the clone) are
not processed, so `perrec_eval` can only come from the wheel. Everything runs offline.
"""

from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys
import sysconfig
from pathlib import Path

import pytest

pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parents[1]
REFERENCES = [[0.9, -0.8], [1.2, -0.3, 0.5], [0.4, -1.0, 1.6, 0.0]]
PREDICTIONS = [[4.0, 3.0], [1.0, 1.0, 2.0], [0.1, 0.2, 0.9, 0.3]]

SCRIPT = """
import json, sys
import evaluate
import perrec_eval
metric = evaluate.load(perrec_eval.metric_path(), cache_dir=sys.argv[2])
result = metric.compute(**json.loads(sys.argv[1]), return_groups=True)
print(json.dumps({"file": perrec_eval.__file__, "path": perrec_eval.metric_path(), "result": result}))
"""


def _run(python: Path | str, cwd: Path, cache: Path) -> dict:
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "PYTHONHOME")}
    env |= {"HF_HUB_OFFLINE": "1", "HF_DATASETS_OFFLINE": "1", "HF_MODULES_CACHE": str(cache / "modules")}
    inputs = json.dumps({"predictions": PREDICTIONS, "references": REFERENCES})
    done = subprocess.run(
        [str(python), "-c", SCRIPT, inputs, str(cache)],
        cwd=cwd,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    return json.loads(done.stdout.strip().splitlines()[-1])


@pytest.fixture(scope="module")
def installed(tmp_path_factory) -> Path:
    """The python of a fresh venv with the wheel of this checkout installed."""
    pytest.importorskip("evaluate")
    tmp = tmp_path_factory.mktemp("wheel")
    pip = [sys.executable, "-m", "pip", "--disable-pip-version-check", "-q"]
    # Without build isolation when this environment can build (offline); else pip fetches setuptools.
    isolation = ["--no-build-isolation"] if importlib.util.find_spec("setuptools") else []
    subprocess.run(
        [*pip, "wheel", "--no-deps", *isolation, "-w", str(tmp / "dist"), str(ROOT)],
        check=True,
        capture_output=True,
        cwd=tmp,
    )
    (wheel,) = map(str, (tmp / "dist").glob("perrecbench-*.whl"))
    venv = tmp / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True)
    python = venv / "bin" / "python"
    purelib = subprocess.run(
        [str(python), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
        check=True,
        capture_output=True,
        text=True,
    ).stdout.strip()
    # The test environment's packages (evaluate, datasets, numpy, ...) as a plain path, after the venv's own.
    Path(purelib, "test_env.pth").write_text(sysconfig.get_paths()["purelib"] + "\n", encoding="utf-8")
    subprocess.run(
        [*pip, "--python", str(python), "install", "--no-deps", "--no-index", "--ignore-installed", wheel],
        check=True,
        capture_output=True,
    )
    return python


def test_wheel_metric_loads_offline_from_the_installed_package(installed, tmp_path):
    outside = tmp_path / "elsewhere"
    outside.mkdir()
    loaded = _run(installed, outside, tmp_path / "cache")
    venv = installed.parents[1]
    assert Path(loaded["file"]).is_relative_to(venv) and Path(loaded["path"]).is_relative_to(venv)
    assert {p.name for p in Path(loaded["path"]).iterdir()} >= {"ptc.py", "README.md", "requirements.txt"}


def test_wheel_metric_results_equal_the_source_trees(installed, tmp_path):
    wheel = _run(installed, tmp_path, tmp_path / "wheel-cache")
    source = _run(sys.executable, ROOT, tmp_path / "source-cache")
    assert wheel["result"] == source["result"]
    assert Path(source["path"]).resolve() == (ROOT / "metric" / "ptc").resolve()
