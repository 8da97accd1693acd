"""The reference server's model side on a tiny random-weight Llama built in-process: steering,
batched decoding, logit lens, SAE features, steering vectors and the activation oracle, each checked
against a direct computation (the model's own hidden states and logits, the SAE's saved weights)."""

from __future__ import annotations

import json

import pytest
import torch

from benchctl.internals import operations as ops
from benchctl.internals.protocol import Input, ProtocolError, Sampling, Steering, chat
from benchctl.internals.runner import GenRow
from benchctl.internals.sae import SaeError, load_sae
from tests.rigs.internals import chat_input, runner, tiny, weights  # noqa: F401

SAMPLED = Sampling(max_tokens=12, temperature=1.0, top_p=1.0, seed=11)


def hidden_states(r, ids):
    """The model's own hidden states: [i + 1] is decoder layer i's output (the last one is normed)."""
    with torch.no_grad():
        out = r.target.model(input_ids=torch.tensor([ids]), output_hidden_states=True)
    return out.hidden_states, out.logits[0]


def test_steering_at_zero_is_exactly_unsteered_and_a_large_coefficient_changes_it(runner):
    ids, _ = runner.target.tokenize(chat_input())
    vec = torch.randn(runner.target.hidden_size, generator=torch.Generator().manual_seed(3))
    rows = [
        GenRow(ids, SAMPLED),
        GenRow(ids, SAMPLED, runner.steering(Steering(tuple(vec.tolist()), 1, 0.0))),
        GenRow(ids, SAMPLED, runner.steering(Steering(tuple(vec.tolist()), 1, 8.0))),
    ]
    plain, zero, strong = runner.target.generate(rows)
    assert plain.output_tokens == 12 and plain.text  # sampled at temperature 1 with one seed
    assert zero.text == plain.text  # exact: the hook adds exact zeros
    assert strong.text != plain.text
    # the unsteered row decoded alone equals the batched one: batching is invisible
    (alone,) = runner.target.generate([GenRow(ids, SAMPLED)])
    assert alone.text == plain.text


def test_rows_of_different_lengths_decode_as_they_would_alone(runner):
    greedy = Sampling(max_tokens=6, temperature=0.0, top_p=1.0, seed=None)
    a, _ = runner.target.tokenize(Input(prompt="Hello world! Tell me about yourself."))
    b, _ = runner.target.tokenize(Input(prompt="Dear"))
    together = runner.target.generate([GenRow(a, greedy), GenRow(b, greedy)])
    alone = [runner.target.generate([GenRow(x, greedy)])[0] for x in (a, b)]
    assert [g.text for g in together] == [g.text for g in alone]
    assert [g.input_tokens for g in together] == [len(a), len(b)]


def test_system_end_is_the_first_position_after_the_system_prompt(runner):
    ids, end = runner.target.tokenize(chat_input())
    toks = runner.target.token_texts(ids)
    assert "".join(toks[:end]).endswith("The zebra is secret.<|end|>")
    assert toks[end] == "<|user|>" and "zebra" not in "".join(toks[end:])
    assert runner.target.tokenize(chat_input(system=None))[1] == 0


def test_logit_lens_one_row_per_layer_final_kl_zero_and_the_final_lens_is_the_models_output(runner):
    inp = chat_input()
    ids, end = runner.target.tokenize(inp)
    out = ops.logit_lens(runner, inp, None, 5, None)
    assert [row["layer"] for row in out["layers"]] == [0, 1, 2, 3]
    assert all(len(row["positions"]) == len(ids) for row in out["layers"])
    assert all(p["kl"] == 0.0 for p in out["layers"][-1]["positions"])
    assert any(p["kl"] > 0.01 for p in out["layers"][0]["positions"])
    hs, logits = hidden_states(runner, ids)
    probs = torch.softmax(logits.float(), -1)
    last = out["layers"][-1]["positions"]
    for pos in (0, len(ids) - 1):
        want = probs[pos].topk(5)
        assert [t["id"] for t in last[pos]["top"]] == want.indices.tolist()
        assert [t["prob"] for t in last[pos]["top"]] == pytest.approx(want.values.tolist(), abs=1e-5)
    # a middle layer: the final norm and the unembedding applied to that layer's own hidden state
    lens = runner.target.model.lm_head(runner.target.model.model.norm(hs[2][0]))
    assert [t["id"] for t in out["layers"][1]["positions"][3]["top"]] == lens[3].topk(5).indices.tolist()
    after = ops.logit_lens(runner, inp, [2], 3, "after_system")
    assert [p["position"] for p in after["layers"][0]["positions"]] == list(range(end, len(ids)))
    with pytest.raises(ProtocolError, match="out of range"):
        ops.logit_lens(runner, inp, [4], 3, None)


