#!/usr/bin/python3
"""Runs every shell command of README.md and docs/*.md, and checks every relative link.

    /usr/bin/python3 tests/docs/run_doc_commands.py --build build --source .
    ... --list            print the commands as they would run (after the caps), run nothing
    ... --only training   only the pages whose path contains "training"
    ... --keep            keep the temporary run directories (their path is printed)

CTest runs it as `DocCommands` (label `docs`, tests/CMakeLists.txt). Standard library only.

What is a command
  * every line of a ```sh / ```bash / ```shell block (a line ending in `\\` joins the next;
    a `#` outside quotes, at the start of a word, begins a comment);
  * in a ```text / ```console block, the lines that start with `$ ` (a transcript: the rest of
    the block is output).
  A block holding a line `# not run by tests: <reason>` is listed as skipped with the reason.

Where it runs
  Each block gets a fresh working copy: a temporary folder holding a symbolic link to every
  top-level entry of the source tree (configs/, tests/, scripts/, ...), `build` linked to
  --build, and empty real `outputs/` and `exports/` folders. The commands run there in order,
  so `outputs/...` paths, a config's own `run_dir = "outputs/..."` and `--run-dir` all land in
  the temporary folder, and a command that reads what an earlier one of its block wrote
  (sample or export after train, train --init-from after export) finds it. Nothing is written
  into the source tree or the build tree.

Caps (so that the whole test takes a few minutes on 2 shared cores)
  * `mixprec train`: at most 2 steps (3 with --resume, so a resume has a step to do),
    `--progress quiet`, one evaluation batch; configs/llama3_100m.toml (97M parameters) also
    trains on 64-token rows without writing checkpoints;
  * `mixprec sample`: at most 8 tokens;
  * `build/bench/*`: `--help` appended after the documented arguments (the programs parse
    their arguments in order, so an outdated option still fails); bench_generate runs for
    real with --tokens 8 (it is quick, and a run checks more than its usage text);
  * `mpirun` / `mpiexec`: `--oversubscribe` and OMPI_ALLOW_RUN_AS_ROOT(_CONFIRM)=1; skipped
    when MPI is not installed.
Skipped, with the reason printed
  * `./scripts/main.sh` and `./scripts/test.sh`: they install packages and rebuild, and CI
    (.ci/run) runs both already; the other scripts/*.sh take hours (precision_story, fuzz);
  * commands whose program is not installed (python3 with torch or transformers, pip,
    tensorboard, ...);
  * in a sanitizer build (MIXPREC_SANITIZE=ON, CI's build-asan), the blocks that train
    (`mixprec train`, `mpirun`): ASan makes a step about 6x slower, and the optimised build's
    DocCommands runs them (as CI runs the PyTorch agreement tests in the optimised build only);
    the other blocks run. --run-sanitized runs them all.
Every other command must exit 0 (one that fails skips the rest of its block). The table at
the end lists each command with its status, seconds and caps; any failure or broken link
makes the exit status 1.
"""

from __future__ import annotations

import argparse
import os
import re
import shlex
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import unicodedata
from dataclasses import dataclass, field
from pathlib import Path

TRAIN_STEPS = 2          # steps of a capped `mixprec train` (one more with --resume)
SAMPLE_TOKENS = 8        # tokens of a capped `mixprec sample`
COMMAND_TIMEOUT = 400    # seconds for any one command
OPT_OUT = re.compile(r"^\s*#\s*not run by tests:\s*(.+?)\s*$")
SHELL_LANGS = {"sh", "bash", "shell"}
TRANSCRIPT_LANGS = {"text", "console"}
# Extra `--set`s for configs whose capped run is still heavy (config file name -> overrides).
HEAVY_CONFIGS = {
    "llama3_100m.toml": ["training.seq_len=64", "checkpoint.enable=false"],
}
# Bench programs without --help: the flag and value that make them short.
BENCH_CAPS = {"bench_generate": ("--tokens", "8")}
# Scripts the test does not run, and why.
SKIPPED_SCRIPTS = {
    "main.sh": "installs packages, rebuilds and trains 1500 steps; CI (.ci/run) runs it",
    "test.sh": "installs packages, rebuilds and runs CTest, which runs this test; CI (.ci/run) runs it",
    "precision_story.sh": "trains five to fifteen full runs (hours)",
    "fuzz.sh": "installs clang and fuzzes for minutes",
    "setup.sh": "installs Debian packages",
    "build.sh": "rebuilds the tree",
}


# ---- markdown ------------------------------------------------------------------------------

