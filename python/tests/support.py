"""Shared by the Python tests: the `mixprec` command (CTest sets MIXPREC_CLI) and the
source tree (MIXPREC_SOURCE_DIR; else the checkout this file is in)."""

import os
import pathlib
import subprocess

SOURCE_DIR = pathlib.Path(
    os.environ.get("MIXPREC_SOURCE_DIR", pathlib.Path(__file__).resolve().parents[2]))
CLI = os.environ.get("MIXPREC_CLI", "")


def cli_error(*args):
    """What `mixprec ARGS` prints after "mixprec: " when it fails (None without the CLI)."""
    if not CLI:
        return None
    r = subprocess.run([CLI, *args], capture_output=True, text=True, cwd=SOURCE_DIR,
                       timeout=120)
    assert r.returncode != 0, r.stdout
    line = r.stderr.strip().splitlines()[-1]
    assert line.startswith("mixprec: "), r.stderr
    return line[len("mixprec: "):]
