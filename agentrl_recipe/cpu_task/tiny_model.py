"""A tiny Qwen model and tokenizer, built offline in seconds, for tests and the CPU demo.

Two families, chosen by :attr:`TinyModelSpec.family`:
- ``qwen3`` (the default, the paper's 4B run): ``Qwen3ForCausalLM`` (per-head ``q_norm``/``k_norm``, no qkv bias,
  tied embeddings, GQA) with the Qwen3-2507 Instruct chat template (Qwen/Qwen3-4B-Instruct-2507's own);
- ``qwen2.5`` (the 7B run): ``Qwen2ForCausalLM`` (qkv bias) with the Qwen2.5 hermes template.

Nothing is downloaded: the byte-level BPE tokenizer is trained locally with ``tokenizers`` on generated text
(math, Python, hermes tool calls, chat prose), and the causal LM is randomly initialised with a fixed seed.

Two details keep it faithful to the real Qwen models the recipe trains:
- the tokenizer uses Qwen's own normaliser (NFC) and split regex (single digits), because transformers 5 rebuilds
  any ``qwen2``/``qwen3`` tokenizer as ``Qwen2Tokenizer`` from vocab + merges — a plain GPT-2 pre-tokenizer would
  then tokenise differently from the file it was saved as;
- Qwen's ChatML special tokens and its non-special ``<tool_call>``/``<tool_response>``/``<think>`` tokens exist, with
  the roles they have in Qwen3 (eos ``<|im_end|>``, pad ``<|endoftext|>``), so verl's Qwen continuous-token builders
  and hermes parser work unchanged. The real 151,643-token vocabulary is :mod:`.qwen_vocab`'s.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import os
import random
from importlib import resources
from pathlib import Path
from typing import Any

from agentrl_recipe.atomic_io import build_dir_once

# Same pattern as transformers' Qwen2Tokenizer (PRETOKENIZE_REGEX); kept here so the builder does not depend on a
# private transformers constant.
QWEN2_SPLIT_REGEX = r"""(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+"""  # noqa: E501
SPECIAL_TOKENS = ["<|endoftext|>", "<|im_start|>", "<|im_end|>"]
# Non-special added tokens, as in Qwen2.5/Qwen3 (the hermes parser decodes with skip_special_tokens=False anyway).
TOOL_TOKENS = ["<tool_call>", "</tool_call>", "<tool_response>", "</tool_response>", "<think>", "</think>"]
EOS_TOKEN = "<|im_end|>"
PAD_TOKEN = "<|endoftext|>"
QWEN3 = "qwen3"
QWEN25 = "qwen2.5"
# The chat template each family ships with (agentrl_recipe/training/agent_loop/templates/):
# qwen3_2507_instruct.jinja is Qwen/Qwen3-4B-Instruct-2507's tokenizer_config.json chat_template (sources in
# tests/agentrl_recipe/training/agent_loop/templates/README.md); qwen25_hermes.jinja is Qwen2.5-Instruct's.
CHAT_TEMPLATE_FILES = {QWEN3: "qwen3_2507_instruct.jinja", QWEN25: "qwen25_hermes.jinja"}


@dataclasses.dataclass(frozen=True)
class TinyModelSpec:
    """Shape of the tiny model. The default is ~1M parameters and generates ~2k tokens/s on one CPU core."""

    family: str = QWEN3  # QWEN3 (Qwen3ForCausalLM + 2507 template) or QWEN25 (Qwen2ForCausalLM + Qwen2.5 template)
    vocab_size: int = 3000  # BPE merges target; the final vocab adds the special and tool tokens
    hidden_size: int = 128
    num_hidden_layers: int = 4
    num_attention_heads: int = 4
    num_key_value_heads: int = 2  # GQA, as in Qwen2.5 and Qwen3
    intermediate_size: int = 256
    max_position_embeddings: int = 8192
    corpus_lines: int = 14000
    seed: int = 0
    # Std of the random init (Hugging Face's default 0.02 is tuned for wide models; the demo's h128 model learns to copy
    # operands ~2x sooner at 0.06, see harness/demo_teacher.build_task_model).
    initializer_range: float = 0.02
    # Extra tokenizer-training text (the CPU demo adds its rendered conversations so its prompts tokenize short).
    extra_corpus: tuple[str, ...] = ()


def chat_template(family: str = QWEN3) -> str:
    """The chat template of ``family`` shipped with the package (hermes tool calls in both)."""
    if family not in CHAT_TEMPLATE_FILES:
        raise ValueError(f"unknown tiny model family {family!r}; known: {sorted(CHAT_TEMPLATE_FILES)}")
    templates = resources.files("agentrl_recipe.training.agent_loop.templates")
    return templates.joinpath(CHAT_TEMPLATE_FILES[family]).read_text()


def _corpus(n_lines: int, seed: int) -> list[str]:
    """Deterministic text covering what the recipe's prompts, tool calls and answers look like."""
    rng = random.Random(seed)
    words = (
        "the a of to and in is it that for you on with as are this be at or by from an have not we can what "
        "problem solve step answer final number sum product value compute find let code python tool result "
        "analyze following math strategy verify use calculate output print return def import total each "
        "integer positive remainder divided prime square root digits probability triangle area circle "
        "function input list string test case solution therefore so first then next because equals"
    ).split()
    ops = ["+", "-", "*", "//", "%", "**"]
    syllables = [c + v for c in "bcdfghklmnprstvwz" for v in "aeiou"] + ["th", "sh", "ch", "qu", "str", "ing", "ion"]
    lines: list[str] = []
    for i in range(n_lines):
        kind = i % 7
        a, b = rng.randint(0, 999), rng.randint(1, 99)
        op = rng.choice(ops)
        if kind == 0:
            lines.append(" ".join(rng.choice(words) for _ in range(rng.randint(5, 16))).capitalize() + ".")
        elif kind == 1:
            lines.append(f"What is {a} {op} {b}? The answer is \\boxed{{{a + b}}}.")
        elif kind == 2:
            var = rng.choice(["x", "n", "total", "result", "ans", "value"])
            lines.append(f"{var} = {a} {op} {b}\nprint({var})\n")
        elif kind == 3:
            code = json.dumps({"code": f"print({a} {op} {b})"})
            lines.append(f'<tool_call>\n{{"name": "code_interpreter", "arguments": {code}}}\n</tool_call>')
        elif kind == 4:
            lines.append(f"<tool_response>\n{a * b}\n</tool_response>")
        elif kind == 5:
            # pseudo-words give the BPE enough distinct merges to reach its target vocabulary
            lines.append(" ".join("".join(rng.choices(syllables, k=rng.randint(1, 4))) for _ in range(12)))
        else:
            fn = rng.choice(["solve", "count", "main", "f"])
            lines.append(f"def {fn}(n):\n    return sum(range(n)) % {b}\n\nimport math\nprint(math.sqrt({a}))")
    return lines


def build_tokenizer(spec: TinyModelSpec = TinyModelSpec()) -> Any:  # a transformers PreTrainedTokenizerFast
    """Train the byte-level BPE and wrap it as a transformers fast tokenizer with the chat template."""
    from tokenizers import Regex, Tokenizer, decoders, models, normalizers, pre_tokenizers, trainers
    from transformers import AddedToken, PreTrainedTokenizerFast

    raw = Tokenizer(models.BPE(unk_token=None, fuse_unk=False, byte_fallback=False))
    raw.normalizer = normalizers.NFC()
    raw.pre_tokenizer = pre_tokenizers.Sequence(
        [
            pre_tokenizers.Split(Regex(QWEN2_SPLIT_REGEX), behavior="isolated", invert=False),
            pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False),
        ]
    )
    raw.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=spec.vocab_size,
        special_tokens=SPECIAL_TOKENS,
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        show_progress=False,
    )
    raw.train_from_iterator([*_corpus(spec.corpus_lines, spec.seed), *spec.extra_corpus], trainer=trainer)
    tok = PreTrainedTokenizerFast(
        tokenizer_object=raw, eos_token=EOS_TOKEN, pad_token=PAD_TOKEN, clean_up_tokenization_spaces=False
    )
    tok.add_tokens([AddedToken(t, special=False, normalized=False) for t in TOOL_TOKENS])
    tok.chat_template = chat_template(spec.family)
    return tok


