"""GuideLLM 0.2-0.3's benchmarks.json (checked: 0.3.1, tests/fixtures/imports/guidellm-0.3): no
`metadata.guidellm_version`; a benchmark's load in `args.strategy` (0.4 on: `config.strategy`); each request holds
`start_time`, `end_time`, `first_token_time`, `last_token_time`, `prompt` and `output` as text, and its scheduling in
`scheduler_info` (`targeted_start_time`, `queued_time`) where 0.4 on has `request_start_time`, `request_end_time`,
`request_args` (the body sent) and `info.timings`. TTFT, ITL, latency and token counts keep their names."""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

LAYOUT = "the layout of GuideLLM 0.2-0.3, which states no version"


def _obj(v: Any) -> dict[str, Any]:
    return v if isinstance(v, dict) else {}


def is_early(b: Mapping[str, Any]) -> bool:
    """Whether a benchmark is in the 0.2-0.3 layout: its load under `args`, none under `config`."""
    return "strategy" not in _obj(b.get("config")) and "strategy" in _obj(b.get("args"))


def strategy(b: Mapping[str, Any]) -> Any:
    """A benchmark's strategy, where either layout keeps it (None where neither does)."""
    return _obj(b.get("config")).get("strategy") or _obj(b.get("args")).get("strategy")


def upgrade_request(r: Mapping[str, Any]) -> dict[str, Any]:
    """A 0.2-0.3 request under 0.4's names (a 0.4+ request unchanged): its start and end, the body as sent (the
    prompt text; 0.3 kept no other field of it) and its dataset order (`queued_time`)."""
    if "request_start_time" in r or "start_time" not in r:
        return dict(r)
    info = _obj(r.get("scheduler_info"))
    timings = {
        k: info[old] for k, old in (("queued", "queued_time"), ("targeted_start", "targeted_start_time")) if old in info
    }
    out = dict(r) | {"request_start_time": r["start_time"], "request_end_time": r.get("end_time")}
    out["info"] = _obj(r.get("info")) | {"timings": timings}
    if isinstance(r.get("prompt"), str) and "request_args" not in r:
        out["request_args"] = json.dumps({"body": {"prompt": r["prompt"]}})
    if "error" in r and "error" not in out["info"]:
        out["info"]["error"] = r["error"]
    return out
