"""Where `scripts/install_llama_server.sh` put llama.cpp's `llama-server` and the demo pair as GGUF.

    $SPECULAB_LLAMACPP_DIR (default ~/.cache/speculab/llama.cpp)/bin/llama-server
                                                                 /demo/target.gguf, /demo/draft.gguf

Nothing here builds or converts anything: a missing piece is a `UserError` naming the script that makes it.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

from speculab import NAME
from speculab.errors import UserError

INSTALL_HINT = "run `bash scripts/install_llama_server.sh` (it builds llama-server and converts the demo pair)"


def llamacpp_dir() -> Path:
    return Path(os.environ.get("SPECULAB_LLAMACPP_DIR", Path.home() / ".cache" / NAME / "llama.cpp"))


@dataclass(frozen=True, slots=True)
class LlamacppInstall:
    server: Path  # bin/llama-server
    target_gguf: Path  # the demo target (`demo`) as GGUF
    draft_gguf: Path  # the demo draft (`demo-draft`) as GGUF

    @classmethod
    def at(cls, root: Path | None = None) -> LlamacppInstall:
        root = root or llamacpp_dir()
        return cls(root / "bin" / "llama-server", root / "demo" / "target.gguf", root / "demo" / "draft.gguf")

    def require_server(self) -> Path:
        if not (self.server.is_file() and os.access(self.server, os.X_OK)):
            raise UserError(f"no llama-server at {self.server}; {INSTALL_HINT}, or set SPECULAB_LLAMACPP_DIR")
        return self.server

    def model(self, name: str, *, draft: bool = False) -> Path:
        """'demo' / 'demo-draft' -> the converted pair; anything else is a GGUF file path, which must exist."""
        shipped = "demo-draft" if draft else "demo"
        path = (self.draft_gguf if draft else self.target_gguf) if name == shipped else Path(name)
        if not path.is_file():
            hint = INSTALL_HINT if name == shipped else "give a .gguf file (llama-server cannot load a model directory)"
            raise UserError(f"no GGUF model at {path}; {hint}")
        return path
