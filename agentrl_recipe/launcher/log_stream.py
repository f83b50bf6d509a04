"""What a launch shows of its trainer's output: every line, except verl's config dump and the repeats of a warning
or of a multi-line JSON object (the tool schemas verl's dataset prints each time one is built).

verl's ``main_ppo`` pprints the whole composed config (~1,000 lines for the CPU config) and its SFT trainer prints it
as one line of ~20,000 characters; each Ray worker repeats the same library warnings. The launcher passes the
trainer's output through :class:`LogStream`: the config dump goes to ``verl_config.txt`` (one line says where), a
warning is shown the first time and its repeats are counted (one line at the end), and everything else — every ERROR,
traceback and exception line, progress bars as they move — is shown as it comes. The unfiltered output is written to
``launch.log`` next to them; ``VERBOSE=1`` (``--verbose``) shows it all on the terminal instead.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from collections import Counter
from pathlib import Path
from typing import BinaryIO

ANSI = re.compile(r"\x1b\[[0-9;]*m")
# Ray's prefix on a worker's line: "(TaskRunner pid=123)", "(WorkerDict pid=9, ip=10.0.0.1)"
RAY_PREFIX = re.compile(r"^\((?P<who>[^()]*?)(?: pid=\d+)?(?:, ip=[^()]*)?\)\s?")
WARNING = re.compile(r"\bWARNING\b|\bWARN\b|Warning: |\bwarning\b")
ERROR = re.compile(
    r"\bERROR\b|\bCRITICAL\b|\bFATAL\b|Traceback \(most recent call last\)|^\s*[A-Z]\w*(Error|Exception)\b"
)
TIMES_AND_NUMBERS = re.compile(r"\d+")
RAY_REPEATED = re.compile(r"\s*\[repeated \d+x across cluster\].*$")  # Ray's own dedup suffix: the same warning
CONFIG_DUMP_START = "{'"  # pprint / print of a DictConfig: {'actor_rollout_ref': {...
CONFIG_DUMP_MIN_CHARS = 2000  # a short dict on its own line is output, not a dump
# How a pprint line that goes on below ends: a comma, or ": " after a key whose value is too wide. pprint writes a
# container's first item after its opening bracket, so any other ending inside the dump ("'rollout': {" in CI) is a
# line Ray's log monitor split.
LINE_ENDS = (",", ": ")
# A JSON object printed over several lines ("{" alone, ..., "}" alone): verl's dataset prints the tool schemas each
# time one is built (the train set, the val set, every agent-loop worker: 20 lines each). A repeat is hidden.
BLOCK_START, BLOCK_END = "{", "}"
BLOCK_MAX_LINES = 200  # a block longer than this is shown as it comes (output must not wait on a stray brace)
LOG_FILE = "launch.log"
CONFIG_FILE = "verl_config.txt"


def split_prefix(text: str) -> tuple[str, str]:
    """(the Ray worker's name or "", the line's content) of one output line."""
    plain = ANSI.sub("", text)
    found = RAY_PREFIX.match(plain)
    return (found.group("who"), plain[found.end() :]) if found else ("", plain)


def is_error(content: str) -> bool:
    return bool(ERROR.search(content))


def warning_key(content: str) -> str | None:
    """What two copies of one warning share (numbers, pids and times removed); None for a line that is no warning or
    that reports an error (never hidden)."""
    if is_error(content) or not WARNING.search(content):
        return None
    return TIMES_AND_NUMBERS.sub("#", RAY_REPEATED.sub("", content)).strip()


class Brackets:
    """The brackets left open by Python-literal text read in pieces (pprint's output), string literals skipped: a
    config dump is whole when they are all closed again."""

    def __init__(self) -> None:
        self.depth = 0
        self.quote = ""  # the quote of the string literal the text stopped in ("" outside one)
        self._escaped = False

    def feed(self, text: str) -> int:
        for char in text:
            if self.quote:
                if self._escaped:
                    self._escaped = False
                elif char == "\\":
                    self._escaped = True
                elif char == self.quote:
                    self.quote = ""
            elif char in "'\"":
                self.quote = char
            elif char in "{[(":
                self.depth += 1
            elif char in "}])":
                self.depth -= 1
        return self.depth


class LogStream:
    """Filters a trainer's output line by line (:meth:`feed`), writing what it shows to ``out``."""

    def __init__(self, out_dir: Path, out: BinaryIO, *, raw: bool = False) -> None:
        out_dir.mkdir(parents=True, exist_ok=True)
        self.config_path = out_dir / CONFIG_FILE
        self.log_path = out_dir / LOG_FILE
        self.out = out
        self.raw = raw
        self.seen: set[str] = set()
        self.repeats: Counter[str] = Counter()
        self._log = open(self.log_path, "ab")  # noqa: SIM115  # closed by close()
        self._pending = b""
        self._shown = 0  # bytes of the pending line already shown (a progress bar's \r updates)
        self._dump: list[str] = []  # the config dump being collected
        self._dump_who: str | None = None
        self._brackets = Brackets()  # of the dump being collected
        self._dropped_last = False  # the last line was a hidden repeat: its indented continuation goes too
        self._block: list[tuple[str, str]] = []  # a multi-line JSON object being collected: (line, content)
        self._block_who = ""
        self.seen_blocks: set[tuple[str, ...]] = set()

    def feed(self, chunk: bytes) -> None:
        self._log.write(chunk)
        if self.raw:
            self._write(chunk)
            return
        self._pending += chunk
        while b"\n" in self._pending:
            line, self._pending = self._pending.split(b"\n", 1)
            shown, self._shown = self._shown, 0
            self._line(line, shown)
        last_cr = self._pending.rfind(b"\r")
        if last_cr >= self._shown and not self._dump_who:  # a progress bar moving: show it now
            self._write(self._pending[self._shown : last_cr + 1])
            self._shown = last_cr + 1

    def _line(self, line: bytes, shown: int) -> None:
        head, _, tail = line[shown:].rpartition(b"\r")
        text = tail.decode(errors="replace")
        who, content = split_prefix(text)
        if self._dump_who == who:  # another worker's line, interleaved by Ray, goes on below and the dump stays open
            if self._continue_dump(text, content):
                return
            self._end_dump()
        if self._block:
            if who == self._block_who and len(self._block) < BLOCK_MAX_LINES:
                self._block.append((text, content))
                if content.rstrip() == BLOCK_END:
                    self._end_block(repeat_only=True)
                return
            self._end_block(repeat_only=False)
        if content.rstrip() == BLOCK_START and not head:
            self._block, self._block_who = [(text, content)], who
            return
        if content.startswith(CONFIG_DUMP_START) and not is_error(content) and self._dump_who is None:
            self._write(head + b"\r" if head else b"")
            self._dump, self._dump_who, self._brackets = [text], who, Brackets()
            if self._brackets.feed(content) <= 0:  # whole on one line (verl's SFT trainer prints it so)
                self._end_dump()
            return
        key = warning_key(content)
        continuation = self._dropped_last and content.startswith(" ") and not is_error(content)
        if (key is not None and key in self.seen) or continuation:
            self.repeats[key or "continuation"] += 1
            self._dropped_last = True
            if head or shown:
                self._write(head + b"\r\n" if head else b"\n")
            return
        self._dropped_last = False
        if key is not None:
            self.seen.add(key)
        self._write(line[shown:] + b"\n")

    def _continue_dump(self, text: str, content: str) -> bool:
        """Whether the dump's worker's next line belongs to the dump (it is added, and the dump ended once whole).

        pprint indents every line after the first, or breaks after a key whose value is too wide. Under load Ray's log
        monitor forwards a line the worker had half written as two lines, the second starting anywhere ("}," or ": "):
        while the dump's brackets are open, a piece that follows a line pprint did not end there is joined to it."""
        if is_error(content):
            return False
        last = self._dump[-1]
        if self._brackets.quote or not (content.startswith(" ") or last.endswith(LINE_ENDS)):
            self._dump[-1] += content  # the rest of a line Ray forwarded in two pieces
        elif content.startswith(" ") or last.endswith(": "):
            self._dump.append(text)
        else:
            return False
        if self._brackets.feed(content) <= 0:
            self._end_dump()
        return True

    def _end_block(self, *, repeat_only: bool) -> None:
        """Show the collected block, or count it as a repeat when a complete copy of it was shown before."""
        lines, self._block = self._block, []
        key = tuple(content for _, content in lines)
        if repeat_only and key in self.seen_blocks and not any(is_error(content) for content in key):
            self.repeats["block"] += len(lines)
            return
        if repeat_only:
            self.seen_blocks.add(key)
        self._write("".join(text + "\n" for text, _ in lines).encode())

    def _end_dump(self) -> None:
        lines, self._dump, self._dump_who = self._dump, [], None
        if sum(len(x) for x in lines) < CONFIG_DUMP_MIN_CHARS:  # not a dump: show it
            self._write("".join(x + "\n" for x in lines).encode())
            return
        with open(self.config_path, "a") as f:
            f.writelines(x + "\n" for x in lines)
        self._write(f"verl's composed config ({len(lines)} lines): {self.config_path}\n".encode())

    def close(self) -> str | None:
        """Flush what is left; returns the summary line of what was hidden (None when nothing was)."""
        if self._pending:
            self._line(self._pending, self._shown)
            self._pending = b""
        if self._dump_who is not None:
            self._end_dump()
        if self._block:
            self._end_block(repeat_only=False)
        self._log.close()
        hidden = sum(self.repeats.values())
        if not hidden:
            return None
        return f"{hidden} repeated warning and schema lines not shown (first copies are); full output: {self.log_path}"

    def _write(self, data: bytes) -> None:
        if data:
            self.out.write(data)
            self.out.flush()


def run(command: list[str], env: dict[str, str], out_dir: Path, *, raw: bool = False) -> int:
    """Run ``command`` with its output through a :class:`LogStream` into ``out_dir``; returns its exit status."""
    stream = LogStream(out_dir, sys.stdout.buffer, raw=raw)
    proc = subprocess.Popen(command, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
    assert proc.stdout is not None
    try:
        while chunk := os.read(proc.stdout.fileno(), 65536):
            stream.feed(chunk)
        code = proc.wait()
    finally:
        if proc.poll() is None:
            proc.terminate()
        summary = stream.close()
    if summary:
        print(summary, flush=True)
    return code
