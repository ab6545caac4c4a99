"""Raw Amazon Reviews 2023 files → the PerRecBench benchmark folder (parquet + dataset card + statistics).

``config`` (the settings of ``perrecbench synth`` and ``build``) · ``synth/`` (synthetic raw files with a
planted signal) · ``sources`` (local or ``hf://`` input files, bad-line checks) → ``selection`` (DuckDB
selection of the chosen users, the search in ``groups``) → ``assembly`` (nested rows, parquet row groups) →
``build`` (stages, splits, levels, output folder; ``card``, ``stats``, ``schema``) · ``cli`` (the commands).
"""
