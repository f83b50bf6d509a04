"""The launcher's view of a trainer's output (issue 46): verl's config dump to a file, a warning once, every error."""

from __future__ import annotations

import io
import pprint
from pathlib import Path

from agentrl_recipe.launcher import log_stream

TASK = "\x1b[36m(TaskRunnerV1 pid=19248)\x1b[0m "
WORKER = "\x1b[36m(WorkerDict pid={pid})\x1b[0m "
ENGINE = "/verl/workers/engine/__init__.py:69: UserWarning: megatron engine is not available: ModuleNotFoundError('x')"
THREADS = (
    "WARNING:2026-12-06 03:35:{s}:target_num_threads 8 should not exceed total physical CPU cores 2. Setting to 2."
)
DUMP = [f"{TASK}{{'actor_rollout_ref': {{'actor': {{'_target_': 'verl.workers.config.FSDPActorConfig',"] + [
    f"{TASK}                                'key_{i}': {'x' * 40!r}," for i in range(80)
]


def shown(chunks: list[str], tmp_path: Path, *, raw: bool = False) -> tuple[list[str], str | None]:
    out = io.BytesIO()
    stream = log_stream.LogStream(tmp_path, out, raw=raw)  # type: ignore[arg-type]  # BytesIO is a BinaryIO
    for chunk in chunks:
        stream.feed(chunk.encode())
    summary = stream.close()
    return out.getvalue().decode().splitlines(), summary


def test_a_warning_is_shown_once_and_its_repeats_counted(tmp_path: Path) -> None:
    lines = []
    for pid in (1, 2, 3):
        lines += [f"{WORKER.format(pid=pid)}{ENGINE}", f"{WORKER.format(pid=pid)}  warnings.warn(f'megatron')"]
        lines += [f"{WORKER.format(pid=pid)}{THREADS.format(s=10 + pid)}", f"{WORKER.format(pid=pid)}step:{pid}"]
    lines.append(f"{TASK}{THREADS.format(s=20)}\x1b[32m [repeated 51x across cluster]\x1b[0m")  # Ray's own dedup
    out, summary = shown(["\n".join(lines) + "\n"], tmp_path)
    assert sum("megatron engine is not available" in x for x in out) == 1
    assert sum("warnings.warn" in x for x in out) == 1  # the repeat's source line goes with it
    assert sum("target_num_threads" in x for x in out) == 1
    assert [x for x in out if "step:" in x] == [f"{WORKER.format(pid=p)}step:{p}" for p in (1, 2, 3)]
    assert summary == (
        f"7 repeated warning and schema lines not shown (first copies are); full output: {tmp_path}/launch.log"
    )
    assert (tmp_path / "launch.log").read_text() == "\n".join(lines) + "\n"  # everything, unfiltered


def test_errors_are_never_hidden_even_repeated(tmp_path: Path) -> None:
    error = f"{TASK}ERROR:2026-12-06 03:35:11:Failed to run the sandbox: warning level exceeded"
    lines = [error, error, f"{TASK}Traceback (most recent call last):", f"{TASK}RuntimeError: warning: boom"] * 2
    out, summary = shown(["\n".join(lines) + "\n"], tmp_path)
    assert len(out) == 8 and summary is None


def test_verls_config_dump_goes_to_a_file_in_one_line(tmp_path: Path) -> None:
    after = f"{TASK}INFO:2026-12-06 03:35:53,889:Total training steps: 4"
    small = f"{TASK}{{'val/acc': 0.5}}"  # a short dict is output, not a dump
    out, _ = shown(["\n".join([*DUMP, after, small]) + "\n"], tmp_path)
    assert out == [f"verl's composed config (81 lines): {tmp_path}/verl_config.txt", after, small]
    assert (tmp_path / "verl_config.txt").read_text().count("key_") == 80
    sft_dump = "{'data': {" + "'k': 1, " * 400 + "}}"  # verl's SFT trainer prints it as one line
    out, _ = shown([sft_dump + "\nstep:1\n"], tmp_path / "sft")
    assert out == [f"verl's composed config (1 lines): {tmp_path}/sft/verl_config.txt", "step:1"]


