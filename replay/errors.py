"""The base of every error replay raises, so a script can catch them all in one clause (``except
replay.ReplayError``). Each error keeps its own name and its older base too (``TrajectoryError`` is still a
``ValueError``), so code that caught those keeps working. This module imports nothing: any package may use it.
"""


class ReplayError(Exception):
    """An error of replay's: a bad option, host, file or value, or a run that could not go on; the message says
    what and where."""
