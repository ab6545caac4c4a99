"""`python -m perrec_eval` = `perrecbench`."""

import sys

from perrec_eval.cli import main

# The guard matters: vLLM's workers may start by spawn, which imports this module again.
if __name__ == "__main__":
    sys.exit(main())
