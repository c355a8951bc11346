"""The library face: every name in `speculab.__all__` resolves to the object its module defines, and importing
speculab alone loads none of them (the engine imports speculab for `__version__` and must not pull in the harness)."""

from __future__ import annotations

import importlib
import subprocess
import sys

import speculab


def test_every_exported_name_resolves_to_its_defining_module() -> None:
    for name in speculab.__all__:
        value = getattr(speculab, name)
        if name == "__version__":
            assert isinstance(value, str)
            continue
        module = importlib.import_module(speculab._EXPORTS[name])
        assert getattr(module, name) is value
        assert getattr(value, "__module__", module.__name__) == module.__name__, f"{name} is re-exported there"


def test_importing_speculab_imports_no_harness_engine_or_report() -> None:
    code = (
        "import sys, speculab; speculab.__version__; print(sorted(m for m in sys.modules if m.startswith('speculab.')))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "[]"


def test_an_unknown_name_is_an_attribute_error() -> None:
    try:
        speculab.no_such_thing  # noqa: B018
    except AttributeError as e:
        assert "no_such_thing" in str(e)
    else:
        raise AssertionError("expected AttributeError")