def build_tiny_model(out_dir: str | os.PathLike, spec: TinyModelSpec = TinyModelSpec()) -> Path:
    """Build tokenizer + random-init model of ``spec.family`` into ``out_dir`` (overwritten). Returns the path."""
    import torch
    from transformers import GenerationConfig

    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    tok = build_tokenizer(spec)
    eos_id = tok.convert_tokens_to_ids(EOS_TOKEN)
    pad_id = tok.convert_tokens_to_ids(PAD_TOKEN)
    config_cls, model_cls = _architecture(spec.family)
    config = config_cls(
        vocab_size=len(tok),
        hidden_size=spec.hidden_size,
        intermediate_size=spec.intermediate_size,
        num_hidden_layers=spec.num_hidden_layers,
        num_attention_heads=spec.num_attention_heads,
        num_key_value_heads=spec.num_key_value_heads,
        max_position_embeddings=spec.max_position_embeddings,
        tie_word_embeddings=True,
        initializer_range=spec.initializer_range,
        bos_token_id=None,
        eos_token_id=eos_id,
        pad_token_id=pad_id,
        **_family_config(spec),
    )
    torch.manual_seed(spec.seed)
    model = model_cls(config)
    model.generation_config = GenerationConfig(eos_token_id=eos_id, pad_token_id=pad_id, do_sample=True)
    model.save_pretrained(out)
    tok.save_pretrained(out)
    (out / "agentrl_tiny_spec.json").write_text(json.dumps(dataclasses.asdict(spec), indent=2))
    return out


