"""The demo's CPU training steps: verl's SFT and PPO losses driven by plain torch on a Hugging Face model.

verl 0.9.1 has no CPU training engine (its FSDP engine needs NCCL), so the demo plays the engine's part itself —
and only that part. Everything around it is verl's own code:

- SFT: batches come from verl's ``MultiTurnSFTDataset`` (``pad_mode=no_padding``: assistant-only loss mask) and the
  loss is verl's ``sft_loss`` on nested (jagged) tensors, as the FSDP engine feeds it;
- RL: the rollout ``DataProto`` goes through verl's ``left_right_2_no_padding`` and, per mini-batch, verl's
  ``ppo_loss`` (which resolves ``actor.policy_loss.loss_mode`` through ``get_policy_loss_fn`` and aggregates with
  ``agg_loss`` under ``global_batch_info``), exactly as ``engine_workers`` does on GPUs.

What this module adds is the engine's forward: per-token log-probs (and entropy) of the next token on the flattened
sequence, in verl's convention (``log_probs[t] = log p(token[t+1])`` over the concatenation of all sequences).
"""

from __future__ import annotations

import math
from collections.abc import Iterator, Sequence
from typing import Any

import torch
from tensordict import TensorDict
from verl.utils import tensordict_utils as tu
from verl.utils.dataset.dataset_utils import DatasetPadMode
from verl.utils.metric import Metric
from verl.utils.torch_functional import entropy_from_logits, logprobs_from_logits
from verl.workers.utils.losses import ppo_loss, sft_loss
from verl.workers.utils.padding import left_right_2_no_padding


def _pad_nested(nested: torch.Tensor, pad_value: int) -> tuple[torch.Tensor, torch.Tensor]:
    """(B, T) right-padded copy of a jagged tensor and its attention mask (plain tensor ops, no nested kernels)."""
    lengths = nested.offsets().diff().tolist()
    pieces = torch.split(nested.values(), lengths)
    padded = torch.nn.utils.rnn.pad_sequence(pieces, batch_first=True, padding_value=pad_value)
    mask = torch.arange(padded.shape[1]).unsqueeze(0) < torch.tensor(lengths).unsqueeze(1)
    return padded, mask.long()


def forward_log_probs(
    model: torch.nn.Module,
    input_ids: torch.Tensor,
    position_ids: torch.Tensor,
    *,
    temperature: float = 1.0,
    with_entropy: bool = False,
    pad_token_id: int = 0,
) -> tuple[torch.Tensor, torch.Tensor | None]:
    """Flat per-token log-probs (and entropy) for jagged ``input_ids``, in verl's no-padding convention.

    ``log_probs[j]`` is the log-prob of flat token ``j+1`` given the tokens of its own sequence up to ``j`` (labels
    are the flat ids rolled by -1, as verl's engines do); the entry at each sequence's last token is never read by
    ``sft_loss`` / ``no_padding_2_padding``. Logits are divided by the sampling ``temperature`` as verl's actor does.
    """
    ids, attention_mask = _pad_nested(input_ids, pad_token_id)
    pos, _ = _pad_nested(position_ids, 0)
    logits = model(input_ids=ids, attention_mask=attention_mask, position_ids=pos).logits.float()
    if temperature != 1.0:
        logits = logits / temperature
    valid = attention_mask.bool()  # row-major selection = the jagged tensor's order
    flat_labels = torch.roll(input_ids.values(), shifts=-1, dims=0)
    labels, _ = _pad_nested(torch.nested.nested_tensor_from_jagged(flat_labels, offsets=input_ids.offsets()), 0)
    # (B, T, V) in: verl's row-wise logsumexp loops over the batch dimension, so it must not see (total_nnz, V)
    log_probs = logprobs_from_logits(logits, labels)[valid]
    entropy = entropy_from_logits(logits)[valid] if with_entropy else None
    return log_probs, entropy


def _to_jagged(tensors: Sequence[torch.Tensor]) -> torch.Tensor:
    lengths = torch.tensor([0] + [len(t) for t in tensors])
    return torch.nested.nested_tensor_from_jagged(torch.cat(list(tensors)), offsets=lengths.cumsum(0))


def collate_sft(items: Sequence[dict[str, torch.Tensor]]) -> TensorDict:
    """No-padding batch of MultiTurnSFTDataset items, with the metadata verl's sft_loss reads."""
    td = TensorDict(
        {key: _to_jagged([item[key] for item in items]) for key in ("input_ids", "position_ids", "loss_mask")},
        batch_size=[len(items)],
    )
    loss_tokens = int(sum(int(item["loss_mask"][1:].sum()) for item in items))
    tu.assign_non_tensor(td, pad_mode=DatasetPadMode.NO_PADDING, dp_size=1, batch_num_tokens=max(loss_tokens, 1))
    return td


