"""The environment an RL launch gives every worker: the plugin, the platform, the forwarded variables, the sandbox."""

from __future__ import annotations

from pathlib import Path

import pytest
from omegaconf import OmegaConf

from agentrl_recipe import names
from agentrl_recipe.launcher.env import (
    CPU_ENV_DEFAULTS,
    OMP_WAIT_ENV,
    PLUGIN_MODULE,
    TOKEN_IN_CONFIG,
    platform_env,
    rl_env,
    worker_sandbox_config,
)
from agentrl_sandbox.config import (
    ENV_SANDBOX_BACKEND,
    ENV_SANDBOX_POOL_SIZE,
    ENV_SANDBOX_PROCESSES_PER_NODE,
    ENV_SANDBOX_RUNTIME,
    ENV_SANDBOX_TOKEN,
    ENV_SANDBOX_TOKEN_FILE,
    ENV_SANDBOX_URL,
)
from verl_cpu import names as cpu_names


def cfg(device: str = "cuda", sandbox: dict | None = None, logger: list[str] | None = None):
    return OmegaConf.create(
        {
            "trainer": {"device": device, "nnodes": 2, "logger": logger or ["console"], "default_local_dir": "ck"},
            "actor_rollout_ref": {"rollout": {"agent": {"num_workers": 8}}},
            "reward": {"num_workers": 4},
            "agentrl": {"sandbox": sandbox or {}},
        }
    )


@pytest.fixture(autouse=True)
def clean_env(monkeypatch: pytest.MonkeyPatch) -> None:
    for key in ("VERL_USE_EXTERNAL_MODULES", "VERL_FILE_LOGGER_PATH", "VERL_FILE_LOGGER_ROOT", names.ENV_TRACE_DIR):
        monkeypatch.delenv(key, raising=False)
    for key in (*CPU_ENV_DEFAULTS, "TQ_NUM_THREADS"):
        monkeypatch.delenv(key, raising=False)
    for key in (ENV_SANDBOX_URL, ENV_SANDBOX_BACKEND, ENV_SANDBOX_TOKEN, ENV_SANDBOX_TOKEN_FILE):
        monkeypatch.delenv(key, raising=False)


def test_a_gpu_launch_with_the_local_sandbox() -> None:
    assert rl_env(cfg(), None) == {
        "VERL_USE_EXTERNAL_MODULES": PLUGIN_MODULE,
        ENV_SANDBOX_PROCESSES_PER_NODE: "6",  # (8 agent-loop + 4 reward workers) over 2 nodes
    }


