"""``make gpu-check``: its dry mode end to end (CPU, tiny Qwen3, gloo, the same code path and report), the bundle's
pins and wheel choice, the import-only stubs; the real run on a GPU (marked ``gpu``)."""

from __future__ import annotations

import importlib.metadata
import json
import subprocess
import sys
from pathlib import Path

import pytest

from agentrl_recipe.gpu_check import bundle, stubs

REPO = Path(__file__).resolve().parents[3]
CHECKS = {
    "loss_finite",
    "grad_norm_finite_and_positive",
    "loss_matches_float64_reference",
    "every_clip_branch_hit",
    "advantages_match_float64_reference",
    "one_micro_batch_of_the_budget",
}


def _run(tmp_path: Path, *args: str) -> tuple[subprocess.CompletedProcess[str], dict]:
    out = tmp_path / "report"
    proc = subprocess.run(
        [sys.executable, "-m", "agentrl_recipe.gpu_check", "--out", str(out), *args],
        cwd=REPO, capture_output=True, text=True, timeout=600,
    )  # fmt: skip
    return proc, json.loads((out / "gpu_check_report.json").read_text())


def test_dry_mode_runs_verl_actor_update_with_our_loss_and_reports_it(tmp_path: Path) -> None:
    proc, report = _run(tmp_path, "--dry")
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert (report["mode"], report["device"], report["ok"]) == ("dry", "cpu", True)
    assert report["registered"] == {"policy_loss": "agentrl_tcr", "adv_estimator": "agentrl_grpo",
                                    "plugin": "agentrl_recipe.plugin"}  # fmt: skip
    [run] = report["runs"]
    assert run["plan"] == {"name": "tiny_on_device", "layers": None, "offload_policy": False}
    assert set(run["checks"]) == CHECKS | {"ratio_is_1", "pg_loss_equals_minus_token_mean_advantage"}
    assert all(run["checks"].values()), run["checks"]
    # the paper run's actor, composed from agentrl_rl_qwen3_4b (open_agentrl: verl 0.5's micro-batch token mean)
    assert run["actor"] == {
        "strategy": "fsdp2", "policy_loss.loss_mode": "agentrl_tcr", "policy_loss.token_mean_scope": "micro_batch",
        "loss_agg_mode": "token-mean", "clip_ratio_low": 0.2, "clip_ratio_high": 0.315, "clip_ratio_c": 10.0,
        "optim.lr": 1e-6, "grad_clip": 1.0, "use_dynamic_bsz": True, "ppo_max_token_len_per_gpu": 256,
        "entropy_coeff": 0, "use_kl_loss": False, "fsdp_config.offload_policy": False, "gradient_checkpointing": True,
    }  # fmt: skip
    assert run["config"]["name"] == "agentrl_rl_qwen3_4b"
    assert run["model"]["class"] == "Qwen3ForCausalLM" and run["model"]["full_depth_layers"] == 36
    assert run["model"]["dims"]["tie_word_embeddings"] is True
    update = run["update"]
    # 8 rows: 8 prompt tokens + responses of 24 - 2·(i mod 4 + i div 4) tokens, padded to 8 × 32 = the 256 budget
    responses = sum(24 - 2 * (i % 4 + i // 4) for i in range(8))
    assert (update["tokens"], update["padded_tokens"], update["loss_tokens"]) == (64 + responses, 256, responses)
    assert update["ratio_max"] == pytest.approx(1.0, abs=1e-6) and update["ratio_min"] == pytest.approx(1.0, abs=1e-6)
    assert update["pg_loss"] == pytest.approx(run["expected_pg_loss_at_ratio_1"], abs=1e-5)
    assert update["pg_loss"] != 0 and update["grad_norm"] > 0 and update["micro_batches"] == 1
    assert update["peak_memory_allocated_gib"] is None  # CPU: no CUDA allocator to read
    assert {"actor/pg_clipfrac_low", "actor/pg_clipfrac_high", "actor/pg_clipfrac_dual"} <= set(update["metric_keys"])
    ref = run["loss_reference"]
    assert ref["abs_diff"] <= 1e-5 and min(ref["clip_fractions"].values()) > 0
    # what was stubbed, on record: Ray's names verl's modules reach at import, and nothing of it was called
    assert report["stubbed"]["packages"] == ["ray", "datasets", "pandas", "PIL"]
    assert report["stubbed"]["hidden"] == ["transfer_queue"]
    assert {"ray", "ray.remote", "ray.util.placement_group", "datasets"} <= set(report["stubbed"]["names_touched"])


def test_the_bundle_pins_what_this_environment_runs() -> None:
    for name, version in bundle.pins().items():
        assert importlib.metadata.version(name) == version, name


def _touch(directory: Path, *names: str) -> None:
    for name in names:
        (directory / name).write_bytes(b"")


def test_pick_takes_the_wheel_built_for_this_python_and_names_what_is_missing(tmp_path: Path) -> None:
    pure = [f"{n.replace('-', '_')}-{v}-py3-none-any.whl" for n, v in bundle.PURE.items() if n != "psutil"]
    _touch(tmp_path, *pure, "psutil-7.2.2-cp36-abi3-manylinux_2_28_x86_64.whl")
    for python in ("311", "312"):
        _touch(tmp_path, f"tensordict-0.10.0-cp{python}-cp{python}-manylinux_2_28_x86_64.whl",
               f"orjson-3.13.0-cp{python}-cp{python}-manylinux_2_17_x86_64.manylinux2014_x86_64.whl")  # fmt: skip
    chosen = bundle.pick(tmp_path, "312")
    assert set(chosen) == set(bundle.pins())
    assert chosen["tensordict"].name == "tensordict-0.10.0-cp312-cp312-manylinux_2_28_x86_64.whl"
    assert chosen["psutil"].name.startswith("psutil-7.2.2-cp36-abi3")
    with pytest.raises(FileNotFoundError, match=r"\['orjson', 'tensordict'\] \(CPython 313\)"):
        bundle.pick(tmp_path, "313")


def test_a_stub_imports_subclasses_and_decorates_but_refuses_a_call() -> None:
    finder_count = len(sys.meta_path)
    try:
        assert stubs.install(["agentrl_fake_ray"], ["agentrl_fake_absent"]) == ["agentrl_fake_ray"]
        import agentrl_fake_ray  # type: ignore[import-not-found]
        from agentrl_fake_ray.util.placement_group import PlacementGroup  # type: ignore[import-not-found]

        class Sub(PlacementGroup):  # type: ignore[misc]
            pass

        @agentrl_fake_ray.remote
        class Actor:
            pass

        assert Actor.__name__ == "Actor" and Sub.__mro__[1] is object
        with pytest.raises(stubs.StubUsed, match=r"agentrl_fake_ray.get\(\) was called"):
            agentrl_fake_ray.get(1)
        with pytest.raises(ModuleNotFoundError, match="hidden by gpu-check"):
            import agentrl_fake_absent  # type: ignore[import-not-found]  # noqa: F401
        assert {"agentrl_fake_ray.remote", "agentrl_fake_ray.util.placement_group.PlacementGroup"} <= stubs.TOUCHED
        with pytest.raises(RuntimeError, match="already imported"):
            stubs.install(["agentrl_fake_ray"], [])
    finally:
        del sys.meta_path[: len(sys.meta_path) - finder_count]
        for name in [m for m in sys.modules if m.startswith("agentrl_fake_ray")]:
            del sys.modules[name]


@pytest.mark.gpu
def test_gpu_check_on_this_gpu(tmp_path: Path) -> None:
    if not (REPO / bundle.WHEELS_DIR).is_dir():
        pytest.skip("no wheel bundle: make gpu-check-bundle")
    proc, report = _run(tmp_path)
    assert proc.returncode == 0, json.dumps(report, indent=1)[-5000:]
    assert [r["plan"]["name"] for r in report["runs"]] == [
        "qwen3_4b_16_layers_on_gpu", "qwen3_4b_36_layers_cpu_offload_policy"]  # fmt: skip
    for run in report["runs"]:
        assert set(run["checks"]) == CHECKS and all(run["checks"].values())
        assert run["update"]["padded_tokens"] == 23040


def _requirements_closure(roots: list[str]) -> set[str]:
    """The installed distributions ``roots`` need (their unconditional requirements, recursively)."""
    from packaging.requirements import Requirement

    seen: set[str] = set()
    stack = list(roots)
    while stack:
        name = stack.pop()
        try:
            dist = importlib.metadata.distribution(name)
        except importlib.metadata.PackageNotFoundError:
            continue
        key = dist.metadata["Name"].lower().replace("_", "-")
        if key in seen:
            continue
        seen.add(key)
        for line in dist.requires or []:
            req = Requirement(line)
            if req.marker is None or req.marker.evaluate({"extra": ""}):
                stack.append(req.name)
    return seen


def _site_of(distributions: set[str], site: Path) -> None:
    """A site-packages of links to the files of ``distributions`` only (what a bare machine plus the bundle has)."""
    site.mkdir()
    for name in sorted(distributions):
        dist = importlib.metadata.distribution(name)
        for top in {str(f).split("/")[0] for f in dist.files or [] if not str(f).startswith(("..", "bin/"))}:
            source, link = Path(str(dist.locate_file(top))), site / top
            if source.exists() and not link.exists():
                link.symlink_to(source)


def test_the_gpu_path_imports_from_torch_transformers_and_the_bundle_alone(tmp_path: Path) -> None:
    """The pins are enough: with only torch, transformers, their requirements and the pinned distributions (this venv's
    copies of the same versions) importable, the GPU path imports and verl finds our loss and estimator."""
    site = tmp_path / "site"
    _site_of(_requirements_closure(["torch", "transformers"]) | set(bundle.pins()), site)
    code = (
        "import sys; sys.path[:0] = [sys.argv[1], sys.argv[2]]\n"
        "from agentrl_recipe.gpu_check import stubs; stubs.install()\n"
        "from agentrl_recipe.gpu_check import run\n"
        "from verl.trainer.ppo import core_algos\n"
        "loss = core_algos.get_policy_loss_fn('agentrl_tcr')\n"
        "print(loss.__name__, core_algos.get_adv_estimator_fn('agentrl_grpo').__name__)\n"
        "cfg, _ = run.compose(run.PAPER_CONFIG, ['actor_rollout_ref.actor.strategy=fsdp2'])\n"
        "print(cfg.actor_rollout_ref.actor.policy_loss.loss_mode, 'ray' in stubs.TOUCHED)\n"
    )  # fmt: skip
    proc = subprocess.run(
        [sys.executable, "-S", "-c", code, str(site), str(REPO)], cwd=tmp_path, capture_output=True, text=True,
        timeout=300,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert proc.stdout.split() == [
        "compute_policy_loss_tcr", "compute_grpo_masked_outcome_advantage", "agentrl_tcr", "True"]  # fmt: skip
