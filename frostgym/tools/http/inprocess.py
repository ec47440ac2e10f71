"""Calling the fixture APIs in-process (no socket, no cassette): how the task generator
learns what a gold call returns, through the very client code the tools use."""

from __future__ import annotations

from typing import Any
from urllib.parse import parse_qsl

import httpx

from frostgym.tools.http.apis import dispatch
from frostgym.tools.http.clients import TOOL_BY_NAME


def _handle(request: httpx.Request) -> httpx.Response:
    query = dict(parse_qsl(request.url.query.decode("ascii"), keep_blank_values=True))
    headers = {k: v for k, v in request.headers.items()}
    response = dispatch(request.url.host, request.method, request.url.path, query, request.read(), headers)
    return httpx.Response(response.status, content=response.body(), headers={"Content-Type": "application/json"})


def inprocess_client() -> httpx.Client:
    return httpx.Client(transport=httpx.MockTransport(_handle), trust_env=False)


def world_call(name: str, arguments: dict[str, Any]) -> tuple[int, Any]:
    """(HTTP status, JSON body) of one tool call, straight from the APIs."""
    with inprocess_client() as client:
        response = TOOL_BY_NAME[name].call(client, arguments)
        return response.status_code, response.json()
