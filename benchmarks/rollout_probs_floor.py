"""The floor under ``training/rollout_probs_diff_max``: how far vLLM's sampling probabilities and the actor's
recomputation lie apart when both hold the same weights in fp32, and which kernels it comes from.

    .venv/bin/python benchmarks/rollout_probs_floor.py [--model DIR] [--data F] [--prompts 8] [--n 4]
                                                       [--max-tokens 160] [--seed 0] [--out F]

vLLM's CPU build (fp32, eager, the platform's rollout environment) samples ``--n`` first assistant turns per prompt at
temperature 1 and returns each sampled token's log-prob, as verl's server does for ``calculate_log_probs``. It runs
twice, each time in a fresh process: with the GEMM vLLM picks on CPU (oneDNN) and with torch's ``F.linear`` in its
place. The same tokens are then scored by Hugging Face in fp32 (``sdpa``, the actor's setting in ``agentrl_rl_cpu``,
and ``eager``), by vLLM's own prefill (prompt log-probs: the same weights, another attention path than decoding), and
by Hugging Face in fp64, the reference every fp32 stack is measured against.

Printed per pair: max |p_a - p_b| over all sampled tokens, the statistic verl logs as ``rollout_probs_diff_max``.
If the vLLM-vs-actor figure is no larger than each stack's distance to fp64, and swapping one kernel moves it only a
little, the gap is fp32 rounding spread over every op, not one op computing differently (or stale weights, which show
~1e-3). Without ``--model`` / ``--data`` it uses the CPU SFT export and the CPU RL validation set.
"""

from __future__ import annotations

import argparse
import multiprocessing
import os
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass
from pathlib import Path

import pandas as pd
import torch
from transformers import AutoModelForCausalLM, AutoTokenizer

from agentrl_recipe.eval.dump import atomic_write_json
from verl_cpu.platform import ROLLOUT_ENV_DEFAULTS

REPO = Path(__file__).resolve().parents[1]
SFT_EXPORT = REPO / "outputs/cpu/sft_checkpoints/global_step_150/huggingface"
RL_VAL = REPO / "outputs/cpu/rl_val.parquet"


@dataclass(frozen=True)
class Sample:
    prompt: list[int]
    response: list[int]
    decode_logprobs: list[float]  # as sampled (decoding)
    prefill_logprobs: list[float]  # the same tokens through vLLM's prefill


def _plain_linear(layer: torch.nn.Module, remove_weight: bool) -> None:
    layer.cpu_linear = lambda x, weight, bias: torch.nn.functional.linear(x, weight, bias)


def _sample_with_vllm(model: str, prompts: list[list[int]], n: int, max_tokens: int, seed: int, gemm: str):
    """In a fresh process: vLLM's engine in this process (so the GEMM swap reaches it), sample, then prefill."""
    os.environ.update({**ROLLOUT_ENV_DEFAULTS, "VLLM_ENABLE_V1_MULTIPROCESSING": "0"})
    import vllm.model_executor.layers.linear as linear  # heavy: only in the child
    import vllm.model_executor.layers.utils as layer_utils
    from vllm import LLM, SamplingParams

    if gemm == "torch":
        for module in (layer_utils, linear):
            if hasattr(module, "dispatch_cpu_unquantized_gemm"):
                module.dispatch_cpu_unquantized_gemm = _plain_linear
    llm = LLM(model, dtype="float32", enforce_eager=True, gpu_memory_utilization=0.05, seed=seed)
    sampling = SamplingParams(n=n, temperature=1.0, max_tokens=max_tokens, logprobs=0, seed=seed)
    pairs = []
    for prompt, output in zip(prompts, llm.generate([{"prompt_token_ids": p} for p in prompts], sampling), strict=True):
        for choice in output.outputs:
            ids = list(choice.token_ids)
            pairs.append((prompt, ids, [choice.logprobs[i][t].logprob for i, t in enumerate(ids)]))
    prefill = llm.generate(
        [{"prompt_token_ids": p + ids} for p, ids, _ in pairs], SamplingParams(max_tokens=1, prompt_logprobs=0)
    )
    return [
        Sample(p, ids, decode, [out.prompt_logprobs[len(p) + i][t].logprob for i, t in enumerate(ids)])
        for (p, ids, decode), out in zip(pairs, prefill, strict=True)
    ]