def test_a_progress_bar_is_shown_as_it_moves(tmp_path: Path) -> None:
    out = io.BytesIO()
    stream = log_stream.LogStream(tmp_path, out)  # type: ignore[arg-type]
    stream.feed(b"Epoch 1/30:   0%|  | 0/6\r")
    assert out.getvalue() == b"Epoch 1/30:   0%|  | 0/6\r"  # before any newline
    stream.feed(b"Epoch 1/30:  17%|  | 1/6\rEpoch 1/30: 100%|  | 6/6\n")
    assert out.getvalue().endswith(b"Epoch 1/30:  17%|  | 1/6\rEpoch 1/30: 100%|  | 6/6\n")
    assert stream.close() is None


def test_verbose_shows_everything(tmp_path: Path) -> None:
    lines = [*DUMP, f"{TASK}{ENGINE}", f"{TASK}{ENGINE}"]
    out, summary = shown(["\n".join(lines) + "\n"], tmp_path, raw=True)
    assert len(out) == len(lines) and summary is None


SCHEMA = ["{", '  "type": "function",', '  "function": {', '    "name": "code_interpreter"', "  }", "}"]


def test_a_json_object_printed_again_is_shown_once(tmp_path: Path) -> None:
    """verl's dataset prints the tool schemas each time one is built: train set, val set, every agent-loop worker."""
    task = [f"{TASK}{x}" for x in ["Using dataset class: AgentRLDataset", *SCHEMA, "dataset len: 64"]]
    worker = [f"{WORKER.format(pid=7)}{x}" for x in SCHEMA]
    other = [f"{TASK}{x}" for x in ["{", '  "type": "other"', "}"]]
    broken = [f"{TASK}{{", f"{TASK}  ValueError: in a schema", f"{TASK}}}"]  # never hidden, even repeated
    out, summary = shown(["\n".join([*task, *task[1:-1], *worker, *other, *broken, *broken]) + "\n"], tmp_path)
    assert out == [*task, *other, *broken, *broken]  # the second copy and the worker's copy are hidden
    assert summary == (
        f"12 repeated warning and schema lines not shown (first copies are); full output: {tmp_path}/launch.log"
    )


def test_an_unfinished_or_interrupted_json_object_is_shown(tmp_path: Path) -> None:
    interrupted = [f"{TASK}{{", f'{TASK}  "a": 1,', f"{WORKER.format(pid=3)}step:1", f'{TASK}  "b": 2', f"{TASK}}}"]
    out, summary = shown(["\n".join([*interrupted, *interrupted[:2]]) + "\n"], tmp_path)
    assert out == [*interrupted, *interrupted[:2]] and summary is None


def test_a_dump_whose_first_key_stands_alone_goes_to_the_file_whole(tmp_path: Path) -> None:
    """verl's main_ppo pprints "{'actor_rollout_ref': " on a line of its own when the value is too wide."""
    dump = [f"{TASK}{{'actor_rollout_ref': ", *(line.replace("{'actor_rollout_ref': ", "") for line in DUMP)]
    out, _ = shown(["\n".join([*dump, f"{TASK}step:1"]) + "\n"], tmp_path)
    assert out == [f"verl's composed config (82 lines): {tmp_path}/verl_config.txt", f"{TASK}step:1"]
    assert (tmp_path / "verl_config.txt").read_text().startswith(f"{TASK}{{'actor_rollout_ref': \n{TASK}{{'actor': ")


