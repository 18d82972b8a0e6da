#!/work/venv-peers/bin/python
"""tokenizer.json encode speed: mixprec (build/bench/bench_tokenizer) against Hugging Face
`tokenizers` on the same text, in interleaved rounds, one thread each; prints a table of
median tokens/s, ranges and the ratio, and checks both give the same ids.

    bench/tokenizer_bench.py [--build build] [--rounds 7] [--text FILE] [--python-only-peer]

Needs a Python with `tokenizers` (a peer, e.g. /work/venv-peers: pip install tokenizers);
mixprec itself does not. The text (default): the first MiB of the fortunes corpus
(/usr/share/games/fortunes, scripts/setup.sh installs it) followed by the multilingual texts
of tests/reference/fixtures/tokenizers/cases.json. Tokenizers: the real Llama 3, Qwen 3,
DeepSeek-V3 and Mistral 7B files of that folder (gunzipped to a temporary folder).
Modes: `text` encodes the whole file as one text; `lines` encodes each line as its own text
(tokenizers' encode_batch, which runs on one thread here: RAYON_NUM_THREADS=1).
"""
import argparse
import gzip
import hashlib
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time

os.environ["RAYON_NUM_THREADS"] = "1"
os.environ["TOKENIZERS_PARALLELISM"] = "false"
import tokenizers  # noqa: E402

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
FIXTURES = os.path.join(ROOT, "tests/reference/fixtures/tokenizers")
NAMES = ["llama3", "qwen3", "deepseek_v3", "mistral7b"]


def fnv1a_ids(ids, h=0xCBF29CE484222325):
    for i in ids:
        for b in (str(i) + ",").encode():
            h ^= b
            h = (h * 0x100000001B3) & 0xFFFFFFFFFFFFFFFF
    return h


def default_text():
    folder = "/usr/share/games/fortunes"
    data = b""
    for name in sorted(os.listdir(folder)):
        path = os.path.join(folder, name)
        if os.path.isfile(path) and not name.endswith(".dat") and "." not in name:
            data += open(path, "rb").read()
        if len(data) >= 1 << 20:
            break
    text = data[: 1 << 20].decode("utf-8", "ignore")
    cases = json.load(open(os.path.join(FIXTURES, "cases.json"), encoding="utf-8"))
    return text + "\n".join(cases["texts"])


def cpu_name():
    for line in subprocess.run(["lscpu"], capture_output=True, text=True).stdout.splitlines():
        if line.startswith("Model name:"):
            return line.split(":", 1)[1].strip()
    return "unknown CPU"


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--build", default=os.path.join(ROOT, "build"))
    p.add_argument("--rounds", type=int, default=7)
    p.add_argument("--text")
    a = p.parse_args()
    program = os.path.join(a.build, "bench/bench_tokenizer")
    tmp = tempfile.mkdtemp(prefix="mixprec-tokenizer-bench-")
    text = open(a.text, encoding="utf-8").read() if a.text else default_text()
    text_path = os.path.join(tmp, "text.txt")
    open(text_path, "w", encoding="utf-8").write(text)
    # Cut at "\n" only, as bench_tokenizer does (str.splitlines also cuts at \r, \x0b, U+2028...).
    lines = [line + "\n" for line in text.split("\n")]
    lines[-1] = lines[-1][:-1]
    if not lines[-1]:
        lines.pop()
    print(f"CPU: {cpu_name()}; text {len(text.encode())} bytes, {len(lines)} lines; "
          f"tokenizers {tokenizers.__version__}; {a.rounds} interleaved rounds, one thread each\n")
    rows = []
    for name in NAMES:
        folder = os.path.join(tmp, name)
        os.makedirs(folder)
        for f in ("tokenizer.json", "tokenizer_config.json"):
            with gzip.open(os.path.join(FIXTURES, "real", name, f + ".gz"), "rb") as src:
                open(os.path.join(folder, f), "wb").write(src.read())
        hf = tokenizers.Tokenizer.from_file(os.path.join(folder, "tokenizer.json"))
        for mode in ("text", "lines"):
            ours, theirs = [], []
            for _ in range(a.rounds):
                args = [program, folder, text_path, "--rounds", "1"] + (["--lines"] if mode == "lines" else [])
                out = json.loads(subprocess.run(args, check=True, capture_output=True, text=True).stdout)
                ours.append(out["tokens"] / out["seconds"][0])
                start = time.perf_counter()
                if mode == "text":
                    ids = hf.encode(text, add_special_tokens=False).ids
                else:
                    ids = [i for e in hf.encode_batch(lines, add_special_tokens=False) for i in e.ids]
                theirs.append(len(ids) / (time.perf_counter() - start))
            same = "yes" if f"{fnv1a_ids(ids):016x}" == out["hash"] else "NO"
            rows.append((name, mode, len(ids), statistics.median(ours), min(ours), max(ours),
                         statistics.median(theirs), min(theirs), max(theirs), same))
    print("| tokenizer | mode | tokens | mixprec tok/s (range) | tokenizers tok/s (range) | mixprec / tokenizers | same ids |")
    print("|---|---|---:|---:|---:|---:|---|")
    for r in rows:
        print(f"| {r[0]} | {r[1]} | {r[2]} | {r[3]/1e3:.0f}k ({r[4]/1e3:.0f}-{r[5]/1e3:.0f}k) | "
              f"{r[6]/1e3:.0f}k ({r[7]/1e3:.0f}-{r[8]/1e3:.0f}k) | {r[3]/r[6]:.2f}x | {r[9]} |")
    if any(r[9] != "yes" for r in rows):
        sys.exit(1)


if __name__ == "__main__":
    main()
