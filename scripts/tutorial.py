#!/usr/bin/python3
"""Runs docs/tutorial.md and checks its recorded output, so the tutorial cannot rot.

Every ```console block of the tutorial is a session: a line starting with "$ " is a command,
the lines after it (up to the next "$ " or the end of the block) are its recorded output
(stdout and stderr as the terminal shows them, then "[exit N]" when the exit code is not 0).
Commands run in order, with bash, in one fresh temporary directory holding a copy of the
repository's examples/, scripts/export_models.py and scripts/gen_serving_trace.py (so `gearbox run examples/four_ops.gbx ...` works and files a command
writes are there for the next one), with the build's bin/ first on PATH.

Before comparing, both sides are masked: measured times (a number followed by ns, us, ms, s or
seconds; also GB/s and GFLOP/s), percentages, hex ids, datetimes and pids in file names, the
number of threads a parallel step used and the plan id of a gear become placeholders, the measured verdict of `compare` (which mode is fastest by measured host time
depends on the machine) becomes one placeholder line, and runs of spaces become one space
(column widths follow the numbers).

    /usr/bin/python3 scripts/tutorial.py            # check: exit 1 and a diff per mismatch
    /usr/bin/python3 scripts/tutorial.py --update   # rewrite the recorded outputs in place

--update keeps the prose and the commands and replaces only each command's output with what it
printed now (unmasked), writing the file atomically. Run it after a change to what gearbox
prints, read the diff (git diff docs/tutorial.md), and commit it. Options: --build-dir
(default $GEARBOX_BUILD_DIR or build/), --doc (default docs/tutorial.md), --timeout seconds per
command (default 60).
"""
import argparse
import difflib
import os
import pathlib
import re
import shutil
import subprocess
import sys
import tempfile
import time

REPO = pathlib.Path(__file__).resolve().parents[1]
FENCE_OPEN = "```console"
FENCE_CLOSE = "```"
PROMPT = "$ "

MASKS = [
    # The measured verdict of compare and its explanation lines: machine-dependent.
    (re.compile(r"^(fastest by measured host time|measured host time: no clear winner).*"
                r"(\n  .*)*", re.M), "<measured verdict>"),
    (re.compile(r"\b\d{14}\b"), "<datetime>"),
    # --record-op-info folders: ts<datetime><micros>_pid<pid>_outputs/<pid>.
    (re.compile(r"ts\d{14,}_pid\d+_outputs/\d+"), "ts<datetime>_pid<pid>_outputs/<pid>"),
    # Run-to-run variation of gearbox itself: how many oneTBB threads took part, and which
    # plan id a gear got (gears compile in parallel, plan ids are handed out in finish order).
    (re.compile(r"\bon \d+ threads?\b"), "on <n> threads"),
    (re.compile(r"\b(gear \d+) \(plan #\d+\)"), r"\1 (plan #<id>)"),
    (re.compile(r"\b0x[0-9a-fA-F]+\b"), "<hex>"),
    (re.compile(r"\b[0-9a-f]{12,}\b"), "<hex>"),
    (re.compile(r"[-+]?\d+(\.\d+)?([eE][-+]?\d+)?\s?(GB/s|GFLOP/s)"), "<rate>"),
    (re.compile(r"[-+]?\d+(\.\d+)?([eE][-+]?\d+)?\s?(ns|us|ms|seconds|s)\b"), "<time>"),
    (re.compile(r"[-+]?\d+(\.\d+)?\s?%"), "<pct>"),
    (re.compile(r"[ \t]+"), " "),
]


def mask(text):
    for pattern, repl in MASKS:
        text = pattern.sub(repl, text)
    return "\n".join(line.rstrip() for line in text.strip("\n").split("\n"))


class Command:
    def __init__(self, line_no, command, expected):
        self.line_no = line_no  # 1-based line of the "$ " line in the doc
        self.command = command
        self.expected = expected  # list of recorded output lines


def parse(lines):
    """Returns (commands, blocks): blocks are (first, last) line indexes of each block's body."""
    commands, blocks = [], []
    i = 0
    while i < len(lines):
        if lines[i].strip() == FENCE_OPEN:
            start = i + 1
            j = start
            while j < len(lines) and lines[j].strip() != FENCE_CLOSE:
                j += 1
            if j == len(lines):
                raise SystemExit(f"tutorial: line {i + 1}: ```console block is never closed")
            blocks.append((start, j))
            current = None
            for k in range(start, j):
                if lines[k].startswith(PROMPT):
                    current = Command(k + 1, lines[k][len(PROMPT):], [])
                    commands.append(current)
                elif current is None:
                    if lines[k].strip():
                        raise SystemExit(
                            f"tutorial: line {k + 1}: output before any '$ ' command")
                else:
                    current.expected.append(lines[k])
            i = j + 1
        else:
            i += 1
    return commands, blocks


