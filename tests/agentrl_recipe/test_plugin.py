"""The plugin is visible to verl the way verl loads it: entry point, fresh process, Ray worker, opt-out."""

from __future__ import annotations

import dataclasses
import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
from fresh_python import run_python

from agentrl_recipe import names
from agentrl_sandbox import runtime_env
from verl_cpu import names as cpu_names

ALL = {**names.REGISTERED, **cpu_names.REGISTERED}  # the recipe's plugin and verl_cpu's, both loaded by verl

# Prints, as JSON, which of our names each verl registry holds after a plain `import verl`.
REGISTRY_PROBE = textwrap.dedent(
    """
    import json
    import verl  # noqa: F401  (loads verl.plugins entry points)
    from verl.experimental.agent_loop.agent_loop import _agent_loop_registry
    from omegaconf import OmegaConf
    from verl.trainer.ppo.core_algos import ADV_ESTIMATOR_REGISTRY, POLICY_LOSS_REGISTRY
    from verl.plugin.platform import PlatformRegistry
    from verl.workers.rollout.replica import RolloutReplicaRegistry
    from verl.checkpoint_engine.base import CheckpointEngineRegistry
    from agentrl_recipe import names
    from verl_cpu import names as cpu_names

    def replica_registered(name):
        try:
            RolloutReplicaRegistry.get(name)
            return True
        except ValueError:
            return False

    def checkpoint_engine_registered(name):
        # the class verl builds for checkpoint_engine.backend=name (CheckpointEngineRegistry.new), ours
        try:
            engine = CheckpointEngineRegistry.get(name)
        except ValueError:
            return False
        return engine.__module__ == "verl_cpu.checkpoint_engine"

    def seen():
        return {
            "agent_loop": names.AGENT_LOOP in _agent_loop_registry,
            "compat_resolver": OmegaConf.has_resolver(names.COMPAT_RESOLVER),
            "config_path_resolver": OmegaConf.has_resolver(names.CONFIG_PATH_RESOLVER),
            "policy_loss": names.POLICY_LOSS in POLICY_LOSS_REGISTRY,
            "adv_estimator": names.ADV_ESTIMATOR in ADV_ESTIMATOR_REGISTRY,
            "platform": PlatformRegistry.get(cpu_names.PLATFORM) is not None,
            "rollout_replica": replica_registered(cpu_names.ROLLOUT_REPLICA),
            "checkpoint_engine": checkpoint_engine_registered(cpu_names.CHECKPOINT_ENGINE),
        }
    """
)


def _run(code: str, env: dict[str, str] | None = None, timeout: int = 180) -> subprocess.CompletedProcess:
    return run_python(["-c", code], env={**os.environ, **(env or {})}, timeout=timeout)


OURS = ("agentrl_recipe", "agentrl_sandbox", "verl_cpu", "data_prep", "verl_configs")
# A plain `import verl` in a fresh interpreter, outside the checkout (nothing of ours comes from its folder): which of
# our modules it loaded (before the registry probe imports more), what the plugin logged, and which names each verl
# registry then holds. One interpreter serves the three tests that read it: each costs ~7 s of start-up on 2 cores.
PLAIN_IMPORT = (
    "import json, logging, sys\n"
    "logging.basicConfig(level=logging.INFO)\n"
    "import verl\n"
    f"LOADED = [m for m in sys.modules if m.split('.')[0] in {OURS!r}]\n"
    + REGISTRY_PROBE
    + "print('@@' + json.dumps({'loaded': LOADED, 'seen': seen()}))"
)


@dataclasses.dataclass(frozen=True)
class PlainImport:
    loaded: set[str]  # our modules in sys.modules right after `import verl`
    seen: dict[str, bool]  # REGISTRY_PROBE's seen()
    stderr: str


@pytest.fixture(scope="module")
def plain_import(tmp_path_factory: pytest.TempPathFactory) -> PlainImport:
    where = tmp_path_factory.mktemp("plain_import")
    proc = run_python(["-c", PLAIN_IMPORT], cwd=where)
    assert proc.returncode == 0, proc.stderr[-3000:]
    report = json.loads(proc.stdout.rsplit("@@", 1)[1])
    return PlainImport(set(report["loaded"]), report["seen"], proc.stderr)


def test_every_registered_name_has_the_prefix() -> None:
    assert all(name.startswith("agentrl_") for name in ALL.values())
    assert len(set(ALL.values())) == len(ALL) == len(names.REGISTERED) + len(cpu_names.REGISTERED)