def test_sae_top_features_equal_a_direct_computation_from_the_saved_weights(runner, tiny):
    inp = chat_input()
    ids, _ = runner.target.tokenize(inp)
    out = ops.sae_features(runner, inp, None, 6, None)
    w = weights(tiny.sae / "sae_weights.safetensors")
    cfg = json.loads((tiny.sae / "cfg.json").read_text())
    layer = int(cfg["hook_name"].split(".")[1])
    hs, _ = hidden_states(runner, ids)
    acts = torch.relu((hs[layer + 1][0] - w["b_dec"]) @ w["W_enc"] + w["b_enc"])
    descriptions = json.loads((tiny.sae / "descriptions.json").read_text())
    assert out["layer"] == layer and len(out["positions"]) == len(ids)
    for pos, row in enumerate(out["positions"]):
        want = acts[pos].topk(6)
        got = row["features"]
        assert [f["id"] for f in got] == [i for i, v in zip(want.indices.tolist(), want.values.tolist()) if v > 0]
        assert [f["activation"] for f in got] == pytest.approx(want.values[: len(got)].tolist(), rel=1e-4)
        assert [f["description"] for f in got] == [descriptions.get(str(f["id"])) for f in got]
    with pytest.raises(ProtocolError, match="reads layer 2, not 1") as e:
        ops.sae_features(runner, inp, 1, 5, None)
    assert e.value.kind == "no_sae"


def test_steering_vector_is_the_mean_difference_at_the_last_token(runner):
    pos = chat([{"role": "user", "content": "Hello"}, {"role": "assistant", "content": "Honest answers"}])
    neg = chat([{"role": "user", "content": "Hello"}, {"role": "assistant", "content": "deceptive answers"}])
    raw_pos, raw_neg = Input(prompt="my secret"), Input(prompt="I'd be happy to help with that.")
    out = ops.build_vector(runner, "honesty-test", 1, [(pos, neg), (raw_pos, raw_neg)])
    diffs = []
    for a, b in ((pos, neg), (raw_pos, raw_neg)):
        ha, _ = hidden_states(runner, runner.target.tokenize(a)[0])
        hb, _ = hidden_states(runner, runner.target.tokenize(b)[0])
        diffs.append(ha[2][0, -1] - hb[2][0, -1])
    want = torch.stack(diffs).mean(0)
    layer, got = runner.vectors["honesty-test"]
    assert layer == 1 and torch.allclose(got, want, atol=1e-4)
    assert out["norm"] == pytest.approx(float(want.norm()), rel=1e-4) and out["pairs"] == 2
    # the continued assistant message ends the rendered chat: its own last token is read
    assert runner.target.token_texts(runner.target.tokenize(pos)[0])[-1] == " answers"


def test_oracle_answers_each_position_samples_times_reproducibly(runner):
    inp = chat_input()
    _, end = runner.target.tokenize(inp)
    s = Sampling(max_tokens=4, temperature=1.0, top_p=1.0, seed=5)
    out = ops.oracle(runner, inp, "Describe this text.", 1, [end, end + 1], 3, s, 8)
    assert [p["position"] for p in out["positions"]] == [end, end + 1]
    assert all(len(p["answers"]) == 3 for p in out["positions"])
    again = ops.oracle(runner, inp, "Describe this text.", 1, [end, end + 1], 3, s, 2)  # other batch size
    assert again["positions"] == out["positions"]
    assert out["usage"]["output_tokens"] > 0 and out["question"] == "Describe this text."