def test_another_workers_line_inside_the_dump_is_shown_and_the_dump_stays_whole(tmp_path: Path) -> None:
    """Ray interleaves workers' lines: one in the middle of the TaskRunner's dump is shown where it came, and the dump
    is still one file entry and one announcement (it was cut in pieces: 3 announcements for 1 dump under load)."""
    other = f"{WORKER.format(pid=7)}INFO: loading weights"
    out, _ = shown(["\n".join([*DUMP[:40], other, *DUMP[40:], f"{TASK}step:1"]) + "\n"], tmp_path)
    assert out == [other, f"verl's composed config (81 lines): {tmp_path}/verl_config.txt", f"{TASK}step:1"]
    assert (tmp_path / "verl_config.txt").read_text().count("key_") == 80


def _pprinted_config() -> list[str]:
    """A verl-like pprint dump: nested to several levels, with strings pprint quotes in both ways and a backslash."""
    config = {
        "actor_rollout_ref": {
            "actor": {f"key_{i}": "x" * 40 for i in range(40)},  # over CONFIG_DUMP_MIN_CHARS: a dump
            "rollout": {"name": "vllm", "stop": ["it's", 'say "hi"', "a\\b {"], "engine_kwargs": {"vllm": {}}},
        },
        "trainer": {"logger": ["console", "file"], "project_name": "agentrl_recipe", "ray_wait_register_center": 300},
    }
    return pprint.pformat(config, width=80).splitlines()


def test_a_dump_line_ray_forwarded_in_pieces_is_joined_and_the_dump_stays_one(tmp_path: Path) -> None:
    """Under load Ray's log monitor reads a line the worker has half written and forwards it as two lines, the second
    starting anywhere ("}," or ": " at column 0, inside a string): the pieces are joined in the file, and the dump is
    one announcement (the filter ended it at such a piece: 3 announcements for 2 dumps in a CI run)."""
    dump = _pprinted_config()

    def at(part: str) -> tuple[int, int]:
        return next((i, line.index(part)) for i, line in enumerate(dump) if part in line)

    cuts = dict(
        [
            at("},"),  # "}," at column 0
            at(": 'xxxx"),  # ": " at column 0
            at('"hi"'),  # inside a string literal (the line's strings also hold a quote, a backslash and a "{")
            (at("'console', ")[0], at("'console', ")[1] + len("'console', ")),  # after ", "
            (at("{'engine_kwargs'")[0], at("{'engine_kwargs'")[1] + 1),  # after "{" (CI: "'rollout': {" alone)
        ]
    )
    assert len(cuts) == 5 and all(0 < abs(at) < len(dump[i]) for i, at in cuts.items()), cuts
    other = f"{WORKER.format(pid=7)}INFO: loading weights"
    lines = []
    for i, line in enumerate(dump):
        pieces = [line[: cuts[i]], line[cuts[i] :]] if i in cuts else [line]
        lines += [f"{TASK}{piece}" for piece in pieces]
        if i == 3:
            lines.append(other)  # another worker's line between two of the dump's
    out, _ = shown(["\n".join([*lines, f"{TASK}step:1"]) + "\n"], tmp_path)
    assert out == [other, f"verl's composed config ({len(dump)} lines): {tmp_path}/verl_config.txt", f"{TASK}step:1"]
    assert (tmp_path / "verl_config.txt").read_text() == "".join(f"{TASK}{line}\n" for line in dump)


def test_a_dump_is_announced_as_soon_as_its_brackets_close(tmp_path: Path) -> None:
    """The dump ends at its last line, not at the worker's next one (which may come minutes later, or never)."""
    dump = [f"{TASK}{line}" for line in _pprinted_config()]
    out = io.BytesIO()
    stream = log_stream.LogStream(tmp_path, out)  # type: ignore[arg-type]  # BytesIO is a BinaryIO
    stream.feed(("\n".join(dump) + "\n").encode())  # and nothing more yet: the stream is not closed
    assert out.getvalue().decode().splitlines() == [
        f"verl's composed config ({len(dump)} lines): {tmp_path}/verl_config.txt"
    ]
    assert stream.close() is None