@dataclass
class Block:
    path: Path          # the page
    line: int           # 1-based line of the opening fence
    lang: str
    lines: list[tuple[int, str]] = field(default_factory=list)   # (line number, text)


def read_blocks(path: Path) -> tuple[list[Block], list[tuple[int, str]]]:
    """Fenced blocks, and the lines outside them (for the link check)."""
    blocks: list[Block] = []
    outside: list[tuple[int, str]] = []
    fence = None
    current = None
    for n, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
        stripped = line.lstrip()
        if fence is None:
            m = re.match(r"(`{3,}|~{3,})\s*([\w+-]*)", stripped)
            if m:
                fence = m.group(1)
                current = Block(path, n, m.group(2).lower())
            else:
                outside.append((n, line))
        elif stripped.startswith(fence) and stripped.strip() == stripped.strip()[0] * len(stripped.strip()):
            blocks.append(current)
            fence = None
        else:
            current.lines.append((n, line))
    if fence is not None:
        raise SystemExit(f"{path}:{current.line}: code block never closed")
    return blocks, outside


def strip_comment(text: str) -> str:
    """The command without a trailing `# comment` (a `#` outside quotes that starts a word)."""
    quote = None
    i = 0
    while i < len(text):
        c = text[i]
        if quote:
            if c == "\\" and quote == '"':
                i += 2
                continue
            if c == quote:
                quote = None
        elif c == "\\":
            i += 2
            continue
        elif c in "'\"":
            quote = c
        elif c == "#" and (i == 0 or text[i - 1].isspace()):
            return text[:i].rstrip()
        i += 1
    return text.rstrip()


@dataclass
class Command:
    path: Path
    line: int
    text: str                 # as written (comments removed, continuations joined)
    run: str | None = None    # as run (after the caps), None when skipped
    skip: str | None = None   # why it is not run
    notes: list[str] = field(default_factory=list)
    status: str = ""
    seconds: float = 0.0
    env: dict = field(default_factory=dict)   # extra environment (MPI launches)


def commands_of(block: Block) -> tuple[list[Command], str | None]:
    """The block's commands in order, and its opt-out reason if it has one."""
    opt_out = None
    for _, text in block.lines:
        m = OPT_OUT.match(text)
        if m:
            opt_out = m.group(1)
    out: list[Command] = []
    pending: tuple[int, str] | None = None   # a command continued by a trailing backslash
    transcript = block.lang in TRANSCRIPT_LANGS
    for n, text in block.lines:
        if pending is None:
            if transcript:
                if not text.startswith("$ "):
                    continue
                text = text[2:]
            if not text.strip() or text.lstrip().startswith("#"):
                continue
            pending = (n, "")
        start, so_far = pending
        part = text.strip() if so_far else text.rstrip()
        if part.endswith("\\"):
            pending = (start, so_far + part[:-1].rstrip() + " ")
            continue
        joined = strip_comment(so_far + part)
        pending = None
        if joined.strip():
            out.append(Command(block.path, start, joined.strip()))
    if pending is not None:
        raise SystemExit(f"{block.path}:{pending[0]}: a command ends in a backslash at the end of its block")
    return out, opt_out


# ---- links ---------------------------------------------------------------------------------

def slug(heading: str) -> str:
    """GitHub's anchor for a heading: lower case, punctuation dropped, spaces to hyphens."""
    text = re.sub(r"!?\[([^\]]*)\]\([^)]*\)", r"\1", heading)   # [text](link) -> text
    text = text.strip().lower()
    kept = []
    for ch in text:
        if ch == " " or ch == "-" or ch == "_":
            kept.append("-" if ch == " " else ch)
        elif unicodedata.category(ch)[0] in "LNM":
            kept.append(ch)
    return "".join(kept)


def anchors_of(path: Path, cache: dict) -> set[str]:
    if path not in cache:
        seen: dict[str, int] = {}
        anchors = set()
        _, outside = read_blocks(path)
        for _, line in outside:
            m = re.match(r"#{1,6}\s+(.*?)\s*#*\s*$", line)
            if not m:
                continue
            base = slug(m.group(1))
            k = seen.get(base, 0)
            anchors.add(base if k == 0 else f"{base}-{k}")
            seen[base] = k + 1
        cache[path] = anchors
    return cache[path]


LINK = re.compile(r"!?\[(?:[^\[\]]|\[[^\]]*\])*\]\(\s*<?([^)\s>]+)>?(?:\s+\"[^\"]*\")?\s*\)")
REF_DEF = re.compile(r"^\s{0,3}\[[^\]]+\]:\s*<?(\S+?)>?(?:\s+\"[^\"]*\")?\s*$")


