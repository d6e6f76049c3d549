"""Where things are: the checkout, and the shared material beside it (real recordings; absent in a plain clone)."""

from __future__ import annotations

from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
# The first `shared/` folder beside the checkout or beside one of its parents (a worktree may sit deeper).
SHARED = next((p / "shared" for p in ROOT.parents if (p / "shared" / "trajectories").is_dir()), ROOT.parent / "shared")
