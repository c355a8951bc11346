"""Every error the server sends, as OpenAI JSON: `{"error": {"message", "type", "param", "code"}}`.

Statuses: 400 invalid request (FastAPI/pydantic validation included: OpenAI never answers 422), 401 missing or
wrong API key, 404 unknown route or model, 405 wrong method, 413 body over --max-request-bytes, 429 waiting queue
full, 431 request head over --max-header-bytes (sent by connection.py), 500 a bug while serving a request (the
server keeps serving), 503 only while the engine is shutting down or after it stopped for good.
"""

from __future__ import annotations

import json
import logging
import re
from collections.abc import Callable
from typing import Any

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from starlette.exceptions import HTTPException as StarletteHTTPException

from speculab.protocol import openai as oa

log = logging.getLogger(__name__)

_TYPES = {404: "not_found_error", 429: "rate_limit_error"}  # OpenAI's 401 is an invalid_request_error


def error_type(status: int) -> str:
    """OpenAI's error `type` for a status: server_error for 5xx, invalid_request_error for most 4xx."""
    return "server_error" if status >= 500 else _TYPES.get(status, "invalid_request_error")


def error_bytes(
    status: int, message: str, *, type: str | None = None, param: str | None = None, code: str | None = None
) -> bytes:
    """The JSON body, ASCII-escaped: a message may quote client text, and any string (a lone surrogate too) survives."""
    body = oa.error_body(message, type=type or error_type(status), param=param, code=code)
    return json.dumps(body, ensure_ascii=True, separators=(",", ":")).encode()


def error_response(
    status: int,
    message: str,
    *,
    type: str | None = None,
    param: str | None = None,
    code: str | None = None,
    headers: dict[str, str] | None = None,
) -> JSONResponse:
    return _ErrorJSON(oa.error_body(message, type=type or error_type(status), param=param, code=code), status, headers)


class _ErrorJSON(JSONResponse):
    def render(self, content: Any) -> bytes:
        return json.dumps(content, ensure_ascii=True, separators=(",", ":")).encode()


_FIELD = re.compile(r"[A-Za-z_][A-Za-z0-9_]*|[0-9]+")
_TYPE_TAGS = {"str", "int", "float", "bool", "list", "dict", "none"}


def _param(err: dict[str, Any]) -> str | None:
    # Union members and validators show up as extra loc parts (prompt.str, prompt.list[int], function-after[...]);
    # keep field names and list indices only.
    loc = [str(p) for p in err.get("loc", ()) if p != "body" and _FIELD.fullmatch(str(p)) and str(p) not in _TYPE_TAGS]
    return ".".join(loc) or None


def validation_message(exc: RequestValidationError) -> tuple[str, str | None]:
    """One line naming the field and the problem, from FastAPI/pydantic's error list."""
    errs = list(exc.errors())
    if not errs:
        return "invalid request", None
    if errs[0].get("type") == "json_invalid":
        e = errs[0]
        return f"request body is not valid JSON: {e.get('ctx', {}).get('error', e.get('msg'))}", None
    # A union field (prompt: text or token ids) reports one error per member; the member of the right JSON type
    # says what is actually wrong, the others only "Input should be a valid ...".
    e = next((x for x in errs if not str(x.get("type", "")).endswith("_type")), errs[0])
    param = _param(e)
    msg = str(e.get("msg", "invalid value")).removeprefix("Value error, ")
    if e.get("type") == "extra_forbidden":
        msg = "unknown field (not part of this API); remove it"
    elif e.get("type") == "missing":
        msg = "field required"
    elif param is None and e.get("type") == "model_attributes_type":
        msg = "the request body must be a JSON object (send Content-Type: application/json)"
    others = {_field(x) for x in errs} - {_field(e)}
    extra = f" ({len(others)} more problem{'s' if len(others) > 1 else ''})" if others else ""
    return (f"{param}: {msg}{extra}" if param else f"{msg}{extra}"), param


def _field(err: dict[str, Any]) -> str:
    """The top-level field an error is about (union members of one field count once)."""
    param = _param(err) or ""
    return param.split(".", 1)[0]


def install_error_handlers(app: FastAPI, count_error: Callable[[int], None]) -> None:
    """Map every exception a request can raise to OpenAI JSON; `count_error(status)` feeds /metrics."""

    @app.exception_handler(RequestValidationError)
    async def _on_validation(_: Request, exc: RequestValidationError) -> JSONResponse:
        msg, param = validation_message(exc)
        count_error(400)
        return error_response(400, msg, param=param)

    @app.exception_handler(StarletteHTTPException)
    async def _on_http(_: Request, exc: StarletteHTTPException) -> JSONResponse:
        status = 400 if exc.status_code == 422 else exc.status_code
        count_error(status)
        return error_response(status, str(exc.detail), headers=exc.headers)

    @app.exception_handler(oa.ApiError)
    async def _on_api_error(_: Request, exc: oa.ApiError) -> JSONResponse:
        count_error(exc.status)
        return error_response(exc.status, exc.message, type=exc.type, param=exc.param, code=exc.code)

    @app.exception_handler(Exception)
    async def _on_crash(_: Request, exc: Exception) -> JSONResponse:
        log.exception("unhandled error")
        count_error(500)
        return error_response(500, f"internal server error: {type(exc).__name__}: {exc}")
