import sys

from perrec_eval.cli import main

sys.exit(main())
