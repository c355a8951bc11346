"""Ask an installed engine what its release declares: its Python package's source, or its executable's --help.

A Python engine (vLLM, SGLang, speculab) is asked through the interpreter that would run its launch command (the
command's `python`, or the shebang of its console script): a short script there says where the package lives and
which version is installed, without importing it (importing vLLM takes seconds and imports torch); the declaring
module is then read here with `declared`'s parsers. llama-server and TGI's launcher are asked with `--help` and
`--version`. Anything that cannot be asked says why in `DeclaredMethods.problem`; nothing here raises for it.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from speculab.harness.servers.adapters import adapter_for
from speculab.harness.servers.adapters.base import HelpRelease, PythonRelease
from speculab.harness.servers.methods.declared import (
    DeclaredMethods,
    fallback,
    methods_from_version_json,
    read_declared,
)

TIMEOUT_S = 60.0

# Run by the engine's interpreter: find the package without importing it (find_spec of a top-level name runs none
# of its code), and its installed version from the distribution's metadata.
_LOCATE = """
import importlib.metadata as md, importlib.util as u, json, sys
spec = u.find_spec(sys.argv[1])
version = None
for dist in sys.argv[3:]:
    try:
        version = dist + " " + md.version(dist)
        break
    except md.PackageNotFoundError:
        pass
where = list(spec.submodule_search_locations or []) if spec else []
missing = [m for m in sys.argv[2].split(",") if m and u.find_spec(m) is None]
print(json.dumps({"dir": where[0] if where else None, "version": version, "missing": missing}))
"""


def interpreter_for(command: Sequence[str]) -> str | None:
    """The Python that runs this launch command: its first word when that is a python, else the interpreter its
    console script's shebang names (`vllm serve ...` -> the venv's python); None when neither can be told."""
    if not command:
        return None
    exe = command[0]
    if Path(exe).name.startswith("python"):
        return shutil.which(exe) or (exe if os.access(exe, os.X_OK) else None)
    path = shutil.which(exe)
    if path is None:
        return None
    try:
        with open(path, "rb") as fh:
            first = fh.readline(512).decode("utf-8", errors="replace").strip()
    except OSError:
        return None
    if not first.startswith("#!"):
        return None
    words = first[2:].split()
    if words and Path(words[0]).name == "env" and len(words) > 1:
        return shutil.which(words[-1])
    return words[0] if words and Path(words[0]).name.startswith("python") else None


def _run(argv: Sequence[str], timeout_s: float = TIMEOUT_S) -> tuple[str | None, str | None]:
    """(stdout + stderr, None) or (None, why it could not run)."""
    try:
        done = subprocess.run(
            list(argv),
            capture_output=True,
            text=True,
            timeout=timeout_s,
            errors="replace",
            stdin=subprocess.DEVNULL,
            check=False,
        )
    except FileNotFoundError:
        return None, f"{argv[0]} not found"
    except (OSError, subprocess.TimeoutExpired) as e:
        return None, f"{argv[0]} could not be run ({type(e).__name__})"
    return done.stdout + "\n" + done.stderr, None


def _locate(
    python: str, package: str, dists: Sequence[str], modules: Sequence[str] = ()
) -> tuple[dict[str, Any] | None, str | None]:
    out, problem = _run([python, "-c", _LOCATE, package, ",".join(modules), *dists])
    if out is None:
        return None, problem
    for line in reversed(out.strip().splitlines()):
        try:
            found = json.loads(line)
        except ValueError:
            continue
        if isinstance(found, dict):
            return found, None
    return None, f"{python} did not say where {package} is"


def _read_all(package_dir: Path, sources: tuple[tuple[str, str], ...]) -> tuple[tuple[str, ...], list[str]]:
    """What the files of `sources` declare, joined in order, and which of them declared something."""
    found: list[str] = []
    where: list[str] = []
    for rel, symbol in sources:
        f = package_dir / rel
        if not f.is_file():
            continue
        names = read_declared(f.read_text(encoding="utf-8", errors="replace"), symbol)
        if names:
            found += names
            where.append(f"{rel} ({symbol})")
    return tuple(dict.fromkeys(found)), where


def declared_by_python(engine: str, python: str) -> DeclaredMethods:
    """What the engine's package installed for `python` declares, read from its source (where its adapter says)."""
    release_of = adapter_for(engine).declares
    assert isinstance(release_of, PythonRelease)
    package, dists = release_of.package, release_of.dists
    method_sources, option_sources, requires = release_of.method_sources, release_of.option_sources, release_of.requires
    found, problem = _locate(python, package, dists, sorted(set(requires.values())))
    if found is None or not found.get("dir"):
        return fallback(engine, problem or f"{package} is not installed for {python}")
    release = found.get("version")
    methods, where = _read_all(Path(found["dir"]), method_sources)
    if not methods:
        files = ", ".join(rel for rel, _ in method_sources)
        return fallback(engine, f"{package} {release or ''} declares no methods in {files}".replace("  ", " "))
    option_keys, option_where = _read_all(Path(found["dir"]), option_sources)
    source = f"{package}/{' + '.join(where)} of {release or package}"
    option_source = f"{package}/{' + '.join(option_where)} of {release or package}" if option_where else None
    missing = set(found.get("missing") or ())
    unavailable = {
        m: f"needs {mod}, which is not installed for {python}"
        for m, mod in requires.items()
        if mod in missing and m in methods
    }
    return DeclaredMethods(
        engine, release, methods, source, option_keys=option_keys, option_source=option_source, unavailable=unavailable
    )


def declared_by_executable(engine: str, exe: str) -> DeclaredMethods:
    """llama-server / text-generation-launcher: the methods its --help lists, the release its --version says (read
    by its adapter's parsers)."""
    reader = adapter_for(engine).declares
    assert isinstance(reader, HelpRelease)
    help_text, problem = _run([exe, "--help"])
    if help_text is None:
        return fallback(engine, problem)
    methods = reader.methods(help_text)
    keys = reader.option_flags(help_text, methods)
    version_text, _ = _run([exe, "--version"])
    release = None
    if version_text is not None:
        release = reader.release(version_text)
    if not methods:
        return fallback(engine, f"`{exe} --help` lists no speculation options")
    return DeclaredMethods(engine, release, methods, f"{Path(exe).name} --help", option_keys=keys)


def declared_by_command(engine: str, command: Sequence[str] | None = None) -> DeclaredMethods:
    """What the engine that `command` launches declares (its default executable when no command is given)."""
    adapter = adapter_for(engine)
    command = list(command) if command else [adapter.executable]
    if isinstance(adapter.declares, PythonRelease):
        python = interpreter_for(command)
        if python is None:
            return fallback(engine, f"cannot tell which Python runs {command[0]!r}; give its python or console script")
        return declared_by_python(engine, python)
    if isinstance(adapter.declares, HelpRelease):
        return declared_by_executable(engine, command[0])
    return fallback(engine)


def declared_by_server(engine: str, version_body: Any) -> DeclaredMethods:
    """A running server: speculab's /version lists its methods; other engines do not say, so speculab's table,
    labelled, with the release the server reports (vLLM's /version) beside it."""
    release = None
    if isinstance(version_body, dict) and isinstance(version_body.get("version"), str):
        release = version_body["version"][:64]
    if adapter_for(engine).server_lists_methods:
        methods = methods_from_version_json(version_body)
        if methods:
            return DeclaredMethods(engine, release, methods, "the server's /version (speculative_methods)")
    said = fallback(engine, "a server behind a URL does not list its methods")
    return DeclaredMethods(engine, release, said.methods, said.source, True, said.problem)
