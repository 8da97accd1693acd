"""The model side of the reference server: torch + transformers, with plain forward hooks.

Why plain hooks and not nnsight: the five operations need three interventions only — read a
decoder layer's output, add a vector to it, and overwrite it at chosen positions — each a
`register_forward_hook` of a few lines on `model.model.layers[L]` (or the architecture's
equivalent). nnsight would add a tracing layer and its own dependencies to do the same, and its
strengths (remote execution, graph-level edits) are not needed here.

Layer L always means the *output* of decoder layer L (0-based), the residual stream after it:
steering adds there, the logit lens and the SAE read there (SAELens' hook_resid_post of block L).

Not thread-safe: the server runs one runner on one worker thread and batches requests onto it.
"""

from __future__ import annotations

import inspect
import json
import os
import random
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, cast

os.environ.setdefault("HF_HUB_OFFLINE", "1")  # nothing is ever downloaded: local checkpoints only

import torch  # noqa: E402
from torch import nn  # noqa: E402

from benchctl.internals.protocol import Input, ProtocolError, Sampling, Steering  # noqa: E402
from benchctl.internals.sae import SparseAutoencoder, load_sae  # noqa: E402

ORACLE_CONFIG = "oracle.json"
# a forward hook on a decoder layer: fn(layer output) -> its replacement, or None to leave it
Hook = Callable[[torch.Tensor], "torch.Tensor | None"]


@dataclass
class GenRow:
    """One sequence to decode: its token ids and sampling, the steering added to it, and (oracle)
    the vectors injected at its placeholder positions on the prompt pass."""

    ids: list[int]
    sampling: Sampling
    steering: list[tuple[int, torch.Tensor]] = field(default_factory=list)  # (layer, coefficient x vector)
    inject: tuple[int, torch.Tensor] | None = None  # (position, vector)


@dataclass
class Generated:
    text: str
    finish_reason: str  # stop | length
    input_tokens: int
    output_tokens: int


@dataclass
class OracleSettings:
    """How the oracle was trained to read activations (DIR/oracle.json; these defaults follow the
    activation-oracle convention: one ' ?' placeholder per vector, injected at layer 1)."""

    injection_layer: int = 1
    placeholder: str = " ?"
    template: str = "Layer: {layer}\n{placeholders} \n{question}"
    coefficient: float = 1.0


