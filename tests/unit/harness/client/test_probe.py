"""The preflight: models listed, unreachable or unserved endpoints refused in one line before any load."""

import pytest

from fakes.scripted_openai import FakeServer, Reply, serve
from speculab.errors import EndpointError
from speculab.harness.client.endpoint import EndpointConfig
from speculab.harness.client.probe import ServerInfo, choose_model, probe_endpoint
from speculab.harness.client.request import make_session
from speculab.harness.servers.process import free_port


async def test_probe_lists_models_and_rejections():
    fake = FakeServer(lambda b: Reply(200, b"{}"), models=("a", "b"))
    async with serve(fake) as url, make_session() as session:
        info = await probe_endpoint(session, EndpointConfig(url, "a"))
    assert info.models == ("a", "b") and info.version is None
    with pytest.raises(EndpointError, match="served: a, b"):
        choose_model("c", info, url)
    assert choose_model(None, ServerInfo(("only",), ()), url) == "only"
    async with make_session() as session:
        with pytest.raises(EndpointError, match="cannot reach"):
            await probe_endpoint(session, EndpointConfig(f"http://127.0.0.1:{free_port()}", "a"))