def _architecture(family: str) -> tuple[Any, Any]:
    """(config class, causal LM class) of ``family``."""
    from transformers import Qwen2Config, Qwen2ForCausalLM, Qwen3Config, Qwen3ForCausalLM

    chat_template(family)  # fails on an unknown family
    return (Qwen3Config, Qwen3ForCausalLM) if family == QWEN3 else (Qwen2Config, Qwen2ForCausalLM)


def _family_config(spec: TinyModelSpec) -> dict[str, Any]:
    """What the family's real configs set beyond the shape (Qwen3-4B-Instruct-2507 / Qwen2.5-7B-Instruct)."""
    if spec.family == QWEN3:
        # Qwen3 states its head size (128 in the 4B, not hidden/heads) and has no qkv bias [Qwen3Config default].
        return {"head_dim": spec.hidden_size // spec.num_attention_heads, "attention_bias": False}
    return {}


def _cache_key(spec: TinyModelSpec) -> str:
    digest = hashlib.sha256()
    digest.update(Path(__file__).read_bytes())
    digest.update(chat_template(spec.family).encode())
    digest.update(json.dumps(dataclasses.asdict(spec), sort_keys=True).encode())
    import tokenizers
    import transformers

    digest.update(f"{tokenizers.__version__}/{transformers.__version__}".encode())
    return digest.hexdigest()[:16]


def cache_root() -> Path:
    return Path(os.environ.get("AGENTRL_CACHE", Path.home() / ".cache" / "agentrl_recipe"))


def get_tiny_model_dir(spec: TinyModelSpec = TinyModelSpec()) -> Path:
    """Return a cached build of the tiny model for ``spec``, building it (atomically) on first use."""
    target = cache_root() / f"tiny-{_cache_key(spec)}"
    return build_dir_once(target, "agentrl_tiny_spec.json", lambda staging: build_tiny_model(staging, spec))
