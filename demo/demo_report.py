"""What the demo shows: the per-step table and curves from verl's file-logger metrics, and the held-out summaries.

Every number here is read from what verl's trainers logged (``metrics.jsonl``) or what the eval harness wrote
(``report.json``); nothing is recomputed from the demo's own memory.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from agentrl_recipe.atomic_io import save_figure
from agentrl_recipe.cpu_task.task import DATA_SOURCE
from agentrl_recipe.cpu_task.tiny_model import CHAT_TEMPLATE_FILES, chat_template

# (verl metrics key, table header, format) — the GRPO-TCR step table.
STEP_COLUMNS: tuple[tuple[str, str, str], ...] = (
    ("critic/score/mean", "reward", "{:+.3f}"),
    (f"reward/{DATA_SOURCE}/acc", "acc", "{:.3f}"),
    ("agentrl_tools/calls_per_traj/mean", "calls/traj", "{:.2f}"),
    ("agentrl_tools/malformed_per_traj/mean", "malformed/traj", "{:.3f}"),
    ("actor/pg_clipfrac_low", "clip low", "{:.4f}"),
    ("actor/pg_clipfrac_high", "clip high", "{:.4f}"),
    ("actor/pg_clipfrac_dual", "clip dual", "{:.4f}"),
    ("actor/entropy", "entropy", "{:.3f}"),
    ("actor/grad_norm", "grad norm", "{:.3f}"),
    ("timing_s/step", "s/step", "{:.1f}"),
)


def table_header() -> str:
    headers = ["step", *(h for _, h, _ in STEP_COLUMNS)]
    return "| " + " | ".join(headers) + " |\n|" + "|".join("-" * (len(h) + 2) for h in headers) + "|"


def table_row(step: int, metrics: dict[str, Any]) -> str:
    cells = [str(step).rjust(len("step"))]
    for key, header, fmt in STEP_COLUMNS:
        value = metrics.get(key)
        cells.append(("-" if value is None else fmt.format(value)).rjust(len(header)))
    return "| " + " | ".join(cells) + " |"


def table(steps: dict[int, dict[str, Any]]) -> str:
    return table_header() + "\n" + "\n".join(table_row(s, m) for s, m in sorted(steps.items())) + "\n"


def model_summary(model_dir: Path) -> dict[str, Any]:
    """The demo model's family, architecture, size and chat template, read from its saved files."""
    import math

    from safetensors import safe_open

    config = json.loads((model_dir / "config.json").read_text())
    template = json.loads((model_dir / "tokenizer_config.json").read_text()).get("chat_template")
    if template is None and (model_dir / "chat_template.jinja").is_file():
        template = (model_dir / "chat_template.jinja").read_text()
    with safe_open(str(model_dir / "model.safetensors"), framework="pt") as weights:
        parameters = sum(math.prod(weights.get_slice(name).get_shape()) for name in weights.keys())  # noqa: SIM118
    families = [f for f in CHAT_TEMPLATE_FILES if chat_template(f) == template]
    return {
        "family": families[0] if families else "unknown",
        "architecture": config["architectures"][0],
        "chat_template": CHAT_TEMPLATE_FILES[families[0]] if families else "other",
        "parameters": parameters,
        "hidden_size": config["hidden_size"],
        "layers": config["num_hidden_layers"],
        "vocab_size": config["vocab_size"],
    }


def describe_model(model: dict[str, Any]) -> str:
    return (
        f"tiny {model['family']} ({model['architecture']}, {model['parameters'] / 1e6:.2f}M parameters, "
        f"h{model['hidden_size']} L{model['layers']}, {model['vocab_size']}-token vocabulary; "
        f"chat template {model['chat_template']})"
    )


def eval_summary(report: dict[str, Any], k: int) -> dict[str, Any]:
    """The headline numbers of an eval-harness report on the demo's held-out problems."""
    result = report["results"][DATA_SOURCE]
    metrics, tools = result["metrics"], result["tool_stats"]
    avg = metrics["avg@n"]
    return {
        "k": k,
        "problems": metrics["num_problems"],
        f"avg@{k}": avg["value"],
        f"avg@{k}_ci95": [avg["ci_low"], avg["ci_high"]],
        f"pass@{k}": metrics["pass@k"][str(k)]["value"],
        "tool_calls_per_traj": tools["tool_calls_per_trajectory"]["mean"],
        "tool_call_success_rate": tools["tool_call_success_rate"],
        "malformed_tool_calls": tools["malformed_tool_calls"],
    }


def _series(steps: dict[int, dict[str, Any]], key: str) -> tuple[list[int], list[float]]:
    xs = [s for s in sorted(steps) if key in steps[s]]
    return xs, [float(steps[s][key]) for s in xs]


def plot(
    sft: dict[int, dict[str, Any]],
    rl: dict[int, dict[str, Any]],
    before: dict[str, Any],
    after: dict[str, Any],
    path: Path,
) -> Path:
    """curves.png: SFT loss, RL reward/accuracy, tool use, clip fractions, entropy, held-out before/after."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(2, 3, figsize=(13, 7))
    axes[0][0].plot(*_series(sft, "train/loss"))
    axes[0][0].set(title="SFT loss (verl sft_trainer)", xlabel="SFT step", yscale="log")
    panels = [
        (axes[0][1], [("critic/score/mean", "reward"), (f"reward/{DATA_SOURCE}/acc", "accuracy")], "GRPO-TCR reward"),
        (axes[0][2], [("agentrl_tools/calls_per_traj/mean", "calls / traj")], "tool use"),
        (
            axes[1][0],
            [(f"actor/pg_clipfrac_{s}", s) for s in ("low", "high", "dual")],
            "clip fractions",
        ),
        (axes[1][1], [("actor/entropy", "entropy")], "policy entropy"),
    ]
    for ax, series, title in panels:
        for key, label in series:
            ax.plot(*_series(rl, key), marker="o", label=label)
        ax.set(title=title, xlabel="RL step")
        ax.legend()
    ax, k = axes[1][2], before["k"]
    for offset, (name, summary) in enumerate((("before RL", before), ("after RL", after))):
        low, high = summary[f"avg@{k}_ci95"]
        value = summary[f"avg@{k}"]
        ax.bar([offset], [value], yerr=[[value - low], [high - value]], capsize=6, width=0.6, label=name)
    ax.set_xticks([0, 1], ["SFT", "SFT + GRPO-TCR"])
    ax.set(title=f"held-out avg@{k} (95% bootstrap CI)", ylim=(0, 1))
    fig.tight_layout()
    save_figure(fig, path, dpi=100)
    return path