def test_cpu_file_logger_forwarded_variables_and_a_remote_sandbox(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("VERL_USE_EXTERNAL_MODULES", "mine," + PLUGIN_MODULE)
    monkeypatch.setenv(names.ENV_TRACE_DIR, "/tmp/trace")
    sandbox = {"backend": "sandbox_fusion", "url": "http://config:1", "pool_size": 3}
    env = rl_env(cfg("cpu", sandbox, ["console", "file"]), None)
    assert env["VERL_USE_EXTERNAL_MODULES"] == f"mine,{PLUGIN_MODULE}"  # once, after the user's
    assert env[cpu_names.PLATFORM_ENV] == cpu_names.PLATFORM
    assert env["VERL_FILE_LOGGER_ROOT"] == str(tmp_path / "ck")
    assert env[names.ENV_TRACE_DIR] == "/tmp/trace"
    # agentrl.sandbox reaches every worker with the trainer config (RecipeConfig): no second copy in the environment
    assert ENV_SANDBOX_URL not in env and ENV_SANDBOX_BACKEND not in env
    assert env[ENV_SANDBOX_POOL_SIZE] == "3"
    assert rl_env(cfg(sandbox=sandbox), "http://flag:2")[ENV_SANDBOX_URL] == "http://flag:2"  # SANDBOX_URL= wins


def test_a_cpu_launch_sets_its_defaults_unless_the_user_did(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr("psutil.cpu_count", lambda logical=True: 2)
    assert platform_env(cfg("cpu")) == {
        cpu_names.PLATFORM_ENV: cpu_names.PLATFORM,
        "OMP_WAIT_POLICY": "PASSIVE",  # the trainer, vLLM and Ray's workers share the cores: no spinning
        "RAY_enable_worker_prestart": "0",  # no idle Ray workers that verl's actors could not use
        "RAY_prestart_worker_first_driver": "0",
        "TQ_NUM_THREADS": "2",
    }
    assert platform_env(cfg("cuda")) == {}
    monkeypatch.setenv(OMP_WAIT_ENV, "ACTIVE")
    monkeypatch.setenv("RAY_enable_worker_prestart", "1")
    env = platform_env(cfg("cpu"))  # the launch inherits the user's values
    assert OMP_WAIT_ENV not in env and "RAY_enable_worker_prestart" not in env
    assert env["RAY_prestart_worker_first_driver"] == "0"


def test_the_token_file_path_travels_and_the_token_never_does(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv(ENV_SANDBOX_TOKEN, "exported-secret")  # local workers inherit it; it is never shipped
    sandbox = {"backend": "sandbox_fusion", "url": "http://s:1", "token_file": "secrets/sandbox.token"}
    env = rl_env(cfg(sandbox=sandbox), None)
    assert env[ENV_SANDBOX_TOKEN_FILE] == str(tmp_path / "secrets" / "sandbox.token")  # absolute: workers' cwd differs
    assert ENV_SANDBOX_TOKEN not in env and "exported-secret" not in repr(env)
    monkeypatch.setenv(ENV_SANDBOX_TOKEN_FILE, "/etc/agentrl/sandbox.token")  # the driver's variable wins
    assert rl_env(cfg(sandbox=sandbox), None)[ENV_SANDBOX_TOKEN_FILE] == "/etc/agentrl/sandbox.token"


def test_a_token_in_the_trainer_config_stops_the_launch() -> None:
    with pytest.raises(ValueError) as refused:
        rl_env(cfg(sandbox={"backend": "sandbox_fusion", "url": "http://s:1", "token": "in-config"}), None)
    assert str(refused.value) == TOKEN_IN_CONFIG and "in-config" not in TOKEN_IN_CONFIG


def _checked(sandbox: dict | None, sandbox_url: str | None = None) -> tuple:
    checked = worker_sandbox_config(cfg(sandbox=sandbox), sandbox_url)
    return checked.backend, checked.url, checked.token_file


def test_the_sandbox_preflight_checks_is_the_one_the_workers_get(monkeypatch: pytest.MonkeyPatch, tmp_path) -> None:
    monkeypatch.chdir(tmp_path)
    assert _checked(None) == ("local", None, None)  # no url anywhere: this node's pool
    assert _checked(None, "http://node7:8080") == ("sandbox_fusion", "http://node7:8080", None)  # SANDBOX_URL=
    # agentrl.sandbox.url alone (backend left at local) reaches the workers as AGENTRL_SANDBOX_URL: the remote server
    assert _checked({"url": "http://cfg:9", "token_file": "tok"}) == (
        "sandbox_fusion",
        "http://cfg:9",
        f"{tmp_path}/tok",
    )
    assert _checked({"url": "http://cfg:9"}, "http://flag:2")[1] == "http://flag:2"  # SANDBOX_URL= wins
    assert _checked({"url": ["http://a:1", "http://b:2"]})[1] == ("http://a:1", "http://b:2")  # a fleet
    assert _checked({"backend": "subprocess"}, "http://flag:2") == ("subprocess", "http://flag:2", None)  # named
    monkeypatch.setenv(ENV_SANDBOX_URL, "http://exported:3")  # the launcher's own environment, as workers inherit it
    assert _checked(None) == ("sandbox_fusion", "http://exported:3", None)
    with pytest.raises(ValueError) as refused:
        _checked({"url": "http://cfg:9", "token": "in-config"})
    assert str(refused.value) == TOKEN_IN_CONFIG


def test_the_sandbox_runtime_travels_to_every_worker(monkeypatch: pytest.MonkeyPatch) -> None:
    """agentrl.sandbox.runtime reaches the workers in the config; AGENTRL_SANDBOX_RUNTIME must travel with them."""
    monkeypatch.delenv(ENV_SANDBOX_RUNTIME, raising=False)
    assert ENV_SANDBOX_RUNTIME not in rl_env(cfg(sandbox={"runtime": "modern"}), None)
    assert worker_sandbox_config(cfg(sandbox={"runtime": "modern"}), None).runtime == "modern"
    assert worker_sandbox_config(cfg(), None).runtime == "sandboxfusion"
    monkeypatch.setenv(ENV_SANDBOX_RUNTIME, "modern")
    assert rl_env(cfg(), None)[ENV_SANDBOX_RUNTIME] == "modern"
    assert worker_sandbox_config(cfg(sandbox={"runtime": "sandboxfusion"}), None).runtime == "modern"