def run(command, cwd, env, timeout):
    start = time.monotonic()
    try:
        r = subprocess.run(["bash", "-c", command], cwd=cwd, env=env, stdout=subprocess.PIPE,
                           stderr=subprocess.STDOUT, text=True, timeout=timeout)
        out, code = r.stdout, r.returncode
    except subprocess.TimeoutExpired:
        out, code = f"[timed out after {timeout} s]\n", -1
    out = out.rstrip("\n")
    if code != 0:
        out += ("\n" if out else "") + f"[exit {code}]"
    return out, time.monotonic() - start


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--update", action="store_true", help="rewrite the recorded outputs")
    ap.add_argument("--build-dir", default=os.environ.get("GEARBOX_BUILD_DIR", REPO / "build"))
    ap.add_argument("--doc", default=REPO / "docs" / "tutorial.md")
    ap.add_argument("--timeout", type=float, default=60)
    args = ap.parse_args()
    doc = pathlib.Path(args.doc)
    binary = pathlib.Path(args.build_dir).resolve() / "bin" / "gearbox"
    if not binary.exists():
        raise SystemExit(f"tutorial: no gearbox binary at {binary}: build first "
                         "(bash scripts/build.sh release)")
    lines = doc.read_text().split("\n")
    commands, blocks = parse(lines)
    if not commands:
        raise SystemExit(f"tutorial: {doc} has no ```console block with '$ ' commands")

    env = dict(os.environ)
    env["PATH"] = str(binary.parent) + os.pathsep + env.get("PATH", "")
    env["LC_ALL"] = "C"
    env.pop("CI", None)  # output must not depend on the CI variable
    failures, outputs = [], {}
    with tempfile.TemporaryDirectory(prefix="gearbox_tutorial_") as tmp:
        shutil.copytree(REPO / "examples", pathlib.Path(tmp) / "examples",
                        ignore=shutil.ignore_patterns("consumer", "python", "*.pyc"))
        # The real-model chapters export torchvision models with the project's script.
        (pathlib.Path(tmp) / "scripts").mkdir()
        shutil.copy2(REPO / "scripts" / "export_models.py", pathlib.Path(tmp) / "scripts")
        # Chapter 6 writes serving traces.
        shutil.copy2(REPO / "scripts" / "gen_serving_trace.py", pathlib.Path(tmp) / "scripts")
        for c in commands:
            out, secs = run(c.command, tmp, env, args.timeout)
            outputs[c.line_no] = out
            want, got = mask("\n".join(c.expected)), mask(out)
            status = "ok" if want == got else "DIFFERS"
            print(f"{doc.name}:{c.line_no}: {status} ({secs:.2f} s): $ {c.command}")
            if want != got:
                diff = difflib.unified_diff(want.split("\n"), got.split("\n"),
                                            "recorded (masked)", "now (masked)", lineterm="")
                failures.append((c, "\n".join(diff)))

    if args.update:
        new = []
        for i, line in enumerate(lines):
            in_block = any(a <= i < b for a, b in blocks)
            if in_block and line.startswith(PROMPT):
                new.append(line)
                out = outputs[i + 1]
                if out:
                    new.extend(out.split("\n"))
            elif in_block:
                continue  # an old output line: replaced
            else:
                new.append(line)
        tmp = doc.with_name(doc.name + ".tmp")
        tmp.write_text("\n".join(new))
        os.replace(tmp, doc)
        print(f"tutorial: rewrote the outputs of {len(commands)} commands in {doc}")
        return 0
    for c, diff in failures:
        print(f"\n{doc}:{c.line_no}: output of `{c.command}` differs:\n{diff}")
    if failures:
        print(f"\ntutorial: {len(failures)} of {len(commands)} commands differ; if the change "
              "is intended, run /usr/bin/python3 scripts/tutorial.py --update and review the diff")
        return 1
    print(f"tutorial: all {len(commands)} commands match")
    return 0


if __name__ == "__main__":
    sys.exit(main())
