"""The check report and the helpers that read a composed config."""

from __future__ import annotations

from omegaconf import OmegaConf

from agentrl_recipe.cli.config_report import CheckReport, Problem, first_line, node, resolved


def test_the_report_lists_errors_then_warnings() -> None:
    report = CheckReport("cfg", "rl", warnings=[Problem("data.train_files", "'x' does not exist yet")])
    assert report.ok and report.format() == "OK cfg (rl)\n  warning data.train_files: 'x' does not exist yet"
    report.errors.append(Problem("", "cannot compose: boom"))
    assert not report.ok
    assert report.format().splitlines()[:2] == ["FAIL cfg (rl)", "  error   cannot compose: boom"]


def test_resolved_and_node() -> None:
    cfg = OmegaConf.create({"a": {"b": 2, "c": "${a.b}", "d": {"e": "${a.b}"}}, "m": "???", "bad": "${nope}"})
    assert resolved(cfg, "a.c") == 2 and resolved(cfg, "a.d") == {"e": 2}
    assert node(cfg, "a.c") == 2 and node(cfg, "x.y") is None
    report = CheckReport("cfg")
    assert resolved(cfg, "m") is None and report.ok  # without a report nothing is recorded
    assert resolved(cfg, "bad", report) is None
    assert [p.key for p in report.errors] == ["bad"] and "cannot resolve" in report.errors[0].message


def test_first_line() -> None:
    assert first_line(ValueError("one\ntwo")) == "one"
    assert first_line(KeyError()) == "KeyError"
    assert len(first_line(ValueError("x" * 1000))) == 400