def check_links(pages: list[Path], source: Path) -> list[str]:
    errors = []
    cache: dict = {}
    for page in pages:
        _, outside = read_blocks(page)
        for n, line in outside:
            code_free = re.sub(r"(`+)(?:(?!\1).)+?\1", "", line)   # inline code holds no links
            targets = [m.group(1) for m in LINK.finditer(code_free)]
            m = REF_DEF.match(code_free)
            if m:
                targets.append(m.group(1))
            for target in targets:
                if re.match(r"[a-z][a-z0-9+.-]*:", target, re.I):   # http:, https:, mailto:
                    continue
                file_part, _, anchor = target.partition("#")
                dest = (page.parent / file_part).resolve() if file_part else page.resolve()
                where = f"{page.relative_to(source)}:{n}: link {target}"
                try:
                    dest.relative_to(source.resolve())
                except ValueError:
                    errors.append(f"{where}: leaves the repository")
                    continue
                if not dest.exists():
                    errors.append(f"{where}: {dest.relative_to(source.resolve())} does not exist")
                    continue
                if anchor and dest.suffix == ".md" and anchor not in anchors_of(dest, cache):
                    errors.append(f"{where}: no heading with anchor #{anchor} in "
                                  f"{dest.relative_to(source.resolve())}")
    return errors


# ---- shell words ---------------------------------------------------------------------------

def split_segments(cmd: str) -> list[str]:
    """The command cut at top-level |, ||, &&, ; (outside quotes); separators kept as items."""
    parts, cur, quote, i = [], "", None, 0
    while i < len(cmd):
        c = cmd[i]
        if quote:
            cur += c
            if c == quote:
                quote = None
            elif c == "\\" and quote == '"' and i + 1 < len(cmd):
                cur += cmd[i + 1]
                i += 1
        elif c == "\\" and i + 1 < len(cmd):
            cur += cmd[i:i + 2]
            i += 1
        elif c in "'\"":
            quote = c
            cur += c
        elif cmd.startswith(("&&", "||"), i):
            parts += [cur, cmd[i:i + 2]]
            cur = ""
            i += 1
        elif c in "|;":
            parts += [cur, c]
            cur = ""
        else:
            cur += c
        i += 1
    parts.append(cur)
    return parts


def option_value(words: list[str], name: str) -> str | None:
    for i, w in enumerate(words):
        if w == name and i + 1 < len(words):
            return words[i + 1]
        if w.startswith(name + "="):
            return w[len(name) + 1:]
    return None


def cap_option(segment: str, words: list[str], name: str, cap: int, notes: list[str]) -> str:
    """`name N` (or name=N) lowered to at most cap, or `name cap` appended."""
    value = option_value(words, name)
    if value is None:
        notes.append(f"{name} {cap}")
        return segment.rstrip() + f" {name} {cap}"
    if value.isdigit() and int(value) > cap:
        notes.append(f"{name} {value}->{cap}")
        return re.sub(rf"{re.escape(name)}(\s+|=){value}\b", rf"{name}\g<1>{cap}", segment, count=1)
    return segment


def has_set(words: list[str], key: str) -> bool:
    return any(w.startswith(key + "=") for w in words)


def python_modules(words: list[str]) -> list[str]:
    text = " ".join(words)
    mods = re.findall(r"\bimport\s+([A-Za-z_]\w*)", text) + re.findall(r"\bfrom\s+([A-Za-z_]\w*)\s+import", text)
    if "-m" in words:
        mods.append(words[words.index("-m") + 1].split(".")[0])
    return mods


