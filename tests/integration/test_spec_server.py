"""A speculative server, as clients see it: the official openai package streams unchanged; acceptance shows up
in usage and /metrics; `speculab serve --speculative-config` starts one and refuses bad configs in one line."""

from __future__ import annotations

import contextlib
import json
import os
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import openai
import pytest
from tests.fakes.engine_fakes import tiny_model
from tests.fakes.spec_models import truncated_copy
from tests.integration.server_harness import CharDetok, CharTokenizer, Server, serve_app

from speculab.cli import main
from speculab.engine.async_engine import AsyncEngine
from speculab.engine.engine import Engine, EngineConfig
from speculab.engine.sequence import SamplingParams
from speculab.engine.server.app import AppConfig, create_app
from speculab.engine.speculative.metrics import SpecDecodeCollector
from speculab.engine.speculative.proposers.draft_model import DraftModelProposer
from speculab.engine.speculative.proposers.ngram import NgramProposer
from speculab.engine.speculative.speculator import Speculator
from speculab.harness.servers.process import free_port

PROMPT = "one two three, one two three, one two three, one two"
SLOTS, MAX_LEN = 4, 128


def _speculator(method: str) -> Speculator:
    if method == "ngram":
        return Speculator(NgramProposer(4, prompt_lookup_max=3, prompt_lookup_min=1))
    draft = truncated_copy(tiny_model(), 1)
    return Speculator(DraftModelProposer(draft, 4, SLOTS, MAX_LEN, draft.config.vocab_size))


@contextlib.contextmanager
def speculative_server(spec: Speculator) -> Iterator[Server]:
    """The engine server on 127.0.0.1 (free port) with the tiny model, the character tokenizer and `spec`."""
    tok = CharTokenizer()
    engine = Engine(
        tiny_model(),
        EngineConfig(max_num_seqs=SLOTS, max_model_len=MAX_LEN, max_num_batched_tokens=256),
        eos_token_ids=tok.eos_token_ids,
        detokenizer_factory=lambda ids: CharDetok(tok, ids),
        speculator=spec,
    )
    aeng = AsyncEngine(engine)
    collectors = [SpecDecodeCollector(spec.counters, "tiny")]
    app = create_app(aeng, tok, AppConfig(served_model_name="tiny"), collectors=collectors)
    with serve_app(app) as url:
        yield Server(url, engine, aeng)


def _plain_text(prompt_ids: list[int], max_tokens: int) -> str:
    tok = CharTokenizer()
    engine = Engine(
        tiny_model(),
        EngineConfig(max_num_seqs=SLOTS, max_model_len=MAX_LEN, max_num_batched_tokens=256),
        eos_token_ids=tok.eos_token_ids,
        detokenizer_factory=lambda ids: CharDetok(tok, ids),
    )
    return engine.generate([prompt_ids], SamplingParams(max_tokens=max_tokens, temperature=0.0))[0].text


@pytest.mark.parametrize("method", ["ngram", "draft_model"])
def test_openai_client_streams_from_a_speculative_server(method):
    spec = _speculator(method)
    with speculative_server(spec) as server:
        client = openai.OpenAI(base_url=server.url + "/v1", api_key="unused", max_retries=0, timeout=60)
        stream = client.completions.create(
            model="tiny",
            prompt=PROMPT,
            max_tokens=40,
            temperature=0,
            stream=True,
            stream_options={"include_usage": True},
        )
        chunks = list(stream)
        text = "".join(c.choices[0].text for c in chunks if c.choices)
        assert text == _plain_text(CharTokenizer().encode(PROMPT), 40)  # speculation never changes greedy text
        usage = chunks[-1].usage
        assert usage.completion_tokens == 40
        acc = usage.model_extra["speculab_spec_decode"]
        assert acc["drafts"] > 0 and 0 < acc["accepted_tokens"] <= acc["draft_tokens"]
        per_pos = acc["accepted_per_position"]  # steps that accepted position j: non-increasing, summing to accepted
        assert sum(per_pos) == acc["accepted_tokens"] and per_pos == sorted(per_pos, reverse=True)
        assert per_pos[0] <= acc["drafts"]
        assert any(len(c.choices[0].text) > 1 for c in chunks if c.choices)  # one step, several tokens

        chat = client.chat.completions.create(
            model="tiny",
            messages=[{"role": "user", "content": PROMPT}],
            max_tokens=20,
            temperature=0.8,
            seed=3,
            stream=True,
            stream_options={"include_usage": True},
        )
        chat_chunks = list(chat)
        streamed = "".join(c.choices[0].delta.content or "" for c in chat_chunks if c.choices)
        assert chat_chunks[-1].usage.completion_tokens == 20
        again = client.chat.completions.create(
            model="tiny", messages=[{"role": "user", "content": PROMPT}], max_tokens=20, temperature=0.8, seed=3
        )
        assert again.choices[0].message.content == streamed  # per-request seeds: reproducible under speculation

        status, body = server.get("/metrics")
        assert status == 200
        metrics = {line.split("{")[0]: line for line in body.splitlines() if line.startswith("speculab:spec_decode")}
        for name in ("num_drafts", "num_draft_tokens", "num_accepted_tokens", "num_accepted_tokens_per_pos"):
            assert f"speculab:spec_decode_{name}_total" in metrics
        assert 'position="0"' in metrics["speculab:spec_decode_num_accepted_tokens_per_pos_total"] or any(
            'position="0"' in line for line in body.splitlines()
        )
        drafts = float(metrics["speculab:spec_decode_num_drafts_total"].rsplit(" ", 1)[1])
        assert drafts == spec.counters.num_drafts > 0


