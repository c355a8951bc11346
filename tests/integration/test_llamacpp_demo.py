"""llama.cpp as a real arm: `speculab demo --engine llamacpp --quick` on the llama-server and GGUF pair that
`scripts/install_llama_server.sh` builds and converts, and llama.cpp's tokenizer against ours on the converted GGUF.

Skipped, with the reason, when the build is absent ($SPECULAB_LLAMACPP_DIR, default ~/.cache/speculab/llama.cpp).
Three llama-server launches of a few seconds each and 2 x 8 short requests per arm: about a minute on two cores.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest

from speculab.harness.results.ab_dir import load_inputs
from speculab.harness.servers.llamacpp_install import LlamacppInstall
from speculab.harness.servers.process import free_port
from speculab.harness.verdict.comparison import per_prompt

pytestmark = [pytest.mark.llamacpp, pytest.mark.slow]

SRC = str(Path(__file__).resolve().parents[2] / "src")
TOKENIZER = Path(SRC) / "speculab" / "engine" / "assets" / "demo" / "target" / "tokenizer.json"

# Code (indentation runs, operators), prose, numbers, unicode (accents, CJK, emoji, combining marks), whitespace at
# the edges, and the chat template's special tokens.
PROMPTS = [
    "def add(a, b):\n    return a + b\n\n\nclass Foo(Bar):\n        pass\n",
    "for i in range(10):\n\tprint(f'{i:>3}', end='')  # tab, braces\r\n",
    "The quick brown fox jumps over the lazy dog. It's 3.14159 -- isn't it? 1234567 x 89",
    "Café naïve résumé — «quotes» 日本語のテキスト 中文 한국어 🦙🚀 e\u0301 ﬁ",
    "   leading spaces and trailing spaces   \n\n\n",
    "<|bos|><|user|>\nWrite a function that reverses a list.<|eos|>\n<|assistant|>\n",
    "x = {'k': [1, 2, 3], \"s\": None}; y = x['k'][::-1]  # ''' \"\"\" ```",
]


@pytest.fixture(scope="module")
def install() -> LlamacppInstall:
    inst = LlamacppInstall.at()
    missing = [p for p in (inst.server, inst.target_gguf, inst.draft_gguf) if not p.is_file()]
    if missing:
        pytest.skip(f"no llama.cpp build ({', '.join(map(str, missing))}); run scripts/install_llama_server.sh")
    return inst


def _post(url: str, body: dict) -> dict:
    req = urllib.request.Request(url, json.dumps(body).encode(), {"Content-Type": "application/json"})
    with urllib.request.urlopen(req, timeout=30) as resp:
        return json.loads(resp.read())


@pytest.fixture(scope="module")
def server(install: LlamacppInstall, tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    port = free_port()
    log = tmp_path_factory.mktemp("llama") / "server.log"
    with log.open("w") as f:
        proc = subprocess.Popen(
            [str(install.server), "-m", str(install.target_gguf), "--host", "127.0.0.1", "--port", str(port)],
            stdout=f,
            stderr=subprocess.STDOUT,
        )
    url = f"http://127.0.0.1:{port}"
    try:
        for _ in range(600):  # health polling, not a timed assertion: the loop ends as soon as it answers
            if proc.poll() is not None:
                pytest.fail(f"llama-server exited {proc.returncode}: {log.read_text()[-2000:]}")
            try:
                with urllib.request.urlopen(url + "/health", timeout=2) as resp:
                    if resp.status == 200:
                        break
            except OSError:
                time.sleep(0.2)
        yield url
    finally:
        proc.terminate()
        proc.wait(30)


def test_llamacpp_tokenizes_like_our_tokenizer(server: str) -> None:
    """The GGUF's pre-tokenizer (`gpt-2`, scripts/demo_gguf.py) gives llama.cpp our tokenizer's ids."""
    tokenizers = pytest.importorskip("tokenizers")
    ours = tokenizers.Tokenizer.from_file(str(TOKENIZER))
    for text in PROMPTS:
        want = ours.encode(text, add_special_tokens=False).ids
        got = _post(server + "/tokenize", {"content": text, "add_special": False, "parse_special": True})["tokens"]
        assert got == want, text
        # and back: llama.cpp detokenizes our ids to the same text
        back = _post(server + "/detokenize", {"tokens": want})["content"]
        assert back == ours.decode(want, skip_special_tokens=False)


def test_demo_on_llamacpp(install: LlamacppInstall, tmp_path: Path) -> None:
    out = tmp_path / "demo"
    proc = subprocess.run(
        [sys.executable, "-m", "speculab", "demo", "--engine", "llamacpp", "--quick", "--output", str(out)],
        capture_output=True,
        text=True,
        env={**os.environ, "PYTHONPATH": SRC, "COLUMNS": "160"},
        timeout=900,
    )
    logs = "\n".join(p.read_text(errors="replace")[-2000:] for p in sorted((out / "logs").glob("*.log")))
    assert proc.returncode == 0, f"{proc.stdout}\n{proc.stderr[-4000:]}\n{logs}"
    assert proc.stderr.count("only speculation differs") == 2
    summary = json.loads((out / "summary.json").read_text())
    verdicts = [c["verdict_line"] for c in summary["candidates"]]
    assert len(verdicts) == 2 and all("llamacpp:spec_decode_* counters" in v for v in verdicts), verdicts
    inputs = load_inputs(out)
    assert [a.name for a in inputs.arms] == ["baseline", "ngram-k4", "draft_model-k4"]
    assert all(a.server_info["detected_engine"] == "llamacpp" for a in inputs.arms)
    for level in ("c1", "c4"):
        (base,) = inputs.runs_for("baseline", level)
        ref = {r.index: r.output_text for r in base.records if not r.warmup}
        assert len(ref) == 8 and all(r.ok for r in base.records)
        assert all(r.speculation is None for r in base.records)  # plain decoding reports no drafts
        for cand in ("ngram-k4", "draft_model-k4"):
            (run,) = inputs.runs_for(cand, level)
            assert all(r.ok for r in run.records)
            # greedy: llama.cpp's speculative decoding gives plain decoding's text for every prompt
            assert {r.index: r.output_text for r in run.records if not r.warmup} == ref, (cand, level)
            acc = run.acceptance
            assert acc is not None and acc.source.startswith("llamacpp:spec_decode_* counters")
            assert acc.active and acc.drafts > 0 and len(acc.per_position) == 4
            # per request: llama.cpp's timings (draft_n, draft_n_accepted) add up to its counters' deltas
            measured = [r for r in run.records if not r.warmup]
            spec = [r.speculation for r in measured if r.speculation is not None]
            assert spec and all(s["source"] == "llama.cpp timings" and s["drafts"] is None for s in spec)
            assert sum(s["draft_tokens"] for s in spec) == acc.draft_tokens
            assert sum(s["accepted_tokens"] for s in spec) == acc.accepted_tokens
    for level in summary["levels"]:
        arms = {a["arm"]: a for a in level["arms"]}
        for cand in ("ngram-k4", "draft_model-k4"):
            ra = arms[cand]["request_acceptance"]
            assert ra["source"] == "llama.cpp timings" and ra["overall"]["length_kind"].startswith("output tokens")
        for a in arms.values():  # llama.cpp's slot prompt cache: prompt_tokens_cached vs prompt_tokens counters
            assert a["prefix_cache"] is not None and a["prefix_cache"]["source"].startswith("llamacpp counters")
        # each prompt's acceptance length against its TPOT speedup: every drafting prompt with a TPOT in both arms
        for comp in level["comparisons"]:
            rel = comp["acceptance_speedup"]
            runs = {arm: inputs.runs_for(arm, level["key"]) for arm in ("baseline", comp["candidate"])}
            tpot = {arm: per_prompt(r, "tpot_s") for arm, r in runs.items()}
            drafting = {
                r.index for run in runs[comp["candidate"]] for r in run.records if r.speculation and not r.warmup
            }
            timed = {i for i in drafting if tpot["baseline"].get(i, 0) > 0 and tpot[comp["candidate"]].get(i, 0) > 0}
            assert (len(rel["points"]) if rel else 0) == len(timed)
