"""``python -m replay`` is the same as the ``replay`` console script."""

from replay.cli import entry

if __name__ == "__main__":
    entry()
