"""A suite run in a child process for the tests: `perrec_eval.suite.evaluate` with a fake engine whose answers
depend only on each request (so any resumed run answers alike), slowed down and logged, so that a test can
kill the process with SIGKILL in the middle of a chosen family.

python -m tests.perrec_eval.suite_driver SUITE DATA CONFIG.yaml LOG [DELAY_SECONDS]
"""

from __future__ import annotations

import hashlib
import json
import sys
import time
from pathlib import Path

from perrec_eval import registry
from perrec_eval.engines.fake import FakeEngine, FakeOptions, constant


def family_of(request) -> str | None:
    """The family whose templates rendered `request` (the one whose fixed answer fits it)."""
    for name in registry.evaluable():
        if registry.get(name).constant_answer(request) is not None:
            return name
    return None


def varied(request, params, sample_index):
    """A family's fixed answer, or for a rating a number fixed by a hash of the request."""
    answer = constant(request, params, sample_index)
    if not isinstance(answer, str):
        return answer
    digest = int(hashlib.sha256(request.messages[-1]["content"].encode()).hexdigest(), 16)
    if "predicted_rating" in answer:
        return json.dumps({"predicted_rating": 1 + digest % 5})
    return answer


def logged(log: Path, delay: float):
    def respond(request, params, sample_index):
        with log.open("a", encoding="utf-8") as out:
            out.write(f"{family_of(request)}\n")
        time.sleep(delay)
        return varied(request, params, sample_index)

    return respond


def main(argv: list[str]) -> int:
    from perrec_eval.cliconfig import load_settings
    from perrec_eval.suite import SuiteConfig, evaluate

    out, data, config, log = argv[:4]
    delay = float(argv[4]) if len(argv) > 4 else 0.0
    sections = load_settings(config)
    suite = SuiteConfig(
        task="all", out=out, data=data, engine="fake", model="varied", label="varied", limit=6, plots=False,
        sections=sections,
    )  # fmt: skip
    engine = FakeEngine(logged(Path(log), delay), model="varied", options=FakeOptions(report_every=1))
    evaluate(suite, engine=engine)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
