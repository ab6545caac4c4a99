"""The project's one error family: input or state a user can fix, with a message that says how.

The command line prints any `PerrecbenchError` as one line (``perrecbench COMMAND: error: ...``) and exits
with status 2; a traceback is shown only with ``--debug``. So is an `OSError` of the machine (a full disk, a
denied permission; `perrec_eval.cli`). Everything else is a bug and keeps its traceback.
`PerrecbenchError` is a `ValueError`, so library callers that catch bad values keep working.
"""

from __future__ import annotations


class PerrecbenchError(ValueError):
    """Bad input or a state the user can fix; the message names the fix."""


class ConfigError(PerrecbenchError):
    """A command's settings are invalid or inconsistent (a flag, a ``--config`` file, an engine option)."""


class DataError(PerrecbenchError):
    """A benchmark folder, run folder or profiles file is missing, incomplete or not what was expected."""


class MissingExtraError(PerrecbenchError, ImportError):
    """An optional dependency is not installed; the message names the pip command (`extras.require`).

    Both an `ImportError` (for callers that catch those) and a `PerrecbenchError` (one line from the CLI).
    """
