"""The shipped demo checkpoints by name, and where this install keeps them. No torch and no engine import: the
engine's loader (`speculab serve demo`) and the harness's checkpoint readers (`speculab methods --draft demo-draft`)
take the same names from here, so a name one of them accepts the other does too."""

from __future__ import annotations

from pathlib import Path

ASSETS_DIR = Path(__file__).parent / "engine" / "assets"
SHIPPED_MODELS = {
    "demo": ASSETS_DIR / "demo" / "target",
    "demo-draft": ASSETS_DIR / "demo" / "draft",
    "demo-eagle": ASSETS_DIR / "demo" / "eagle",  # an EAGLE head for "demo" (speculative/proposers/eagle_head.py)
}