class Loaded:
    """A causal LM and its tokenizer, with the modules the hooks need."""

    def __init__(self, path: str | Path, device: str, dtype: str) -> None:
        from transformers import AutoModelForCausalLM, AutoTokenizer

        p = Path(path)
        if not (p / "config.json").is_file():
            raise ProtocolError(f"{p}: not a Hugging Face checkpoint directory (no config.json)", "internal")
        self.path = p
        self.tokenizer: Any = AutoTokenizer.from_pretrained(str(p), local_files_only=True)
        torch_dtype: Any = _dtype(dtype, device)
        model = cast(Any, AutoModelForCausalLM.from_pretrained(str(p), local_files_only=True, dtype=torch_dtype))
        self.model: Any = model.to(torch.device(device)).eval()
        self.device = torch.device(device)
        self.layers = _decoder_layers(self.model)
        self.final_norm = _final_norm(self.model)
        self.unembed = self.model.get_output_embeddings()
        self.pad_id = next(i for i in (self.tokenizer.pad_token_id, self.tokenizer.eos_token_id, 0) if i is not None)
        eos = self.model.generation_config.eos_token_id
        self.stop_ids = {int(e) for e in (eos if isinstance(eos, list) else [eos]) if e is not None}
        if self.tokenizer.eos_token_id is not None:
            self.stop_ids.add(int(self.tokenizer.eos_token_id))
        self._cache_kw = "cache" if "cache" in inspect.signature(self.model.forward).parameters else "past_key_values"

    @property
    def hidden_size(self) -> int:
        return int(self.model.get_input_embeddings().weight.shape[1])

    def check_layer(self, layer: int, what: str = "layer") -> None:
        if not 0 <= layer < len(self.layers):
            raise ProtocolError(f"`{what}` {layer} is out of range: the model has layers 0..{len(self.layers) - 1}")

    # ---------------------------------------------------------------- tokens

    def tokenize(self, inp: Input) -> tuple[list[int], int]:
        """The input's token ids and the first position after its system prompt (0 without one)."""
        if inp.prompt is not None:
            return self._encode(inp.prompt, special=True), 0
        ids = self._encode(self._render(inp.messages or (), inp), special=False)
        if inp.system is None:
            return ids, 0
        # The part after the system prompt renders the same without it: the common suffix is that part.
        # A junction that tokenizes differently only shortens the suffix (fewer positions shown, never
        # a system prompt token).
        rest = (
            self._encode(self._render((inp.messages or ())[1:], inp), special=False)
            if len(inp.messages or ()) > 1
            else []
        )
        n = 0
        while n < min(len(ids), len(rest)) and ids[-1 - n] == rest[-1 - n]:
            n += 1
        return ids, len(ids) - n

    def _render(self, turns: tuple[tuple[str, str], ...] | Any, inp: Input) -> str:
        if getattr(self.tokenizer, "chat_template", None) is None:
            raise ProtocolError(f"{self.path}: the tokenizer has no chat template; send a raw `prompt` instead")
        text = self.tokenizer.apply_chat_template(
            [{"role": r, "content": c} for r, c in turns],
            tokenize=False,
            add_generation_prompt=inp.add_generation_prompt,
            continue_final_message=inp.continue_final_message,
        )
        return str(text)

    def _encode(self, text: str, special: bool) -> list[int]:
        ids = list(self.tokenizer(text, add_special_tokens=special)["input_ids"])
        if not ids:
            raise ProtocolError("the input has no tokens")
        return ids

    def token_texts(self, ids: list[int]) -> list[str]:
        return [str(self.tokenizer.decode([i])) for i in ids]

    # ---------------------------------------------------------------- forward passes

    @contextmanager
    def hooks(self, hooks: Sequence[tuple[int, Hook]]) -> Iterator[None]:
        """Forward hooks on decoder layers: fn(layer output) -> replacement or None (read only)."""

        def wrap(fn: Hook) -> Callable[..., Any]:
            def hook(_module: nn.Module, _inputs: Any, output: Any) -> Any:
                hidden = output[0] if isinstance(output, tuple) else output
                new = fn(hidden)
                if new is None:
                    return None
                return (new, *output[1:]) if isinstance(output, tuple) else new

            return hook

        handles = [self.layers[layer].register_forward_hook(wrap(fn)) for layer, fn in hooks]
        try:
            yield
        finally:
            for h in handles:
                h.remove()

    @torch.no_grad()
    def residuals(self, ids_rows: list[list[int]], layers: list[int]) -> tuple[dict[int, torch.Tensor], torch.Tensor]:
        """Layer outputs [B, T, d] (left-padded rows) for `layers`, and the attention mask."""
        inp, mask, pos = self._batch(ids_rows)
        seen: dict[int, torch.Tensor] = {}

        def reader(layer: int) -> Callable[[torch.Tensor], None]:
            def read(h: torch.Tensor) -> None:
                seen[layer] = h.detach()

            return read

        with self.hooks([(layer, reader(layer)) for layer in sorted(set(layers))]):
            self.model(input_ids=inp, attention_mask=mask, position_ids=pos, use_cache=False)
        return seen, mask

    def lens_logits(self, hidden: torch.Tensor) -> torch.Tensor:
        """The logit lens: the final norm and the unembedding applied to a layer's output."""
        return self.unembed(self.final_norm(hidden)).float()

    def _batch(self, rows: list[list[int]]) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        width = max(len(r) for r in rows)
        ids = torch.tensor([[self.pad_id] * (width - len(r)) + r for r in rows], device=self.device)
        mask = torch.tensor([[0] * (width - len(r)) + [1] * len(r) for r in rows], device=self.device)
        pos = (mask.cumsum(-1) - 1).clamp(min=0)
        return ids, mask, pos

    # ---------------------------------------------------------------- decoding

    @torch.no_grad()
    def generate(self, rows: list[GenRow], inject_layer: int = 0, inject_coefficient: float = 1.0) -> list[Generated]:
        """Decode every row together (left padding, one KV cache), each with its own sampling and seed."""
        ids, mask, pos = self._batch([r.ids for r in rows])
        width = ids.shape[1]
        hooks = self._steering_hooks(rows)
        if any(r.inject is not None for r in rows):
            hooks.append((inject_layer, self._injection_hook(rows, width, inject_coefficient)))
        gens = [_generator(r.sampling.seed, self.device) for r in rows]
        limit = [r.sampling.max_tokens for r in rows]
        out: list[list[int]] = [[] for _ in rows]
        done = [False] * len(rows)
        reason = ["length"] * len(rows)
        cache: Any = None
        step_ids = ids
        with self.hooks(hooks):
            while not all(done):
                kwargs = {self._cache_kw: cache} if cache is not None else {}
                res = self.model(input_ids=step_ids, attention_mask=mask, position_ids=pos, use_cache=True, **kwargs)
                cache = getattr(res, "cache", None) or getattr(res, "past_key_values", None)
                logits = res.logits[:, -1, :].float()
                nxt = []
                for b, row in enumerate(rows):
                    if done[b]:
                        nxt.append(self.pad_id)
                        continue
                    tok = _pick(logits[b], row.sampling, gens[b])
                    if tok in self.stop_ids:
                        done[b], reason[b] = True, "stop"
                    else:
                        out[b].append(tok)
                        done[b] = len(out[b]) >= limit[b]
                    nxt.append(tok)
                step_ids = torch.tensor(nxt, device=self.device)[:, None]
                mask = torch.cat([mask, torch.ones_like(mask[:, :1])], dim=1)
                pos = pos[:, -1:] + 1
        return [
            Generated(str(self.tokenizer.decode(o, skip_special_tokens=True)), reason[b], len(rows[b].ids), len(o))
            for b, o in enumerate(out)
        ]

    def _steering_hooks(self, rows: list[GenRow]) -> list[tuple[int, Hook]]:
        """One hook per steered layer adding each row's own delta (zero for rows not steered there) at
        every position: a coefficient of 0 adds exact zeros, so it decodes exactly like no steering."""
        layers = sorted({layer for r in rows for layer, _ in r.steering})
        hooks: list[tuple[int, Hook]] = []
        for layer in layers:
            delta = torch.zeros(len(rows), self.hidden_size, device=self.device)
            for b, r in enumerate(rows):
                for at, vec in r.steering:
                    if at == layer:
                        delta[b] += vec.to(self.device)

            def add(h: torch.Tensor, delta: torch.Tensor = delta) -> torch.Tensor:
                return h + delta[:, None, :].to(h.dtype)

            hooks.append((layer, add))
        return hooks

    def _injection_hook(
        self, rows: list[GenRow], width: int, coefficient: float
    ) -> Callable[[torch.Tensor], torch.Tensor | None]:
        """Activation-oracle injection on the prompt pass: at each row's placeholder, add the vector
        scaled to the norm of the activation already there (norm-matched addition)."""

        def inject(h: torch.Tensor) -> torch.Tensor | None:
            if h.shape[1] <= 1:  # decoding steps: the prompt already holds the injected state
                return None
            h = h.clone()
            for b, r in enumerate(rows):
                if r.inject is None:
                    continue
                p = width - len(r.ids) + r.inject[0]  # left padding shifts the row
                v = r.inject[1].to(h.device, torch.float32)
                orig = h[b, p].float()
                h[b, p] = (orig + nn.functional.normalize(v, dim=-1) * orig.norm() * coefficient).to(h.dtype)
            return h

        return inject


