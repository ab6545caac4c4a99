"""This project's benchmarks inside the harnesses people already run: lm-evaluation-harness and lighteval.

A harness asks each request once and scores what comes back; this project's families are exported to it as
one-round request rows, and everything else stays this project's:

- `requests`: what a harness asks and how its answers are read and scored, per family (`Adapter`): the
  request rows of a cell (each the chat messages `perrecbench evaluate` sends, rendered by the family's
  protocols), the per-row reading (the family's readers) and the cell's values (the family's scorers).
  The general path's families share one adapter; PerRecBench's is `perrec_eval.tasks.perrecbench.harness`;
- `export`: `perrecbench export lm-eval | lighteval`: the rows of every cell of the given builds
  (`rows/`, a `datasets` folder, one config per cell) with `export.json` (what was exported, from which
  build and prompt files), and the harness's task files (`lmeval_tasks`, `lighteval_tasks`);
- `samples`: a harness's logged answers (lm-eval's ``samples_<task>_*.jsonl``, lighteval's details) read
  back for `perrecbench score --predictions`, which gives the harness's numbers with this project's
  intervals, and a run folder `perrecbench report` puts beside the baselines.
"""