def test_oracle_injection_changes_what_the_oracle_says(runner):
    o, cfg = runner.oracle, runner.oracle_settings
    ids, _ = o.tokenize(
        chat([{"role": "user", "content": cfg.template.format(layer=1, placeholders=cfg.placeholder, question="Q")}])
    )
    slot = ids.index(o.tokenizer(cfg.placeholder, add_special_tokens=False)["input_ids"][0])
    greedy = Sampling(max_tokens=6, temperature=0.0, top_p=1.0, seed=None)
    g = torch.Generator().manual_seed(1)
    rows = [GenRow(ids, greedy)] + [
        GenRow(ids, greedy, inject=(slot, torch.randn(32, generator=g) * 5)) for _ in range(6)
    ]
    plain, *injected = o.generate(rows, cfg.injection_layer, cfg.coefficient)
    assert any(x.text != plain.text for x in injected)


def test_sae_loader_reads_goodfire_names_and_topk_and_names_bad_files(tmp_path, tiny):
    from safetensors.torch import save_file

    w = weights(tiny.sae / "sae_weights.safetensors")
    d = tmp_path / "goodfire"
    d.mkdir()
    save_file(
        {
            "encoder_linear.weight": w["W_enc"].T.contiguous(),
            "encoder_linear.bias": w["b_enc"],
            "decoder_linear.weight": w["W_dec"].T.contiguous(),
            "decoder_linear.bias": w["b_dec"],
        },
        str(d / "sae_weights.safetensors"),
    )
    (d / "cfg.json").write_text(json.dumps({"layer": 2, "activation_fn": "topk", "activation_fn_kwargs": {"k": 3}}))
    sae = load_sae(d)
    x = torch.randn(5, 32)
    acts = sae.encode(x)
    assert sae.layer == 2 and ((acts > 0).sum(-1) <= 3).all()
    assert torch.allclose(acts.max(-1).values, torch.relu(x @ w["W_enc"] + w["b_enc"]).max(-1).values)
    with pytest.raises(SaeError, match="not an SAE directory"):
        load_sae(tmp_path)
    (d / "cfg.json").write_text(json.dumps({"activation_fn": "relu"}))
    with pytest.raises(SaeError, match='no layer: set "layer"'):
        load_sae(d)


def test_a_gpt2_style_checkpoint_is_served_too(tmp_path):
    """Decoder layers at transformer.h (tuple outputs), the final norm ln_f, learned positions."""
    from transformers import AutoTokenizer, GPT2Config, GPT2LMHeadModel

    from benchctl.internals.runner import Runner
    from benchctl.internals.tiny import build_tokenizer

    build_tokenizer(tmp_path)
    tok = AutoTokenizer.from_pretrained(str(tmp_path), local_files_only=True)
    torch.manual_seed(0)
    config = GPT2Config(vocab_size=len(tok), n_embd=32, n_layer=3, n_head=4, n_positions=256)
    GPT2LMHeadModel(config).save_pretrained(str(tmp_path))
    r = Runner.load(tmp_path, device="cpu")
    inp = chat_input()
    ids, _ = r.target.tokenize(inp)
    lens = ops.logit_lens(r, inp, None, 3, [len(ids) - 1])
    with torch.no_grad():
        logits = r.target.model(input_ids=torch.tensor([ids])).logits[0, -1]
    assert [row["layer"] for row in lens["layers"]] == [0, 1, 2]
    assert lens["layers"][-1]["positions"][0]["top"][0]["id"] == int(logits.argmax())
    greedy = Sampling(max_tokens=5, temperature=0.0, top_p=1.0, seed=None)
    together = r.target.generate([GenRow(ids, greedy), GenRow(ids[:4], greedy)])
    assert together[1].text == r.target.generate([GenRow(ids[:4], greedy)])[0].text