def _pick(logits: torch.Tensor, s: Sampling, gen: torch.Generator) -> int:
    if s.temperature <= 0:
        return int(logits.argmax())
    probs = torch.softmax(logits / s.temperature, dim=-1)
    if s.top_p < 1.0:
        sorted_p, order = probs.sort(descending=True)
        keep = sorted_p.cumsum(-1) - sorted_p < s.top_p  # the smallest prefix reaching top_p (first always kept)
        probs = torch.zeros_like(probs).scatter(-1, order[keep], sorted_p[keep])
    return int(torch.multinomial(probs, 1, generator=gen))


def _generator(seed: int | None, device: torch.device) -> torch.Generator:
    g = torch.Generator(device=device)
    g.manual_seed(seed if seed is not None else random.SystemRandom().randrange(2**63))
    return g


def _dtype(name: str, device: str) -> torch.dtype | str:
    if name == "auto":
        return "auto" if device.startswith("cuda") else torch.float32
    try:
        return {"float32": torch.float32, "float16": torch.float16, "bfloat16": torch.bfloat16}[name]
    except KeyError:
        raise ProtocolError(f"--dtype {name}: use auto, float32, float16 or bfloat16", "internal") from None


def _decoder_layers(model: Any) -> nn.ModuleList:
    base = model.get_decoder() if hasattr(model, "get_decoder") else model
    for owner in (base, getattr(base, "model", None), getattr(model, "transformer", None)):
        for name in ("layers", "h", "block"):
            mods = getattr(owner, name, None) if owner is not None else None
            if isinstance(mods, nn.ModuleList) and len(mods):
                return mods
    raise ProtocolError(
        f"{type(model).__name__}: cannot find its decoder layers (model.layers / transformer.h)", "internal"
    )


