"""The vendors' batch APIs, for judge calls that can wait (`benchctl grade --batch`, `scan --batch`,
`targets validate --batch`): one module per wire API, each a `BatchClient`.

- `anthropic.py`: Anthropic Message Batches (`POST /v1/messages/batches`, poll, JSONL results).
- `openai.py`: the OpenAI Batch API (a JSONL input file, `POST /v1/batches`, output / error files).
- `gemini.py`: Gemini batch mode (`models/{model}:batchGenerateContent`, inline requests).

A client submits requests already built in the model's own wire API (the body
`benchctl.gateway.complete.build_request` makes for the synchronous call, so an answer reads the same
either way) and hands back each request's response body in that wire API's own shape, keyed by its
`custom_id`: results are matched by id, never by order. What to do with them (resume from
`grades/<grader>/batches.json`, resubmit the expired, leave the failed unscored) is the caller's:
`benchctl.grading.batches`.

`batch_client(model)` gives the client for a model's provider (BatchUnsupported for the others).
An outcome's `error` is `EXPIRED` ("expired") or `CANCELLED` ("cancelled") for a request the batch
never ran, else starts with "errored" and quotes the vendor. Calls are retried like every benchctl
call (transient.py); one that still fails raises `benchctl.gateway.complete.ModelCallError`.
"""

from __future__ import annotations

from benchctl.gateway.batch.protocol import (
    CANCELLED,
    EXPIRED,
    BatchClient,
    BatchItem,
    BatchOutcome,
    BatchState,
    BatchStatus,
    BatchUnsupported,
)
from benchctl.gateway.upstream import ModelId

__all__ = [
    "CANCELLED",
    "EXPIRED",
    "BatchClient",
    "BatchItem",
    "BatchOutcome",
    "BatchState",
    "BatchStatus",
    "BatchUnsupported",
    "batch_client",
]


def batch_client(model: ModelId) -> BatchClient:
    """The batch client for `model`'s provider: Anthropic Message Batches, the OpenAI Batch API or
    Gemini batch mode, with the key and base URL the rest of benchctl uses (provider_env.py)."""
    from benchctl.gateway.provider_env import PROVIDERS

    if model.provider not in PROVIDERS:
        why = (
            "its servers (vLLM, SGLang, proxies) have no batch API benchctl speaks"
            if model.provider == "openai-compatible"
            else "a scripted model answers at once"
        )
        raise BatchUnsupported(
            f"{model}: no batch API for provider {model.provider!r} ({why}); batches work for "
            f"anthropic/*, openai/* and google/* models: run without --batch"
        )
    env = PROVIDERS[model.provider]
    if not env.configured():
        from benchctl.gateway.complete import ModelCallError

        raise ModelCallError(
            f"cannot batch calls to {model}: set {' or '.join(env.keys)} in the environment "
            f"(or {env.base_url_var} to a proxy that needs no key)"
        )
    if model.provider == "anthropic":
        from benchctl.gateway.batch.anthropic import AnthropicBatches

        return AnthropicBatches()
    if model.provider == "openai":
        from benchctl.gateway.batch.openai import OpenAIBatches

        return OpenAIBatches()
    from benchctl.gateway.batch.gemini import GeminiBatches

    return GeminiBatches()