def test_doctor_looks_every_registered_kind_up_in_a_verl_registry() -> None:
    import importlib

    from agentrl_recipe.cli import doctor

    importlib.import_module("agentrl_recipe.plugin")  # registers, as verl's entry point does
    assert set(doctor.REGISTRIES) == set(ALL)
    for kind, name in ALL.items():
        assert doctor._registry_entry(kind, name) is not None, (kind, name, doctor.REGISTRIES[kind])
        assert doctor._registry_entry(kind, "agentrl_no_such_name") is None, kind


def test_plain_import_verl_registers_every_name(plain_import: PlainImport) -> None:
    assert plain_import.seen == dict.fromkeys(ALL, True), plain_import.stderr[-3000:]


def test_plugin_opt_out_env_var_disables_registration() -> None:
    proc = _run(REGISTRY_PROBE + "print('@@' + json.dumps(seen()))", env={"VERL_USE_EXTERNAL_PLUGINS": "none"})
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert json.loads(proc.stdout.rsplit("@@", 1)[1]) == dict.fromkeys(ALL, False)


def test_verl_cpu_loads_and_switches_off_on_its_own() -> None:
    """verl_cpu is its own verl plugin: VERL_CPU_DISABLE=1 keeps its names out, the recipe's stay registered."""
    proc = _run(REGISTRY_PROBE + "print('@@' + json.dumps(seen()))", env={"VERL_CPU_DISABLE": "1"})
    assert proc.returncode == 0, proc.stderr[-3000:]
    expected = {**dict.fromkeys(names.REGISTERED, True), **dict.fromkeys(cpu_names.REGISTERED, False)}
    assert json.loads(proc.stdout.rsplit("@@", 1)[1]) == expected


def test_names_are_registered_inside_a_ray_worker() -> None:
    code = REGISTRY_PROBE + textwrap.dedent(
        """
        import ray
        ray.init(num_cpus=1, include_dashboard=False, log_to_driver=False)
        try:
            @ray.remote
            def in_worker():
                import verl  # noqa: F401
                return seen()
            print("@@" + json.dumps(ray.get(in_worker.remote(), timeout=240)))
        finally:
            ray.shutdown()
        """
    )
    proc = _run(code, env={"RAY_AUTH_MODE": "disabled"}, timeout=300)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert json.loads(proc.stdout.rsplit("@@", 1)[1]) == dict.fromkeys(ALL, True)


def test_plugin_import_logs_what_it_registered(plain_import: PlainImport) -> None:
    line = next(ln for ln in plain_import.stderr.splitlines() if "agentrl_recipe registered:" in ln)
    for name in names.REGISTERED.values():  # the recipe plugin logs its own names
        assert name in line


def test_doctor_json_reports_versions_and_names(agentrl_cache: Path) -> None:
    proc = run_python(["-m", "agentrl_recipe.cli", "doctor", "--json"])
    report = json.loads(proc.stdout)
    assert proc.returncode == 0, report["problems"]
    assert report["ok"] is True and report["problems"] == []
    assert report["verl_version"] == "0.9.1"
    assert report["plugin_loaded_by_verl"] is True
    for kind, name in ALL.items():
        assert report["registered"][kind] == {**report["registered"][kind], "name": name, "registered": True}
        assert report["registered"][kind]["importable"] is True
    engine = report["registered"]["checkpoint_engine"]
    assert engine["target"] == "verl_cpu.checkpoint_engine.RayObjectStoreCheckpointEngine"
    assert any(t["class_name"] == names.TOOL_CLASS and t["resolvable"] for t in report["tools"])
    assert report["sandbox"]["ok"] is True
    runtime = report["sandbox_runtime"]  # the default runtime, its interpreter and the pins it was built from
    assert (runtime["runtime"], runtime["python"]) == ("sandboxfusion", runtime_env.interpreter_version())
    assert f"numpy=={runtime['packages']['numpy']}" in runtime_env.pins_for("sandboxfusion", runtime["python"])
    assert "cuda_available" in report["hardware"]


@pytest.fixture
def broken_plugin_path(tmp_path: Path) -> Path:
    """A sitecustomize that makes one of the plugin's imports fail, as a missing dependency would."""
    (tmp_path / "sitecustomize.py").write_text(
        textwrap.dedent(
            """
            import sys
            class _Broken:
                def find_spec(self, name, path=None, target=None):
                    if name == "agentrl_recipe.training.algos.losses":
                        raise ImportError("simulated: a dependency of agentrl_recipe.training.algos.losses is missing")
                    return None
            sys.meta_path.insert(0, _Broken())
            """
        )
    )
    return tmp_path