def plan(cmd: Command, build: Path) -> None:
    """Fills cmd.run (the capped command) or cmd.skip."""
    segments = split_segments(cmd.text)
    for idx in range(0, len(segments), 2):
        segment = segments[idx]
        try:
            words = shlex.split(segment)
        except ValueError as e:
            cmd.skip = None
            cmd.run = None
            cmd.status = f"cannot parse: {e}"
            return
        prefix_env = {}  # VAR=value prefixes; a value under build/ means the build tree here
        while words and re.match(r"[A-Za-z_]\w*=", words[0]):
            name, _, value = words[0].partition("=")
            prefix_env[name] = str(build / value[len("build/"):]) if value.startswith("build/") else value
            words = words[1:]
        if not words:
            continue
        prog = words[0]
        base = os.path.basename(prog)
        if base in SKIPPED_SCRIPTS and ("scripts/" in prog or prog.startswith("./")):
            cmd.skip = SKIPPED_SCRIPTS[base]
            return
        if base in ("mpirun", "mpiexec"):
            if shutil.which(base) is None:
                cmd.skip = f"{base} is not installed"
                return
            # Open MPI leaves allocations at exit (MIXPREC_MPI_TEST_ENV in tests/CMakeLists.txt).
            cmd.env["ASAN_OPTIONS"] = os.environ.get("ASAN_OPTIONS", "") + ":detect_leaks=0"
            if "--oversubscribe" not in words:
                segment = re.sub(rf"\b{base}\b", f"{base} --oversubscribe", segment, count=1)
                cmd.notes.append("--oversubscribe")
            inner = next((i for i, w in enumerate(words) if w.endswith("mixprec")), None)
            words = words[inner:] if inner is not None else []
            if not words:
                continue
            prog, base = words[0], "mixprec"
        if base == "mixprec":
            sub = words[1] if len(words) > 1 else ""
            if sub == "train":
                steps = TRAIN_STEPS + (1 if "--resume" in words else 0)
                segment = cap_option(segment, words, "--steps", steps, cmd.notes)
                if option_value(words, "--progress") is None:
                    segment = segment.rstrip() + " --progress quiet"
                extra = [] if has_set(words, "training.eval_batches") else ["training.eval_batches=1"]
                config = next((w for w in words[2:] if w.endswith(".toml")), "")
                extra += [kv for kv in HEAVY_CONFIGS.get(os.path.basename(config), [])
                          if not has_set(words, kv.split("=")[0])]
                for kv in extra:
                    segment = segment.rstrip() + f" --set {kv}"
                if extra:
                    cmd.notes.append(" ".join(extra))
            elif sub == "sample":
                segment = cap_option(segment, words, "--tokens", SAMPLE_TOKENS, cmd.notes)
        elif "bench/" in prog and base.startswith("bench_"):
            if not (build / "bench").is_dir():
                cmd.skip = "the benchmarks are not built (MIXPREC_BUILD_BENCH=OFF)"
                return
            if not (build / "bench" / base).exists():
                cmd.status = f"FAILED (no program {base} in {build / 'bench'})"
                return
            if base in BENCH_CAPS:
                flag, value = BENCH_CAPS[base]
                segment = cap_option(segment, words, flag, int(value), cmd.notes)
            else:
                segment = segment.rstrip() + " --help"
                cmd.notes.append("--help after its arguments")
        elif "/" not in prog and shutil.which(prog) is None:
            cmd.skip = f"{prog} is not installed"
            return
        elif base.startswith("python"):
            for mod in python_modules(words):
                probe = subprocess.run([prog, "-c", f"import {mod}"], capture_output=True,
                                       env={**os.environ, **prefix_env})
                if probe.returncode != 0:
                    cmd.skip = f"{prog} has no module {mod}"
                    return
        segments[idx] = segment
    cmd.run = "".join(segments)


# ---- running -------------------------------------------------------------------------------

def make_farm(root: Path, source: Path, build: Path) -> Path:
    farm = Path(tempfile.mkdtemp(prefix="block-", dir=root))
    for entry in source.iterdir():
        if entry.name in ("outputs", "exports", ".git") or entry.name.startswith("build"):
            continue
        (farm / entry.name).symlink_to(entry)
    (farm / "build").symlink_to(build)
    (farm / "outputs").mkdir()
    (farm / "exports").mkdir()
    return farm


def run_one(cmd: Command, farm: Path, env: dict, log: Path) -> None:
    start = time.monotonic()
    with open(log, "ab") as out:
        out.write(f"\n$ {cmd.run}\n".encode())
        out.flush()
        proc = subprocess.Popen(["bash", "-o", "pipefail", "-c", cmd.run], cwd=farm,
                                env={**env, **cmd.env},
                                stdin=subprocess.DEVNULL, stdout=out, stderr=subprocess.STDOUT,
                                start_new_session=True)
        try:
            rc = proc.wait(timeout=COMMAND_TIMEOUT)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
            rc = None
    cmd.seconds = time.monotonic() - start
    cmd.status = "ok" if rc == 0 else (f"TIMEOUT ({COMMAND_TIMEOUT} s)" if rc is None else f"FAILED (exit {rc})")


