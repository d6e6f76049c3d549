"""The one error a run that cannot start raises: its own module, so every job that checks options can raise it
without importing the run itself."""


class RunError(Exception):
    """A run that cannot start, with a message for the user."""