@pytest.mark.slow
def test_forced_acceptance_says_so_in_every_response_and_in_metrics(tiny_checkpoint):
    """`speculab serve --forced-acceptance-rates` as make_app builds it: each response's speculation stats say
    `"forced": true`, /metrics has the gauge at 1 beside counters that count what was accepted, /version the rates."""
    from speculab.engine.server.launch import ServeConfig, make_app

    config = json.dumps({"method": "draft_model", "model": str(tiny_checkpoint), "num_speculative_tokens": 3})
    cfg = ServeConfig(
        str(tiny_checkpoint),
        served_model_name="tiny",
        speculative_config=config,
        forced_acceptance_rates=(0.5, 0.25),
        max_num_seqs=2,
    )
    app = make_app(cfg)
    with serve_app(app) as url:
        client = openai.OpenAI(base_url=url + "/v1", api_key="unused", max_retries=0, timeout=60)
        out = client.completions.create(model="tiny", prompt="The quick brown fox", max_tokens=24, temperature=0)
        acc = out.usage.model_extra["speculab_spec_decode"]
        # the draft is the target itself, so the target would accept every draft: only forcing keeps fewer
        assert acc["forced"] is True and acc["drafts"] > 0 and acc["accepted_tokens"] < acc["draft_tokens"]
        server = Server(url, app.state.engine.engine, app.state.engine)
        status, body = server.get("/metrics")
        assert status == 200
        assert 'speculab:spec_decode_forced_acceptance{model_name="tiny"} 1.0' in body
        per_pos = [ln for ln in body.splitlines() if ln.startswith("speculab:spec_decode_num_accepted_tokens_per_pos")]
        assert any('position="2"' in ln and ln.endswith(" 0.0") for ln in per_pos)  # a missing position's rate is 0
        status, body = server.get("/version")
        assert json.loads(body)["server_args"]["forced_acceptance_rates"] == [0.5, 0.25]


@pytest.mark.slow
def test_serve_with_speculative_config_answers_openai_clients(tiny_checkpoint):
    port = free_port()
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).parents[2] / "src")}
    config = json.dumps({"method": "draft_model", "model": str(tiny_checkpoint), "num_speculative_tokens": 3})
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "speculab",
            "serve",
            str(tiny_checkpoint),
            "--port",
            str(port),
            "--served-model-name",
            "tiny",
            "--speculative-config",
            config,
        ],
        env=env,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        deadline, line = time.monotonic() + 120, ""
        while time.monotonic() < deadline and "ready" not in line:
            line = proc.stderr.readline()
            assert line or proc.poll() is None, "server exited before it was ready"
        client = openai.OpenAI(base_url=f"http://127.0.0.1:{port}/v1", api_key="x", max_retries=0)
        out = client.completions.create(model="tiny", prompt="The quick brown fox", max_tokens=12, temperature=0)
        # The draft is the target itself: every draft is accepted.
        acc = out.usage.model_extra["speculab_spec_decode"]
        assert acc["accepted_tokens"] == acc["draft_tokens"] > 0
        # issue 36: it says what it runs, so a client can label the arm and check the single change
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/version", timeout=10) as r:
            said = json.loads(r.read())
        spec = {"method": "draft_model", "num_speculative_tokens": 3, "model": str(tiny_checkpoint)}
        assert said["speculative_config"] == said["server_args"]["speculative_config"] == spec
        args = said["server_args"]
        assert args["model"] == str(tiny_checkpoint) and args["max_num_seqs"] == 8 and args["dtype"] == "float32"
        assert args["max_model_len"] >= 2 and args["device"] == "cpu"  # what it chose, not the flag's "auto"
        assert not {"port", "host", "api_key", "served_model_name"} & set(args)  # where it listens, and secrets
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/v1/models", timeout=10) as r:
            assert json.loads(r.read())["data"][0]["root"] == str(tiny_checkpoint.resolve())
    finally:
        proc.terminate()
        proc.wait(timeout=30)


@pytest.mark.parametrize(
    ("config", "words"),
    [
        ("{nope", "not valid JSON"),
        ('{"method":"medusa","num_speculative_tokens":2}', 'method "medusa" is not supported'),
        ('{"method":"eagle","model":"/no/such/head","num_speculative_tokens":2}', "does not exist"),
        ('{"method":"ngram","num_speculative_tokens":2,"lookahead":3}', "unknown key lookahead"),
        ('{"method":"draft_model","model":"/no/such/draft","num_speculative_tokens":2}', "does not exist"),
    ],
)
def test_bad_speculative_config_is_one_line(tiny_checkpoint, capsys, config, words):
    with pytest.raises(SystemExit) as exit_:
        main(["serve", str(tiny_checkpoint), "--speculative-config", config])
    err = capsys.readouterr().err
    assert exit_.value.code == 2, err
    assert words in err and "Traceback" not in err, err


def test_draft_with_another_vocabulary_is_refused_at_start(tiny_checkpoint, tmp_path):
    import shutil

    from speculab.engine.server.launch import ServeConfig, build_engine
    from speculab.engine.speculative.proposers.draft_model import DraftVocabularyError

    other = tmp_path / "other-draft"
    shutil.copytree(tiny_checkpoint, other)
    tok = json.loads((other / "tokenizer.json").read_text())
    vocab = tok["model"]["vocab"]
    special = {t["content"] for t in tok["added_tokens"]}
    first, second = [t for t in sorted(vocab, key=vocab.get) if t not in special][:2]
    vocab[first], vocab[second] = vocab[second], vocab[first]  # same size, different meaning
    (other / "tokenizer.json").write_text(json.dumps(tok))
    config = json.dumps({"method": "draft_model", "model": str(other), "num_speculative_tokens": 2})
    with pytest.raises(DraftVocabularyError, match="does not share the target's tokenizer"):
        build_engine(ServeConfig(model=str(tiny_checkpoint), speculative_config=config))