def _hf_logprobs(model: torch.nn.Module, sample: Sample) -> torch.Tensor:
    with torch.no_grad():
        logits = model(torch.tensor([sample.prompt + sample.response])).logits[0, len(sample.prompt) - 1 : -1]
    return torch.log_softmax(logits, -1).gather(-1, torch.tensor(sample.response)[:, None])[:, 0].double()


def _max_prob_diff(a: list[torch.Tensor], b: list[torch.Tensor]) -> float:
    return max((x.double().exp() - y.double().exp()).abs().max().item() for x, y in zip(a, b, strict=True))


def measure(model: Path, prompts: list[list[int]], n: int, max_tokens: int, seed: int) -> dict[str, float | int]:
    spawn = multiprocessing.get_context("spawn")
    runs = {}
    for gemm in ("onednn", "torch"):
        with ProcessPoolExecutor(1, mp_context=spawn) as pool:
            runs[gemm] = pool.submit(_sample_with_vllm, str(model), prompts, n, max_tokens, seed, gemm).result()
    scorers = {
        "hf_fp32_sdpa": AutoModelForCausalLM.from_pretrained(model, dtype=torch.float32, attn_implementation="sdpa"),
        "hf_fp32_eager": AutoModelForCausalLM.from_pretrained(model, dtype=torch.float32, attn_implementation="eager"),
        "hf_fp64": AutoModelForCausalLM.from_pretrained(model, dtype=torch.float64, attn_implementation="eager"),
    }
    figures: dict[str, float | int] = {"tokens": sum(len(s.response) for s in runs["onednn"])}
    for gemm, samples in runs.items():
        vllm_decode = [torch.tensor(s.decode_logprobs) for s in samples]
        scored = {name: [_hf_logprobs(m.eval(), s) for s in samples] for name, m in scorers.items()}
        figures[f"vllm_{gemm}_vs_hf_fp32_sdpa"] = _max_prob_diff(vllm_decode, scored["hf_fp32_sdpa"])
        figures[f"vllm_{gemm}_vs_hf_fp32_eager"] = _max_prob_diff(vllm_decode, scored["hf_fp32_eager"])
        figures[f"vllm_{gemm}_vs_own_prefill"] = _max_prob_diff(
            vllm_decode, [torch.tensor(s.prefill_logprobs) for s in samples]
        )
        figures[f"vllm_{gemm}_vs_hf_fp64"] = _max_prob_diff(vllm_decode, scored["hf_fp64"])
        figures[f"hf_fp32_sdpa_vs_hf_fp64 ({gemm} samples)"] = _max_prob_diff(scored["hf_fp32_sdpa"], scored["hf_fp64"])
    return figures


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", type=Path, default=SFT_EXPORT, help="HF dir (default: the CPU SFT export)")
    parser.add_argument("--data", type=Path, default=RL_VAL, help="RL parquet with a `prompt` column of messages")
    parser.add_argument("--prompts", type=int, default=8)
    parser.add_argument("--n", type=int, default=4, help="samples per prompt")
    parser.add_argument("--max-tokens", type=int, default=160)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--out", type=Path, help="write the figures as JSON")
    args = parser.parse_args()
    for path in (args.model, args.data):
        if not path.exists():
            raise SystemExit(
                f"{path} does not exist: build the CPU inputs and SFT model (make sft CONFIG=agentrl_sft_cpu)"
            )
    tokenizer = AutoTokenizer.from_pretrained(args.model)
    rows = pd.read_parquet(args.data).head(args.prompts)
    prompts = [
        list(
            tokenizer.apply_chat_template(list(messages), add_generation_prompt=True, tokenize=True, return_dict=True)[
                "input_ids"
            ]
        )
        for messages in rows["prompt"]
    ]
    figures = measure(args.model, prompts, args.n, args.max_tokens, args.seed)
    width = max(map(len, figures))
    for name, value in figures.items():
        print(f"{name:<{width}}  {value if isinstance(value, int) else f'{value:.3g}'}")
    if args.out:
        atomic_write_json(args.out, figures)


if __name__ == "__main__":
    main()