def tail(path: Path, n: int = 25) -> str:
    lines = path.read_text(errors="replace").splitlines()
    return "\n".join("    " + l for l in lines[-n:])


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--build", required=True, type=Path, help="the build tree (holds mixprec, bench/)")
    ap.add_argument("--source", required=True, type=Path, help="the source tree (README.md, docs/)")
    ap.add_argument("--list", action="store_true", help="print the commands as they would run; run nothing")
    ap.add_argument("--only", default="", help="only pages whose path contains this")
    ap.add_argument("--keep", action="store_true", help="keep the temporary folders")
    ap.add_argument("--no-links", action="store_true", help="skip the link check")
    ap.add_argument("--run-sanitized", action="store_true",
                    help="in a sanitizer build, run the training blocks too")
    args = ap.parse_args()
    source, build = args.source.resolve(), args.build.resolve()
    if not (build / "mixprec").exists():
        print(f"no {build}/mixprec: build the tree first", file=sys.stderr)
        return 2

    cache = build / "CMakeCache.txt"
    sanitized = cache.exists() and re.search(r"^MIXPREC_SANITIZE:BOOL=ON$", cache.read_text(), re.M)
    pages = [source / "README.md"] + sorted((source / "docs").glob("*.md"))
    failures = 0

    if not args.no_links:
        errors = check_links(pages, source)
        print(f"links: {len(pages)} pages checked, {len(errors)} broken")
        for e in errors:
            print("  " + e)
        failures += len(errors)

    pages = [p for p in pages if args.only in str(p.relative_to(source))]
    work: list[tuple[Block, list[Command], str | None]] = []
    for page in pages:
        blocks, _ = read_blocks(page)
        for block in blocks:
            if block.lang in SHELL_LANGS | TRANSCRIPT_LANGS:
                cmds, opt_out = commands_of(block)
                if cmds:
                    work.append((block, cmds, opt_out))

    root = Path(tempfile.mkdtemp(prefix="mixprec-doc-commands-"))
    env = dict(os.environ)
    env.update({"OMPI_ALLOW_RUN_AS_ROOT": "1", "OMPI_ALLOW_RUN_AS_ROOT_CONFIRM": "1"})
    env.setdefault("OMP_WAIT_POLICY", "passive")
    env.pop("MIXPREC_BACKEND", None)
    all_cmds: list[Command] = []
    t0 = time.monotonic()
    for block, cmds, opt_out in work:
        farm = make_farm(root, source, build)
        log = farm / "commands.log"
        broken = None
        if sanitized and not args.run_sanitized and not opt_out and any(
                re.search(r"\bmixprec\s+train\b|\bmpirun\b|\bmpiexec\b", c.text) for c in cmds):
            opt_out = "block trains, sanitizer build: the optimised build runs it (--run-sanitized)"
        for cmd in cmds:
            all_cmds.append(cmd)
            if opt_out:
                cmd.skip = opt_out if opt_out.startswith("block trains") else f"block opts out: {opt_out}"
            elif broken:
                cmd.skip = f"an earlier command of its block failed ({broken})"
            else:
                plan(cmd, build)
            if cmd.skip or cmd.status:
                cmd.status = cmd.status or "skipped"
                if cmd.status != "skipped":
                    failures += 1
                continue
            if args.list:
                cmd.status = "listed"
                continue
            run_one(cmd, farm, env, log)
            rel = cmd.path.relative_to(source)
            print(f"  {cmd.status:<8} {cmd.seconds:6.1f} s  {rel}:{cmd.line}  {cmd.text[:100]}", flush=True)
            if cmd.status != "ok":
                failures += 1
                broken = f"{rel}:{cmd.line}"
                print(f"    ran: {cmd.run}\n    in {farm}; output:\n{tail(log)}", flush=True)
    total = time.monotonic() - t0

    print(f"\n{'status':<10} {'s':>6}  {'where':<30} command (as written) [caps] -- why skipped")
    for c in all_cmds:
        where = f"{c.path.relative_to(source)}:{c.line}"
        caps = f" [{'; '.join(c.notes)}]" if c.notes else ""
        reason = f"  -- {c.skip}" if c.skip else ""
        print(f"{c.status:<10} {c.seconds:6.1f}  {where:<30} {c.text}{caps}{reason}")
    ran = sum(c.status not in ("skipped", "listed") for c in all_cmds)
    ok = sum(c.status == "ok" for c in all_cmds)
    skipped = sum(c.status == "skipped" for c in all_cmds)
    print(f"\n{len(all_cmds)} commands in {len(work)} blocks of {len(pages)} pages: "
          f"{ok} ok of {ran} run, {skipped} skipped; {total:.0f} s")
    if args.keep or failures:
        print(f"working copies kept in {root}")
    else:
        shutil.rmtree(root, ignore_errors=True)
    if failures:
        print(f"FAILED: {failures} problem(s)")
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