def test_doctor_reports_a_broken_plugin_and_exits_nonzero(broken_plugin_path: Path) -> None:
    env = {**os.environ, "PYTHONPATH": f"{broken_plugin_path}{os.pathsep}{os.environ.get('PYTHONPATH', '')}"}
    proc = subprocess.run(
        [sys.executable, "-m", "agentrl_recipe.cli", "doctor", "--json", "--skip-sandbox"],
        capture_output=True,
        text=True,
        timeout=300,
        env=env,
    )
    assert proc.returncode == 1
    report = json.loads(proc.stdout)
    # the loss loads on its first call (plugin.POLICY_LOSS_FN): the plugin registers, the doctor finds the break
    assert report["plugin_loaded_by_verl"] is True
    loss = report["registered"]["policy_loss"]
    assert (loss["registered"], loss["importable"]) == (True, False)
    assert loss["target"] == "agentrl_recipe.training.algos.losses.compute_policy_loss_tcr"
    assert "simulated: a dependency" in loss["error"]
    assert any("does not import" in p and names.POLICY_LOSS in p for p in report["problems"])


@pytest.mark.parametrize(
    "first_import",
    [
        "agentrl_recipe.training.rewards.scoring",
        "agentrl_recipe.training.rewards.manager",
        "agentrl_recipe.training.algos.losses",
        "agentrl_recipe.training.recipe_config",
    ],
)
def test_importing_a_plugin_module_before_verl_still_registers_everything(first_import: str) -> None:
    # The plugin imports these modules while verl loads it; importing one of them first must not leave it
    # half-initialised when the plugin needs it (see agentrl_recipe/training/rewards/__init__.py).
    proc = _run(f"import {first_import}\n" + REGISTRY_PROBE + "print('@@' + json.dumps(seen()))")
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert json.loads(proc.stdout.rsplit("@@", 1)[1]) == dict.fromkeys(ALL, True), proc.stderr[-3000:]


# Every module of ours that a plain `import verl` loads (in the driver and every Ray worker), at most
# IMPORT_VERL_BUDGET (issue 42). 42 before the reward manager was loaded by path (reward.reward_manager.source:
# importlib) and the loss and estimator on their first call (plugin.POLICY_LOSS_FN): the graders, the sandbox client and
# the algorithms load in the workers that use them. A module added here is paid for in every worker's start-up: add it
# on purpose.
IMPORT_VERL_BUDGET = 25
LOADED_BY_IMPORT_VERL = {
    "agentrl_recipe", "agentrl_recipe.plugin", "agentrl_recipe.names", "agentrl_recipe.training",
    "agentrl_recipe.training.verl_adapters", "agentrl_recipe.training.verl_adapters.agent_loop_registry",
    "agentrl_recipe.training.verl_adapters.metric_aggregation",
    "agentrl_recipe.training.verl_adapters.separate_async_logger",
    "verl_cpu", "verl_cpu.plugin", "verl_cpu.names", "verl_cpu.platform", "verl_cpu.device_module",
    "verl_cpu.checkpoint_engine", "verl_cpu.rollout_registry", "verl_cpu.import_hook", "verl_cpu.skip_hccl_engine",
    "verl_cpu.vllm_dist_alias", "verl_cpu.vllm_reloadable_weights", "verl_cpu.weight_sender_timeout",
    "verl_cpu.weight_sync_path",
}  # fmt: skip
# ... and where verl runs on the CPU platform (VERL_PLATFORM=agentrl_cpu, or a host without accelerator): its fixes
LOADED_ON_THE_CPU_PLATFORM = {"verl_cpu.quiet", "verl_cpu.engines", "verl_cpu.distributed", "verl_cpu.snapshot"}


def test_import_verl_loads_only_the_allow_listed_modules_of_ours(plain_import: PlainImport) -> None:
    loaded = plain_import.loaded
    expected = LOADED_BY_IMPORT_VERL | (LOADED_ON_THE_CPU_PLATFORM if cpu_names.cpu_platform_selected() else set())
    print(f"import verl loads {len(loaded)} modules of ours (budget {IMPORT_VERL_BUDGET})")
    assert len(LOADED_BY_IMPORT_VERL | LOADED_ON_THE_CPU_PLATFORM) <= IMPORT_VERL_BUDGET
    assert loaded == expected, {"new": sorted(loaded - expected), "gone": sorted(expected - loaded)}
    heavy = (
        "data_prep",
        "agentrl_recipe.cli",
        "agentrl_recipe.eval",
        "agentrl_recipe.training.rewards",
        "agentrl_recipe.training.algos",
        "agentrl_sandbox",
        "agentrl_recipe.training.agent_loop",
    )
    assert not any(m.startswith(heavy) for m in loaded)
