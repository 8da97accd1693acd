"""The analyses of the internals protocol on a Runner: steering vectors, logit lens, SAE features,
activation oracle. Each takes parsed request fields and returns the response body (without the
timing fields, which the server adds)."""

from __future__ import annotations

from typing import Any

import torch

from benchctl.internals.protocol import Input, ProtocolError, Sampling
from benchctl.internals.runner import Generated, GenRow, Loaded, Runner

ROUND = 6


def _usage(input_tokens: int, output_tokens: int = 0) -> dict[str, int]:
    return {"input_tokens": input_tokens, "output_tokens": output_tokens}


def _positions(want: list[int] | str | None, n: int, system_end: int) -> list[int]:
    if want is None:
        return list(range(n))
    if isinstance(want, str):  # "after_system"
        return list(range(system_end, n))
    bad = [p for p in want if not 0 <= p < n]
    if bad:
        raise ProtocolError(f"`positions` {bad} are out of range: the input has positions 0..{n - 1}")
    return sorted(set(want))


def _tokens(t: Loaded, ids: list[int], system_end: int) -> dict[str, Any]:
    return {"tokens": t.token_texts(ids), "system_end": system_end}


@torch.no_grad()
def build_vector(r: Runner, name: str, layer: int, pairs: list[tuple[Input, Input]]) -> dict[str, Any]:
    """mean over pairs of (positive - negative) at the last token, at decoder layer `layer`'s output."""
    t = r.target
    t.check_layer(layer)
    rows = [t.tokenize(inp)[0] for pair in pairs for inp in pair]
    seen, _ = t.residuals(rows, [layer])
    last = seen[layer][:, -1, :].float()  # left padding: every row ends at the last column
    diffs = last[0::2] - last[1::2]
    vec = diffs.mean(0).cpu()
    r.vectors[name] = (layer, vec)
    return {
        "name": name,
        "layer": layer,
        "dim": int(vec.shape[0]),
        "norm": round(float(vec.norm()), ROUND),
        "pairs": len(pairs),
        "usage": _usage(sum(len(x) for x in rows)),
    }


@torch.no_grad()
def logit_lens(
    r: Runner, inp: Input, layers: list[int] | None, top_k: int, want: list[int] | str | None
) -> dict[str, Any]:
    """Per layer and position: the lens' top tokens and KL(final || layer) in nats. The final
    distribution is the lens at the last layer (the model's own output), so its KL is exactly 0."""
    t = r.target
    n_layers = len(t.layers)
    chosen = sorted(set(layers)) if layers else list(range(n_layers))
    for layer in chosen:
        t.check_layer(layer, "layers")
    ids, system_end = t.tokenize(inp)
    pos = _positions(want, len(ids), system_end)
    seen, _ = t.residuals([ids], [*chosen, n_layers - 1])
    idx = torch.tensor(pos, device=t.device)
    final = torch.log_softmax(t.lens_logits(seen[n_layers - 1][0, idx]), dim=-1)
    out = []
    for layer in chosen:
        logp = torch.log_softmax(t.lens_logits(seen[layer][0, idx]), dim=-1)
        kl = (final.exp() * (final - logp)).sum(-1)
        top = logp.exp().topk(min(top_k, logp.shape[-1]), dim=-1)
        rows = []
        for j, p in enumerate(pos):
            tops = [
                {"token": t.tokenizer.decode([int(i)]), "id": int(i), "prob": round(float(v), ROUND)}
                for v, i in zip(top.values[j], top.indices[j])
            ]
            rows.append({"position": p, "kl": round(max(0.0, float(kl[j])), ROUND), "top": tops})
        out.append({"layer": layer, "positions": rows})
    return {**_tokens(t, ids, system_end), "layers": out, "usage": _usage(len(ids))}


@torch.no_grad()
def sae_features(r: Runner, inp: Input, layer: int | None, top_k: int, want: list[int] | str | None) -> dict[str, Any]:
    if r.sae is None:
        raise ProtocolError("this server has no SAE: start it with --sae PATH", "no_sae")
    sae = r.sae
    if layer is not None and layer != sae.layer:
        raise ProtocolError(f"the server's SAE reads layer {sae.layer}, not {layer}", "no_sae")
    t = r.target
    ids, system_end = t.tokenize(inp)
    pos = _positions(want, len(ids), system_end)
    seen, _ = t.residuals([ids], [sae.layer])
    acts = sae.encode(seen[sae.layer][0, torch.tensor(pos, device=t.device)].float())
    top = acts.topk(min(top_k, sae.d_sae), dim=-1)
    rows = []
    for j, p in enumerate(pos):
        feats = [
            {"id": int(i), "activation": round(float(v), ROUND), "description": sae.descriptions.get(int(i))}
            for v, i in zip(top.values[j], top.indices[j])
            if float(v) > 0
        ]
        rows.append({"position": p, "features": feats})
    return {**_tokens(t, ids, system_end), "layer": sae.layer, "positions": rows, "usage": _usage(len(ids))}


@torch.no_grad()
def oracle(
    r: Runner,
    inp: Input,
    question: str,
    layer: int,
    want: list[int] | str | None,
    samples: int,
    sampling: Sampling,
    max_batch: int,
) -> dict[str, Any]:
    """Per position: the target's activation at `layer` is injected into the oracle's placeholder and
    the oracle answers `question`, `samples` times."""
    if r.oracle is None:
        raise ProtocolError("this server has no activation oracle: start it with --oracle PATH", "no_oracle")
    t, o, cfg = r.target, r.oracle, r.oracle_settings
    t.check_layer(layer)
    ids, system_end = t.tokenize(inp)
    pos = _positions(want, len(ids), system_end)
    seen, _ = t.residuals([ids], [layer])
    acts = seen[layer][0].float().cpu()
    prompt = cfg.template.format(layer=layer, placeholders=cfg.placeholder, question=question)
    o_ids, _ = o.tokenize(Input(messages=(("user", prompt),)))
    slot = _placeholder_position(o, o_ids, cfg.placeholder)
    rows = [GenRow(o_ids, _seeded(sampling, k), inject=(slot, acts[p])) for p in pos for k in range(samples)]
    answers: list[Generated] = []
    for i in range(0, len(rows), max_batch):
        answers += o.generate(rows[i : i + max_batch], cfg.injection_layer, cfg.coefficient)
    out = [
        {"position": p, "answers": [a.text for a in answers[j * samples : (j + 1) * samples]]}
        for j, p in enumerate(pos)
    ]
    used = _usage(len(ids) + sum(a.input_tokens for a in answers), sum(a.output_tokens for a in answers))
    return {**_tokens(t, ids, system_end), "layer": layer, "question": question, "positions": out, "usage": used}


def _seeded(s: Sampling, k: int) -> Sampling:
    return Sampling(s.max_tokens, s.temperature, s.top_p, None if s.seed is None else s.seed + k)


def _placeholder_position(o: Loaded, ids: list[int], placeholder: str) -> int:
    ph = o.tokenizer(placeholder, add_special_tokens=False)["input_ids"]
    if len(ph) != 1:
        raise ProtocolError(
            f"oracle.json placeholder {placeholder!r} is {len(ph)} tokens; it must be one token", "internal"
        )
    if ph[0] not in ids:
        raise ProtocolError(f"the oracle prompt has no {placeholder!r} token: check oracle.json's template", "internal")
    return ids.index(ph[0])
