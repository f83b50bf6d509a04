"""``AgentRLDataset`` (``data.custom_cls``): verl's ``RLHFDataset`` with the prompt-length rule a switch.

verl 0.9.1 drops a prompt whose chat-template render *with the tool schemas* is over ``data.max_prompt_length``
(``RLHFDataset.maybe_filter_out_long_prompts``, which counts ``tool_schemas`` loaded from the tool config). The
released code counted the prompt alone: its ``CustomRLHFDataset`` (recipe/demystify/reward.py:77-97) never called
the filter, and verl 0.5's ``RLHFDataset.__getitem__`` (rl_dataset.py:305-316, ``truncation: error``) raised for a
prompt over the limit *without* the tools. ``data.agentrl.prompt_filter_counts_tools`` picks the rule; null = from
``agentrl.compat`` (open_agentrl false: the prompt alone, agentrl true: verl's).

Under the released rule a kept prompt may still be over the limit once the tool schemas are in it (about 2.3K-2.56K
tokens alone at 2560). The released stack could not run one: its agent loop padded prompts to
``rollout.prompt_length`` without cutting them, and the batch's ``torch.cat`` (agent_loop.py:456-461, 551) failed on
the longer row, so the released run met none. verl 0.9.1 would cut its head off (system prompt and tool schemas,
``AgentLoopBase._cap_text_prompt_length``). Neither is a run to have: the dataset stops at load time with one line
naming the count instead (fail closed).

A row whose ground truth the graders cannot parse (a code ground truth nested too deeply for ``json``, a GPQA answer
that is not one option letter, a missing answer:
:func:`agentrl_recipe.training.rewards.ground_truth.ground_truth_error`)
stops the load too, naming its row number among the rows read, instead of scoring as a grader error mid-run.

A published row the released loader kept and our schema would not (an unknown source label, a code-test form our
graders do not parse) carries ``extra_info.released_only`` (why; ``agentrl-recipe data rl-released`` counts them).
``data.agentrl.keep_released_rows`` (null = from compat: open_agentrl true, agentrl false) keeps it, graded as the
released code did (an unknown label as math, an unknown test form as a boxed math answer: −1), or drops it at load,
printing the count per reason.
"""

from __future__ import annotations

import dataclasses
from collections import Counter
from typing import Any

from verl.utils.dataset.rl_dataset import RLHFDataset

from agentrl_recipe import names, tasks
from agentrl_recipe.training.recipe_config import from_mapping, to_plain
from agentrl_recipe.training.rewards.ground_truth import RELEASED_ONLY_KEY, ground_truth_error

WHERE = f"data.{names.CONFIG_NAMESPACE}"


@dataclasses.dataclass(frozen=True)
class DatasetSettings:
    """``data.agentrl`` (the dataset sees only the ``data`` section: the shipped configs set the key with
    ``${agentrl_compat:prompt_filter_counts_tools}``, the value ``agentrl.compat`` gives it)."""

    # Count the tool schemas' tokens in the prompt-length filter: open_agentrl false ([code]), agentrl/verl true.
    prompt_filter_counts_tools: bool = True
    # Keep the rows flagged extra_info.released_only: open_agentrl true ([code] loaded every row), agentrl false.
    keep_released_rows: bool = False

    def __post_init__(self) -> None:
        for name in ("prompt_filter_counts_tools", "keep_released_rows"):
            if getattr(self, name) not in (True, False):
                raise TypeError(f"{WHERE}.{name} must be true or false")

    @classmethod
    def from_data_config(cls, data_config: Any) -> DatasetSettings:
        """The settings of a ``data`` section (DictConfig or dict)."""
        block = data_config.get(names.CONFIG_NAMESPACE) if hasattr(data_config, "get") else None
        return from_mapping(cls, to_plain(block), where=WHERE)


def released_only(row: Any) -> str | None:
    """Why the fixed mode drops a published row (``extra_info.released_only``), or None."""
    extra = row.get("extra_info") if hasattr(row, "get") else None
    reason = extra.get(RELEASED_ONLY_KEY) if isinstance(extra, dict) else None
    return reason if isinstance(reason, str) and reason else None


def drop_released_only_rows(dataframe: Any) -> Any:
    """The rows without ``extra_info.released_only``; prints how many were dropped, per reason."""
    reasons = Counter(r for r in map(released_only, _check_columns(dataframe)) if r is not None)
    if not reasons:
        return dataframe
    print(
        f"{WHERE}.keep_released_rows false: dropped {sum(reasons.values())} published row(s) the released loader "
        "kept: " + "; ".join(f"{n} {reason}" for reason, n in reasons.most_common())
    )
    return dataframe.filter(lambda row: released_only(row) is None)


def _check_columns(rows: Any) -> Any:
    if hasattr(rows, "select_columns"):  # a datasets.Dataset: read only the columns the checks need
        return rows.select_columns([c for c in ("data_source", "reward_model", "extra_info") if c in rows.column_names])
    return rows


def refuse_ungradable_rows(rows: Any) -> None:
    """Raise naming every row (its number among the rows read) whose ground truth the graders cannot parse: fail
    before training rather than as grader errors mid-run (issue 40, item 8). A ``released_only`` row is graded as
    the released code did, never parsed: not checked."""
    problems = []
    for number, row in enumerate(_check_columns(rows)):
        if released_only(row) is not None:
            continue
        reward_model = row.get("reward_model") or {}
        kind = tasks.task_kind(str(row.get("data_source") or ""))
        error = ground_truth_error(kind, reward_model.get("ground_truth"), row.get("extra_info"))
        if error is not None:
            problems.append(f"row {number} ({row.get('data_source')}): {error:.300}")
    if problems:
        shown = "; ".join(problems[:5]) + (f"; and {len(problems) - 5} more" if len(problems) > 5 else "")
        raise ValueError(f"{len(problems)} row(s) whose ground truth cannot be graded: {shown}")


class AgentRLDataset(RLHFDataset):
    """verl's RL dataset; the prompt-length rule is ours to choose (``data.agentrl``), and a row the graders cannot
    parse stops the load."""

    def __init__(self, data_files: Any, tokenizer: Any, config: Any, *args: Any, **kwargs: Any) -> None:
        self.settings = DatasetSettings.from_data_config(config)  # before verl's __init__ filters the rows
        super().__init__(data_files, tokenizer, config, *args, **kwargs)

    def maybe_filter_out_long_prompts(self, dataframe: Any = None) -> Any:
        """verl calls it once on the rows read (before they are cut by length): the one place to see them all."""
        rows = self.dataframe if dataframe is None else dataframe
        if not self.settings.keep_released_rows:
            rows = drop_released_only_rows(rows)
        refuse_ungradable_rows(rows)
        return self._filter_long_prompts(rows)

    def _filter_long_prompts(self, dataframe: Any) -> Any:
        if self.settings.prompt_filter_counts_tools or not self.filter_overlong_prompts or self.tool_schemas is None:
            return super().maybe_filter_out_long_prompts(dataframe)
        schemas, self.tool_schemas = self.tool_schemas, None  # the released rule: the prompt alone
        try:
            kept = super().maybe_filter_out_long_prompts(dataframe)
        finally:
            self.tool_schemas = schemas
        over = len(kept) - len(super().maybe_filter_out_long_prompts(kept))
        if over:
            raise ValueError(
                f"{over} prompt(s) fit data.max_prompt_length={self.max_prompt_length} only without the tool schemas "
                f"({WHERE}.prompt_filter_counts_tools false, the released rule); the released stack failed on such a "
                "prompt and verl 0.9.1 would cut its head off: raise data.max_prompt_length or set it true"
            )
        return kept
