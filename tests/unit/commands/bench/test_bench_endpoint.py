"""What `speculab bench` sends to: the server's model by default, and `Connection: close` for an engine that drops
keep-alive connections after streamed responses (llama.cpp's llama-server), detected from what it says of itself."""

from __future__ import annotations

from speculab.commands.bench.run import bench_endpoint
from speculab.harness.client.endpoint import EndpointConfig
from speculab.harness.client.probe import ServerInfo


def info(owned_by: str, version=None) -> ServerInfo:
    card = {"id": "demo.gguf", "object": "model", "owned_by": owned_by}
    return ServerInfo(models=("demo.gguf",), model_cards=(card,), version=version)


def test_llama_server_gets_connection_close_and_its_model():
    ep, engine = bench_endpoint(EndpointConfig("http://h:8080", ""), info("llamacpp"), set())
    assert engine == "llamacpp" and ep.model == "demo.gguf"
    assert not ep.keep_alive and ep.headers()["Connection"] == "close"
    assert ep.to_manifest()["keep_alive"] is False
    # its /metrics names say so as well, whatever /v1/models claims
    named = EndpointConfig("http://h", "demo.gguf")
    ep, engine = bench_endpoint(named, info("someone"), {"llamacpp:prompt_tokens_total"})
    assert engine == "llamacpp" and not ep.keep_alive and ep.model == "demo.gguf"


def test_other_engines_keep_their_connections():
    for owner, version, engine in (("vllm", {"version": "0.11"}, "vllm"), ("speculab", None, "speculab"),
                                   ("speculab-mock", None, "other")):  # fmt: skip
        ep, got = bench_endpoint(EndpointConfig("http://h", ""), info(owner, version), set())
        assert got == engine and ep.keep_alive and "Connection" not in ep.headers()
