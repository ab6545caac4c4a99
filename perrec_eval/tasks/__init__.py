"""The task families of the house, one folder each (`perrecbench/`, `llmrec/`, `recbench_plus/`).

Nothing here is shared: the interface a family implements is `perrec_eval.task`, and the registry that
names the families and loads them on first use is `perrec_eval.registry`.
"""
