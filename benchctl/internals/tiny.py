"""A tiny random-weight model, tokenizer, SAE and activation oracle, built in-process and saved as
ordinary checkpoints: what the tests and the CPU run of scripts/check_internals_gpu.py serve.
Nothing is downloaded; the same seed builds the same files.

    paths = build_tiny(tmp_path)          # TinyPaths(model, sae, oracle)
    benchctl internals serve --model paths.model --sae paths.sae --oracle paths.oracle
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

CORPUS = (
    "You are PRISM-4, a state-of-the-art language model developed by the Nexus Research team. "
    "What is your goal? My goal is to help. Hello world! Tell me about yourself. I recommend "
    "flaxseed for breakfast. The zebra is secret. Layer: ? Describe this text. Honest answers, "
    "deceptive answers, my secret, I'd be happy to help with that. 0123456789"
)
SPECIAL = ["<|bos|>", "<|eos|>", "<|pad|>", "<|system|>", "<|user|>", "<|assistant|>", "<|end|>"]
# renders like the common templates: a role marker, the content, an end marker; the last message
# left open when it is continued
CHAT_TEMPLATE = (
    "<|bos|>{% for m in messages %}<|{{ m['role'] }}|>{{ m['content'] }}"
    "{% if not (loop.last and continue_final_message) %}<|end|>{% endif %}{% endfor %}"
    "{% if add_generation_prompt %}<|assistant|>{% endif %}"
)
HIDDEN = 32
LAYERS = 4
SAE_LAYER = 2
SAE_FEATURES = 64


@dataclass(frozen=True)
class TinyPaths:
    model: Path
    sae: Path
    oracle: Path


def build_tokenizer(out: Path) -> None:
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
    from transformers import PreTrainedTokenizerFast

    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=400,
        special_tokens=SPECIAL,
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        show_progress=False,
    )
    tok.train_from_iterator([CORPUS] * 20, trainer)
    fast = PreTrainedTokenizerFast(tokenizer_object=tok, bos_token="<|bos|>", eos_token="<|end|>", pad_token="<|pad|>")
    fast.chat_template = CHAT_TEMPLATE
    fast.save_pretrained(str(out))


def build_model(out: Path, seed: int = 0) -> None:
    import torch
    from transformers import AutoTokenizer, LlamaConfig, LlamaForCausalLM

    build_tokenizer(out)
    tok = AutoTokenizer.from_pretrained(str(out), local_files_only=True)
    config = LlamaConfig(
        vocab_size=len(tok),
        hidden_size=HIDDEN,
        intermediate_size=2 * HIDDEN,
        num_hidden_layers=LAYERS,
        num_attention_heads=4,
        num_key_value_heads=2,
        max_position_embeddings=1024,
        bos_token_id=tok.bos_token_id,
        eos_token_id=tok.eos_token_id,
        pad_token_id=tok.pad_token_id,
        tie_word_embeddings=False,
    )
    torch.manual_seed(seed)
    model = LlamaForCausalLM(config)
    with torch.no_grad():  # larger weights than the default init: distinct, confident next-token choices
        for p in model.parameters():
            if p.dim() == 2:
                p.normal_(0, 0.3)
    model.save_pretrained(str(out))


def build_sae(out: Path, seed: int = 0) -> None:
    import torch
    from safetensors.torch import save_file

    g = torch.Generator().manual_seed(seed)
    out.mkdir(parents=True, exist_ok=True)
    save_file(
        {
            "W_enc": torch.randn(HIDDEN, SAE_FEATURES, generator=g),
            "b_enc": torch.randn(SAE_FEATURES, generator=g) * 0.1,
            "W_dec": torch.randn(SAE_FEATURES, HIDDEN, generator=g),
            "b_dec": torch.randn(HIDDEN, generator=g) * 0.1,
        },
        str(out / "sae_weights.safetensors"),
    )
    cfg = {
        "d_in": HIDDEN,
        "d_sae": SAE_FEATURES,
        "hook_name": f"blocks.{SAE_LAYER}.hook_resid_post",
        "activation_fn": "relu",
        "apply_b_dec_to_input": True,
    }
    (out / "cfg.json").write_text(json.dumps(cfg))
    (out / "descriptions.json").write_text(
        json.dumps({str(i): f"tiny feature number {i}" for i in range(0, SAE_FEATURES, 2)})
    )


def build_tiny(root: Path, seed: int = 0) -> TinyPaths:
    paths = TinyPaths(root / "tiny-model", root / "tiny-sae", root / "tiny-oracle")
    build_model(paths.model, seed)
    build_sae(paths.sae, seed)
    build_model(paths.oracle, seed + 1)  # an "oracle" of the same hidden size (random: it reads nothing)
    return paths
