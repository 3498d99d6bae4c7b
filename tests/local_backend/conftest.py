"""Fixtures for the local backend: a tiny random-weight Llama (fast) and the real SmolLM2 (loaded once)."""

from __future__ import annotations

import os
from typing import Any

import pytest
import torch

os.environ.setdefault("HF_HUB_OFFLINE", "1")

from prefixgate.local_backend.engine import LLM  # noqa: E402
from prefixgate.local_backend.model_loader import LoadedModel, load_model  # noqa: E402

CHAT_TEMPLATE = (
    "{% for m in messages %}<|im_start|>{{ m['role'] }}\n{{ m['content'] }}<|im_end|>\n{% endfor %}"
    "{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}"
)


def tiny_tokenizer() -> Any:
    """Byte-level BPE with no merges: one token per byte, plus ChatML's special tokens."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers
    from transformers import PreTrainedTokenizerFast

    alphabet = sorted(pre_tokenizers.ByteLevel.alphabet())
    tok = Tokenizer(models.BPE(vocab={c: i for i, c in enumerate(alphabet)}, merges=[]))
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    tok.add_special_tokens(["<|endoftext|>", "<|im_start|>", "<|im_end|>"])
    return PreTrainedTokenizerFast(tokenizer_object=tok, eos_token="<|im_end|>", bos_token="<|im_start|>",
                                   pad_token="<|endoftext|>", chat_template=CHAT_TEMPLATE)


def tiny_llama(seed: int = 0, **overrides: Any) -> tuple[LoadedModel, Any]:
    """A 2-layer GQA Llama with random weights, and the transformers model holding the same weights."""
    from transformers import LlamaConfig, LlamaForCausalLM

    tokenizer = tiny_tokenizer()
    cfg = dict(vocab_size=len(tokenizer), hidden_size=64, intermediate_size=128, num_hidden_layers=2,
               num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=1024,
               rms_norm_eps=1e-5, tie_word_embeddings=True, eos_token_id=tokenizer.eos_token_id,
               bos_token_id=tokenizer.bos_token_id, pad_token_id=tokenizer.pad_token_id)
    cfg.update(overrides)
    config = LlamaConfig(**cfg)
    torch.manual_seed(seed)
    ref = LlamaForCausalLM(config).eval()
    with torch.no_grad():  # default init is tiny; larger weights make logits (and ties) less degenerate
        for p in ref.parameters():
            if p.dim() == 2:
                p.normal_(0, 0.2)
    weights = {k.removeprefix("model."): v.clone() for k, v in ref.state_dict().items()}
    if config.tie_word_embeddings:
        weights.pop("lm_head.weight", None)
    return LoadedModel("tiny-llama", None, config, tokenizer, weights), ref


@pytest.fixture(autouse=True)
def one_cpu_thread():  # noqa: ANN201
    """One torch thread for these tests: on a small machine busy with other work, two threads waiting on each
    other's OpenMP barriers make the real-model tests many times slower, and no less correct."""
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(before)


@pytest.fixture(scope="session")
def tiny() -> tuple[LoadedModel, Any]:
    return tiny_llama()


@pytest.fixture
def make_llm(tiny: tuple[LoadedModel, Any]):  # noqa: ANN201 - factory
    def make(**options: Any) -> LLM:
        options.setdefault("max_num_batched_tokens", 64)
        # API behaviour is tested on exact values (top-k sets, logprobs); bfloat16 ties would blur them.
        options.setdefault("dtype", "float32")
        return LLM("tiny-llama", loaded=tiny[0], **options)
    return make


@pytest.fixture(scope="session")
def smollm2() -> LoadedModel:
    return load_model("smollm2-135m")
