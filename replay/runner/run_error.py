"""The one error a run that cannot start, or cannot complete, raises: its own module, so every job that checks options
can raise it without importing the run itself."""

from pathlib import Path

from replay.errors import ReplayError

EXIT_USAGE, EXIT_INCOMPLETE = 1, 3  # (replay.verdict.judge: 1 nothing was run, 3 a started run could not complete)


class RunError(ReplayError):
    """A run that cannot start (exit code 1: nothing was run), or that started and could not complete (3), with a
    message for the user."""

    def __init__(self, message: str, exit_code: int = EXIT_USAGE) -> None:
        super().__init__(message)
        self.exit_code = exit_code


def stopped_by(exc: KeyboardInterrupt) -> str:
    """The signal a KeyboardInterrupt stands for: SIGTERM or SIGHUP outside the closed loop's own handling (raised
    with the signal's name: ``preflight.footer_on_signals``), else Ctrl-C's SIGINT."""
    name = exc.args[0] if exc.args else None
    return name if name in ("SIGTERM", "SIGHUP") else "SIGINT"


def interrupted(name: str, path: Path | None) -> KeyboardInterrupt:
    """The KeyboardInterrupt a run stopped by signal ``name`` (outside the loop's own handling) ends with: its run
    file in ``args[1]``, None when the run had not started (nothing was written to one). A KeyboardInterrupt, not a
    ReplayError: no ``except Exception`` may catch it."""
    return KeyboardInterrupt(name, path)


def run_file_of(exc: KeyboardInterrupt) -> Path | None:
    """The run file an interrupted run wrote (``interrupted``); None when it wrote none, or is not known."""
    path = exc.args[1] if len(exc.args) > 1 else None
    return path if isinstance(path, Path) else None
