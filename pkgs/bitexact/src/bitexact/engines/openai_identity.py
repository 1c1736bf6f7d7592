"""Who answers behind an OpenAI-compatible URL, as far as the server tells: the model card from
`/v1/models`, vLLM's `GET /version` (`{"version": VLLM_VERSION}`, vllm/entrypoints/openai/api_server.py),
SGLang's `GET /server_info` (engines/sglang_http.py), llama.cpp's `GET /props` (its build and model,
tools/server/server-context.cpp). A server that reports no version cannot be told
apart from another build of itself; the identity says so (`version: null`)."""

from __future__ import annotations

from typing import Any

from bitexact.engines.http import HttpClient
from bitexact.engines.sglang_http import server_identity
from bitexact.errors import EngineError

# llama.cpp's `GET /props`: what identifies the build and the model
PROPS_KEYS = ("build_info", "model_path", "model_alias", "total_slots")


def _optional(client: HttpClient, path: str) -> dict[str, Any] | None:
    """One try, no retries: a 404 (or anything else) means this server does not offer it."""
    probe = HttpClient(client.base, timeout=30.0, retries=0)
    try:
        answer = probe.get_json(path)
    except EngineError:
        return None
    return answer if isinstance(answer, dict) else None


def openai_identity(client: HttpClient, model: str) -> dict[str, Any]:
    ident: dict[str, Any] = {"engine": "openai", "url": client.base, "model": model}
    models = client.get_json("/models")
    for entry in models.get("data", []) if isinstance(models, dict) else []:
        if isinstance(entry, dict) and entry.get("id") == model:
            ident["model_card"] = {
                k: entry[k] for k in ("id", "owned_by", "root", "max_model_len") if k in entry
            }
    root = HttpClient(client.base.removesuffix("/v1"))
    vllm = _optional(root, "/version")
    sglang = None if vllm else _optional(root, "/server_info")
    if sglang is not None:
        ident.update(server="sglang", **server_identity(sglang, _optional(root, "/model_info") or {}))
    else:
        props = None if vllm else _optional(root, "/props")
        if props is not None:
            ident.update(
                server="llama.cpp",
                version=props.get("build_info"),
                props={k: props[k] for k in PROPS_KEYS if k in props},
            )
        else:
            ident.update(server="vllm" if vllm else None, version=(vllm or {}).get("version"))
    return ident
