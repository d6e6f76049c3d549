"""The one error a run that cannot start raises: its own module, so every job that checks options can raise it
without importing the run itself."""

from replay.errors import ReplayError


class RunError(ReplayError):
    """A run that cannot start, with a message for the user."""
