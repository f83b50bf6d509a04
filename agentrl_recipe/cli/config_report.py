"""What ``configs check`` reports (:class:`Problem`, :class:`CheckReport`) and the helpers every check uses to read a
composed config."""

from __future__ import annotations

import dataclasses
from typing import Any

from omegaconf import OmegaConf


@dataclasses.dataclass
class Problem:
    key: str
    message: str

    def __str__(self) -> str:
        return f"{self.key}: {self.message}" if self.key else self.message


@dataclasses.dataclass
class CheckReport:
    name: str
    kind: str = "?"
    errors: list[Problem] = dataclasses.field(default_factory=list)
    warnings: list[Problem] = dataclasses.field(default_factory=list)

    @property
    def ok(self) -> bool:
        return not self.errors

    def format(self) -> str:
        lines = [f"{'OK' if self.ok else 'FAIL'} {self.name} ({self.kind})"]
        lines += [f"  error   {p}" for p in self.errors] + [f"  warning {p}" for p in self.warnings]
        return "\n".join(lines)


def resolved(cfg: Any, key: str, report: CheckReport | None = None) -> Any:
    """``key``'s value with interpolations resolved (containers as plain dicts/lists); None, and an error in
    ``report`` when given, when it cannot be resolved."""
    try:
        value = OmegaConf.select(cfg, key, throw_on_missing=True)
        return OmegaConf.to_container(value, resolve=True) if OmegaConf.is_config(value) else value
    except Exception as e:
        if report is not None:
            report.errors.append(Problem(key, f"cannot resolve: {e}"))
        return None


def node(cfg: Any, key: str) -> Any:
    """``key``'s node as it is (interpolations unresolved); None when absent."""
    return OmegaConf.select(cfg, key)


def first_line(e: BaseException) -> str:
    text = str(e).strip() or type(e).__name__
    return text.splitlines()[0][:400]
