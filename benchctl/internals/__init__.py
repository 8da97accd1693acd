"""White-box access to a target model: the internals protocol, its client and its servers.

A hidden-behaviour task's `[target] internals = "URL or NAME"` points at a server that speaks the
internals protocol (HTTP + JSON, docs/internals.md): generation with optional steering, steering
vectors built from contrastive pairs, logit lens, sparse-autoencoder features and an activation
oracle. The investigator's white-box tools (benchctl/targets/whitebox.py) call it host-side, like
every target call: the sandbox never reaches it.

protocol.py  paths, the shape of an input (a raw prompt or chat messages), request validation,
             the error body: what the client, the reference server and the fake share
client.py    InternalsClient: one call per operation, retries, limits, latency and compute time
server.py    the reference server (`benchctl internals serve`): an ASGI app around a model runner,
             requests queued and batched on one worker thread; it also serves the OpenAI-compatible
             chat and completions subset the black-box tools send, so one server is the whole target
handlers.py  request bodies -> runner calls -> answers, per operation (on the server's worker thread)
runner.py    the model side (torch + transformers, the optional `internals` extra): plain forward
             hooks for steering, activation reads and oracle injection; batched decoding
sae.py       sparse autoencoders loaded from disk (SAELens layout)
tiny.py      a tiny random-weight model, tokenizer, SAE and oracle built in-process (tests, checks)
The fake server with fault injection is benchctl/testing/fake_internals.py.
"""