def _final_norm(model: Any) -> nn.Module:
    base = model.get_decoder() if hasattr(model, "get_decoder") else model
    for owner in (base, getattr(model, "transformer", None)):
        for name in ("norm", "ln_f", "final_layer_norm"):
            mod = getattr(owner, name, None) if owner is not None else None
            if isinstance(mod, nn.Module):
                return mod
    raise ProtocolError(f"{type(model).__name__}: cannot find its final norm (norm / ln_f)", "internal")


def load_oracle_settings(path: Path) -> OracleSettings:
    file = path / ORACLE_CONFIG
    if not file.is_file():
        return OracleSettings()
    try:
        raw = json.loads(file.read_text(encoding="utf-8"))
        return OracleSettings(**raw)
    except (ValueError, TypeError) as e:
        raise ProtocolError(
            f"{file}: expected {{injection_layer, placeholder, template, coefficient}} ({e})", "internal"
        ) from None


@dataclass
class Runner:
    """The target (and optionally an SAE and an oracle model) the server answers for."""

    target: Loaded
    sae: SparseAutoencoder | None = None
    oracle: Loaded | None = None
    oracle_settings: OracleSettings = field(default_factory=OracleSettings)
    vectors: dict[str, tuple[int, torch.Tensor]] = field(default_factory=dict)  # name -> (layer, vector)

    @classmethod
    def load(
        cls,
        model: str | Path,
        sae: str | Path | None = None,
        oracle: str | Path | None = None,
        device: str = "auto",
        dtype: str = "auto",
    ) -> Runner:
        dev = ("cuda" if torch.cuda.is_available() else "cpu") if device == "auto" else device
        target = Loaded(model, dev, dtype)
        runner = cls(target)
        if sae is not None:
            runner.sae = load_sae(sae).to(dev)
            if runner.sae.d_in != target.hidden_size:
                raise ProtocolError(
                    f"{sae}: the SAE reads {runner.sae.d_in}-dim vectors, the model's are {target.hidden_size}",
                    "internal",
                )
            target.check_layer(runner.sae.layer, "SAE layer")
        if oracle is not None:
            runner.oracle = Loaded(oracle, dev, dtype)
            runner.oracle_settings = load_oracle_settings(Path(oracle))
            if runner.oracle.hidden_size != target.hidden_size:
                raise ProtocolError(
                    f"{oracle}: the oracle's hidden size {runner.oracle.hidden_size} differs from the model's "
                    f"{target.hidden_size} (an activation oracle is trained on its target's activations)",
                    "internal",
                )
            runner.oracle.check_layer(runner.oracle_settings.injection_layer, "oracle.json injection_layer")
        return runner

    def info(self) -> dict[str, Any]:
        t = self.target
        return {
            "model": t.path.name,
            "layers": len(t.layers),
            "hidden_size": t.hidden_size,
            "vocab_size": int(t.unembed.weight.shape[0]),
            "device": str(t.device),
            "dtype": str(next(t.model.parameters()).dtype).removeprefix("torch."),
            "chat_template": getattr(t.tokenizer, "chat_template", None) is not None,
            "sae": self.sae.info() if self.sae else None,
            "oracle": {"model": self.oracle.path.name, **vars(self.oracle_settings)} if self.oracle else None,
            "vectors": {
                name: {"layer": layer, "norm": round(float(v.norm()), 6)} for name, (layer, v) in self.vectors.items()
            },
        }

    def steering(self, s: Steering | None) -> list[tuple[int, torch.Tensor]]:
        if s is None:
            return []
        self.target.check_layer(s.layer, "steering.layer")
        if isinstance(s.vector, str):
            if s.vector not in self.vectors:
                raise ProtocolError(
                    f"no steering vector named {s.vector!r}: build it with steering_vectors first", "unknown_vector"
                )
            vec = self.vectors[s.vector][1]
        else:
            vec = torch.tensor(s.vector, dtype=torch.float32)
        if vec.shape[0] != self.target.hidden_size:
            raise ProtocolError(
                f"the steering vector has {vec.shape[0]} values; the model's hidden size is {self.target.hidden_size}"
            )
        return [(s.layer, s.coefficient * vec)]
