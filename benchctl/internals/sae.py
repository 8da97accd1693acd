"""Sparse autoencoders from disk, in SAELens' layout (the one most published SAEs ship in):

    DIR/cfg.json                 {"d_in", "d_sae", "hook_layer" (or "layer", or hook_name
                                  "blocks.<L>.hook_resid_post"), "activation_fn": "relu" | "jumprelu" |
                                  "topk" (with "activation_fn_kwargs": {"k": K}), "apply_b_dec_to_input"}
    DIR/sae_weights.safetensors  W_enc [d_in, d_sae], b_enc [d_sae], W_dec [d_sae, d_in], b_dec [d_in]
                                  (JumpReLU: threshold [d_sae]). Goodfire's names are read too:
                                  encoder_linear.weight [d_sae, d_in], encoder_linear.bias,
                                  decoder_linear.weight [d_in, d_sae], decoder_linear.bias
    DIR/descriptions.json        optional: {"<feature id>": "what the feature stands for", ...}

The SAE reads the output of decoder layer `layer` (0-based; SAELens' hook_resid_post of block L,
Goodfire's model.layers.L): encode(x) = act((x - b_dec if apply_b_dec_to_input else x) @ W_enc + b_enc).
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import torch
from safetensors.torch import load_file

WEIGHTS = "sae_weights.safetensors"
CONFIG = "cfg.json"
DESCRIPTIONS = "descriptions.json"


class SaeError(ValueError):
    """An SAE directory that cannot be read; the message names the file and the fix."""


@dataclass
class SparseAutoencoder:
    layer: int
    W_enc: torch.Tensor
    b_enc: torch.Tensor
    b_dec: torch.Tensor
    activation: str = "relu"
    k: int = 0  # topk
    threshold: torch.Tensor | None = None  # jumprelu
    apply_b_dec_to_input: bool = False
    descriptions: dict[int, str] = field(default_factory=dict)

    @property
    def d_in(self) -> int:
        return int(self.W_enc.shape[0])

    @property
    def d_sae(self) -> int:
        return int(self.W_enc.shape[1])

    def to(self, device: torch.device | str) -> SparseAutoencoder:
        self.W_enc, self.b_enc, self.b_dec = self.W_enc.to(device), self.b_enc.to(device), self.b_dec.to(device)
        if self.threshold is not None:
            self.threshold = self.threshold.to(device)
        return self

    @torch.no_grad()
    def encode(self, x: torch.Tensor) -> torch.Tensor:
        """Feature activations [..., d_sae] of residual-stream vectors [..., d_in] (float32)."""
        x = x.to(self.W_enc.dtype)
        if self.apply_b_dec_to_input:
            x = x - self.b_dec
        pre = x @ self.W_enc + self.b_enc
        if self.activation == "jumprelu":
            assert self.threshold is not None
            return pre * (pre > self.threshold) * (pre > 0)
        if self.activation == "topk":
            top = pre.topk(self.k, dim=-1)
            return torch.zeros_like(pre).scatter(-1, top.indices, top.values.relu())
        return pre.relu()

    def info(self) -> dict[str, Any]:
        return {
            "layer": self.layer,
            "features": self.d_sae,
            "d_in": self.d_in,
            "activation": self.activation,
            "descriptions": len(self.descriptions),
        }


def _layer(cfg: dict[str, Any], file: Path) -> int:
    for key in ("layer", "hook_layer"):
        if isinstance(cfg.get(key), int):
            return int(cfg[key])
    m = re.search(r"(?:blocks|layers)\.(\d+)", str(cfg.get("hook_name", "")))
    if m:
        return int(m.group(1))
    raise SaeError(f'{file}: no layer: set "layer" (0-based decoder layer whose output the SAE reads)')


def load_sae(path: str | Path) -> SparseAutoencoder:
    d = Path(path)
    cfg_file, weights_file = d / CONFIG, d / WEIGHTS
    if not d.is_dir() or not cfg_file.is_file() or not weights_file.is_file():
        raise SaeError(
            f"{d}: not an SAE directory. Fix: give a directory with {CONFIG} and {WEIGHTS} (SAELens layout; "
            f"see docs/internals.md, SAE files)"
        )
    try:
        cfg = json.loads(cfg_file.read_text(encoding="utf-8"))
    except ValueError as e:
        raise SaeError(f"{cfg_file}: not JSON ({e})") from None
    w = load_file(str(weights_file))
    if "W_enc" in w:
        W_enc, b_enc, b_dec = w["W_enc"], w["b_enc"], w["b_dec"]
    elif "encoder_linear.weight" in w:
        W_enc, b_enc, b_dec = (
            w["encoder_linear.weight"].T.contiguous(),
            w["encoder_linear.bias"],
            w["decoder_linear.bias"],
        )
    else:
        raise SaeError(
            f"{weights_file}: no W_enc (or encoder_linear.weight) tensor. Fix: save the SAE's weights under SAELens' names"
        )
    act = str(cfg.get("activation_fn", cfg.get("architecture", "relu"))).lower()
    act = {"standard": "relu", "gated": "relu"}.get(act, act)
    if act not in ("relu", "jumprelu", "topk"):
        raise SaeError(f"{cfg_file}: key `activation_fn`: {act!r} is not relu, jumprelu or topk")
    k = int((cfg.get("activation_fn_kwargs") or {}).get("k", cfg.get("k", 0)) or 0)
    if act == "topk" and k < 1:
        raise SaeError(f"{cfg_file}: a topk SAE needs activation_fn_kwargs.k >= 1")
    threshold = w.get("threshold")
    if act == "jumprelu" and threshold is None:
        raise SaeError(f"{weights_file}: a jumprelu SAE needs a `threshold` tensor")
    sae = SparseAutoencoder(
        layer=_layer(cfg, cfg_file),
        W_enc=W_enc.float(),
        b_enc=b_enc.float(),
        b_dec=b_dec.float(),
        activation=act,
        k=k,
        threshold=threshold.float() if threshold is not None else None,
        apply_b_dec_to_input=bool(cfg.get("apply_b_dec_to_input", False)),
        descriptions=_descriptions(d / DESCRIPTIONS),
    )
    if b_enc.shape[0] != sae.d_sae or b_dec.shape[0] != sae.d_in:
        raise SaeError(f"{weights_file}: b_enc / b_dec do not match W_enc's shape {tuple(sae.W_enc.shape)}")
    return sae


def _descriptions(file: Path) -> dict[int, str]:
    if not file.is_file():
        return {}
    try:
        raw = json.loads(file.read_text(encoding="utf-8"))
        return {int(k): str(v) for k, v in raw.items()}
    except (ValueError, AttributeError) as e:
        raise SaeError(f'{file}: expected {{"<feature id>": "description", ...}} ({e})') from None
