#!/usr/bin/env python3
"""A run's metrics.jsonl, compacted into a record small enough to commit.

    scripts/compact_metrics.py RUN_DIR/metrics.jsonl RECORD.jsonl

Keeps the run line (without the config text), every eval line, and the train lines of step 1,
every 10th step and the last ten (what `mixprec summary` averages), each without its
per-tensor `numerics` object (the FP8 saturation and underflow totals stay: they are
top-level). A resumed run logs some steps twice: the later line wins. `mixprec summary` and
`mixprec plot` read a record as they read a run directory. scripts/precision_story.sh keeps
one per finished run, so a later session reuses it instead of training again.
"""
import json
import sys


def main(src, dst):
    run, train, evals = None, {}, {}
    with open(src) as f:
        for line in f:
            d = json.loads(line)
            kind = d.get("type")
            if kind == "run":
                d.pop("config", None)
                d["start_step"] = 0
                run = d
            elif kind == "train":
                d.pop("numerics", None)
                train[d["step"]] = d
            elif kind == "eval":
                evals[d["step"]] = d
    if run is None or not train:
        sys.exit(f"{src}: no run line or no train lines: not a finished run's metrics")
    last = max(train)
    keep = [s for s in sorted(train) if s == 1 or s % 10 == 0 or s > last - 10]
    with open(dst, "w") as f:
        f.write(json.dumps(run) + "\n")
        merged = [(s, 0, train[s]) for s in keep] + [(s, 1, evals[s]) for s in evals]
        for _, _, d in sorted(merged, key=lambda t: (t[0], t[1])):
            f.write(json.dumps(d) + "\n")


if __name__ == "__main__":
    if len(sys.argv) != 3:
        sys.exit(__doc__)
    main(sys.argv[1], sys.argv[2])
