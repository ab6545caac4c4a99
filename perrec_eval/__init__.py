"""PerRecBench evaluation runner: prompts, retrieval, profiles, ranking methods, engines, runs."""

from importlib import resources

__version__ = "0.1.0"


def metric_path() -> str:
    """The folder of the PTC `evaluate` module shipped with the package: ``evaluate.load(metric_path())``.

    Works offline from an installed wheel as from a clone (the same files: ``metric/ptc`` of the source).

    >>> from pathlib import Path
    >>> sorted(p.name for p in Path(metric_path()).iterdir() if p.suffix in (".py", ".txt"))
    ['app.py', 'ptc.py', 'requirements.txt']
    """
    return str(resources.files("perrec_eval") / "metric" / "ptc")
