"""A tiny random chat model built locally (no downloads) for engine, serving and fine-tuning tests.

Llama architecture, ~230K parameters, head_dim 32; a byte-level BPE tokenizer trained on a small corpus
that looks like the benchmark's prompts, with ChatML special tokens, a Jinja chat template and a pad token.
"""

from __future__ import annotations

import random
from pathlib import Path

CHAT_TEMPLATE = (
    "{% for message in messages %}"
    "{{ '<|im_start|>' + message['role'] + '\\n' + message['content'] + '<|im_end|>' + '\\n' }}"
    "{% endfor %}"
    "{% if add_generation_prompt %}{{ '<|im_start|>assistant\\n' }}{% endif %}"
)
SPECIAL_TOKENS = ("<|endoftext|>", "<|im_start|>", "<|im_end|>")

_WORDS = (
    "act as a personalized product recommender system below is list of user rating history shown in "
    "your task to predict the for query item which described details analyze each preferences based on "
    "their historical ratings generate prediction output predicted ranging from 1 5 where being not "
    "recommended and highly final answer should strictly follow this json structure do anything else "
    "pair users with determine more likely prefer its using group accompanied rank these preference "
    "indices e g ranked highest lowest most preferred least adhere format title author profile common "
    "average book novel story great love kitchen pan shoes size fit battery cable phone quality cheap "
    "broke returned recommend gift daughter son wife husband classic mystery romance fantasy science"
).split()
_MARKUP = (
    "[User History]",
    "[Query Item Details]",
    "[User A]",
    "[User B]",
    "[Users]",
    "<|The Start of User Data|>",
    "<|The End of User Data|>",
    "<|The Start of Query Item Information|>",
    "<|The End of Query Item Information|>",
    "### Item Title",
    "### Item Author",
    "### User Rating",
    '{"predicted_rating": 4.0}',
    '{"predicted_ranking": [2, 1, 3]}',
    "Answer:",
)


def _corpus(seed: int, lines: int = 400) -> list[str]:
    rng = random.Random(seed)
    corpus = []
    for _ in range(lines):
        words = rng.choices(_WORDS, k=rng.randint(5, 25))
        words.insert(rng.randrange(len(words) + 1), rng.choice(_MARKUP))
        words.append(f"{rng.randint(1, 5)}.{rng.randint(0, 9)}")
        corpus.append(" ".join(words))
    return corpus


def build_tiny_chat_model(path: str | Path, *, seed: int = 0, vocab_size: int = 1024) -> Path:
    """Build and save a tiny random Llama chat model with its tokenizer into `path`.

    Args:
        path: output folder (created).
        seed: seeds the weights and the tokenizer corpus: same seed, same model.
        vocab_size: BPE vocabulary size (including byte and special tokens).

    Returns:
        `path`, loadable with ``AutoModelForCausalLM``/``AutoTokenizer.from_pretrained``.
    """
    import torch
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
    from transformers import GenerationConfig, LlamaConfig, LlamaForCausalLM, PreTrainedTokenizerFast

    path = Path(path)
    path.mkdir(parents=True, exist_ok=True)

    bpe = Tokenizer(models.BPE())
    bpe.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    bpe.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=vocab_size,
        special_tokens=list(SPECIAL_TOKENS),
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        show_progress=False,
    )
    bpe.train_from_iterator(_corpus(seed), trainer=trainer)
    tokenizer = PreTrainedTokenizerFast(
        tokenizer_object=bpe,
        eos_token="<|im_end|>",
        pad_token="<|endoftext|>",
        additional_special_tokens=["<|im_start|>"],
    )
    tokenizer.chat_template = CHAT_TEMPLATE
    tokenizer.save_pretrained(path)

    config = LlamaConfig(
        vocab_size=len(tokenizer),
        hidden_size=64,
        intermediate_size=256,
        num_hidden_layers=3,
        num_attention_heads=2,
        num_key_value_heads=1,
        head_dim=32,
        max_position_embeddings=4096,
        tie_word_embeddings=False,
        bos_token_id=None,
        eos_token_id=tokenizer.eos_token_id,
        pad_token_id=tokenizer.pad_token_id,
    )
    torch.manual_seed(seed)
    model = LlamaForCausalLM(config)
    # Default init gives near-uniform logits; a wider output layer keeps greedy decoding clear of near-ties
    # while sampling at temperature 1 still varies.
    with torch.no_grad():
        model.lm_head.weight.normal_(0.0, 0.3)
    model.generation_config = GenerationConfig(
        eos_token_id=config.eos_token_id, pad_token_id=config.pad_token_id
    )
    model.save_pretrained(path)
    return path


def parameter_count(path: str | Path) -> int:
    """Number of parameters of the saved model (for sanity checks)."""
    from transformers import AutoModelForCausalLM

    model = AutoModelForCausalLM.from_pretrained(path)
    return sum(parameter.numel() for parameter in model.parameters())


__all__ = ["CHAT_TEMPLATE", "SPECIAL_TOKENS", "build_tiny_chat_model", "parameter_count"]