def sft_step(
    model: torch.nn.Module, optimizer: torch.optim.Optimizer, batch: TensorDict, *, grad_clip: float, pad_token_id: int
) -> float:
    """One SFT step with verl's ``sft_loss`` (assistant tokens only, normalised by the batch's loss tokens)."""
    model.train()
    log_probs, _ = forward_log_probs(model, batch["input_ids"], batch["position_ids"], pad_token_id=pad_token_id)
    nested_log_probs = torch.nested.nested_tensor_from_jagged(log_probs, offsets=batch["input_ids"].offsets())
    loss, _ = sft_loss(config=None, model_output={"log_probs": nested_log_probs}, data=batch)
    optimizer.zero_grad(set_to_none=True)
    loss.backward()
    torch.nn.utils.clip_grad_norm_(model.parameters(), grad_clip)
    optimizer.step()
    return float(loss.detach())


def cosine_lr(step: int, total: int, *, base_lr: float, warmup: int) -> float:
    if step < warmup:
        return base_lr * (step + 1) / warmup
    progress = (step - warmup) / max(1, total - warmup)
    return base_lr * (0.1 + 0.9 * 0.5 * (1 + math.cos(math.pi * progress)))


def _metric_value(value: Any) -> float:
    if isinstance(value, Metric):
        return float(value.aggregate())
    if isinstance(value, torch.Tensor):
        return float(value.detach().float().mean())
    return float(value)


def _mini_batches(td: TensorDict, mini_batch_size: int, epochs: int, seed: int) -> Iterator[TensorDict]:
    return tu.make_iterator(
        td, mini_batch_size=mini_batch_size, epochs=epochs, seed=seed, dataloader_kwargs={"shuffle": True}
    )


def ppo_update(
    model: torch.nn.Module,
    optimizer: torch.optim.Optimizer,
    batch: Any,
    actor_config: Any,
    *,
    mini_batch_size: int,
    epochs: int = 1,
    temperature: float = 1.0,
    seed: int = 0,
    pad_token_id: int = 0,
) -> dict[str, float]:
    """Policy update on a rollout ``DataProto`` through verl's ``ppo_loss`` (old log-probs = the rollout's).

    ``batch`` needs ``prompts, responses, input_ids, attention_mask, position_ids, response_mask,
    rollout_log_probs, advantages``. Tool-output tokens have ``response_mask == 0`` and are out of the loss.
    Returns the mean over mini-batches of every metric ``ppo_loss`` reports, plus ``actor/grad_norm``.
    """
    tensors = {
        key: batch.batch[key]
        for key in (
            "prompts",
            "responses",
            "input_ids",
            "attention_mask",
            "position_ids",
            "response_mask",
            "advantages",
        )
    }
    tensors["old_log_probs"] = batch.batch["rollout_log_probs"].float()
    td = left_right_2_no_padding(TensorDict(tensors, batch_size=[len(batch)]))
    grad_clip = float(actor_config.grad_clip)
    sums: dict[str, float] = {}
    count = 0
    model.train()
    for mb in _mini_batches(td, mini_batch_size, epochs, seed):
        num_tokens = int(mb["response_mask"].sum())
        tu.assign_non_tensor(mb, dp_size=1, batch_num_tokens=max(num_tokens, 1), global_batch_size=mb.batch_size[0])
        log_probs, entropy = forward_log_probs(
            model,
            mb["input_ids"],
            mb["position_ids"],
            temperature=temperature,
            with_entropy=True,
            pad_token_id=pad_token_id,
        )
        loss, metrics = ppo_loss(actor_config, {"log_probs": log_probs, "entropy": entropy}, mb)
        optimizer.zero_grad(set_to_none=True)
        loss.backward()
        grad_norm = torch.nn.utils.clip_grad_norm_(model.parameters(), grad_clip)
        if torch.isfinite(grad_norm):  # verl's engines skip the step on a non-finite gradient norm
            optimizer.step()
        metrics = {key: _metric_value(value) for key, value in metrics.items()}
        metrics["actor/grad_norm"] = float(grad_norm)
        for key, value in metrics.items():
            sums[key] = sums.get(key, 0.0) + value
        count += 1
    return {key: value / max(count, 1) for key, value in sums.items()}
