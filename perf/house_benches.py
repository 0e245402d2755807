#!/usr/bin/env python3
"""Summarises perf/house-benches.sh: for every table row the benches print,
the median over the rounds of each side, and new ÷ old.

Rows are matched by their text cells (the measurement's name and, where a
bench prints one, its baseline), so a row that exists on one side only is
listed with a dash. Two figures per row are compared: the first number (the
bench's own figure: MB/s, commits/s) and, where the row has one, the ratio
to the baseline measured in the same run (the figure least moved by the
machine's noise)."""

import re
import statistics
import sys
from collections import defaultdict
from pathlib import Path

NUMBER = re.compile(r"^-?\d+(\.\d+)?$")


def rows(text):
    """(key, numbers, ratio) for each data row of the markdown tables."""
    header = None
    for line in text.splitlines():
        if not line.startswith("|"):
            header = None
            continue
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if header is None:
            header = [c.lower() for c in cells]
            continue
        if set("".join(cells)) <= set("-: "):
            continue
        words, numbers, ratio = [], [], None
        for name, cell in zip(header, cells):
            parts = [p.strip() for p in cell.split("/")]
            if all(NUMBER.match(p) for p in parts):
                values = [float(p) for p in parts]
                if name.startswith("ratio") and ratio is None:
                    ratio = values[0]
                else:
                    numbers.extend(values)
            else:
                words.append(cell)
        if numbers and words:
            yield " · ".join(words), numbers, ratio
        elif numbers:
            # A row keyed by a number (offsets: the key count).
            yield f"{header[0]} {numbers[0]:g}", numbers[1:], ratio


def collect(out):
    """side -> bench -> key -> list over rounds of (numbers, ratio)."""
    found = defaultdict(lambda: defaultdict(lambda: defaultdict(list)))
    for path in sorted(Path(out).glob("*-*-*.txt")):
        side, bench, _ = path.stem.split("-", 2)
        for key, numbers, ratio in rows(path.read_text()):
            found[side][bench][key].append((numbers, ratio))
    return found


def median(values):
    values = [v for v in values if v is not None]
    return statistics.median(values) if values else None


def show(v):
    if v is None:
        return "–"
    return f"{v:,.2f}" if abs(v) < 100 else f"{v:,.0f}"


def divide(new, old):
    return new / old if new is not None and old not in (None, 0) else None


def main(out):
    found = collect(out)
    params = Path(out, "params.txt")
    if params.exists():
        print(params.read_text().strip().replace("\n", "  \n") + "\n")
    print("| bench | row | old | new | new ÷ old | old ratio to baseline | new ratio | new ÷ old |")
    print("|---|---|---:|---:|---:|---:|---:|---:|")
    for bench in sorted(set(found["old"]) | set(found["new"])):
        keys = list(found["old"][bench]) + [k for k in found["new"][bench] if k not in found["old"][bench]]
        for key in keys:
            old, new = found["old"][bench].get(key, []), found["new"][bench].get(key, [])
            old_v = median([n[0] if n else None for n, _ in old])
            new_v = median([n[0] if n else None for n, _ in new])
            old_r, new_r = median([r for _, r in old]), median([r for _, r in new])
            print(
                f"| {bench} | {key} | {show(old_v)} | {show(new_v)} | {show(divide(new_v, old_v))} "
                f"| {show(old_r)} | {show(new_r)} | {show(divide(new_r, old_r))} |"
            )


if __name__ == "__main__":
    main(sys.argv[1])
