"""The exceptions of spillway.

The classes follow the exit codes of the ``spillway`` command line tool:

* :class:`InvalidRequest` (exit code 2: the request was wrong) is a :class:`ValueError`;
  :class:`InputError` (a malformed or unreadable input file, with its file, line and reason)
  is one of them.
* :class:`JobFailed` (exit code 1: the job failed while running: I/O, resources, divergence)
  is a :class:`RuntimeError`.
* An interrupted call (Ctrl-C, exit code 130) raises :class:`KeyboardInterrupt`, as any
  Python code does.

Every one of them is a :class:`SpillwayError`. Wrong argument *types* raise
:class:`TypeError` (not a :class:`SpillwayError`), as in numpy and scipy.
"""

__all__ = ["SpillwayError", "InvalidRequest", "InputError", "JobFailed", "ConvergenceWarning"]


class SpillwayError(Exception):
    """The base class of every error raised by spillway."""


class InvalidRequest(SpillwayError, ValueError):
    """The request was wrong: an argument's value, the configuration, or the input data."""


class InputError(InvalidRequest):
    """An input file is unreadable or malformed; the message names the file, line and reason."""


class JobFailed(SpillwayError, RuntimeError):
    """The job failed while running (I/O, spill storage, resources, divergence)."""


class ConvergenceWarning(UserWarning):
    """An iterative algorithm stopped at its iteration limit before meeting its tolerance."""
