"""Raw Amazon Reviews 2023 files → a task family's benchmark folder (parquet + dataset card + statistics).

Shared by every family: ``config`` (the settings of ``perrecbench synth``, and :class:`BuildSpec`, those every
build shares) · ``synth/`` (synthetic raw files with a planted signal) · ``sources`` (local or ``hf://`` input
files, bad-line checks) · ``raw`` (one domain's reviews, with their title and text, and metadata read into
DuckDB, checked and deduplicated) · ``stages`` (the stage cache) · ``build`` (the shared steps, the output
folder, the push) · ``manifest`` · ``card`` · ``tasks`` (the registry of families) · ``cli`` (the commands).
Each family's own code lives in its folder: ``perrecbench/`` (groups, levels, twins, splits, assembly,
statistics, card).
"""
