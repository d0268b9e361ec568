"""Which code-heap placement rules fit every code row of run 35's lazy probe (MODULES.md, "Run 35"): stdlib only.

Each function's code is one object of roundup(.text, a) + o bytes, placed at cuModuleGetFunction (lazy loading) in a
heap whose room before the first copy is ``room``; the simulated growth of every copy must equal the measured one.
Placements: contig (one bump pointer, growing in 2 MiB pages), chunk (an object larger than the room left opens a new
chunk of roundup(size, 2 MiB), the old room abandoned), firstfit (the same, every chunk's room kept, first fit).
Then the fitted rules' predictions for a second order of the variants (the run that tells chunk from firstfit).

    python validate/data/records/runs/run35/heap_fit.py [lazy/module_load.jsonl]     # about 5 min on one CPU
"""
import collections
import json
import sys
from pathlib import Path

PAGE = 2 << 20
SECOND_ORDER = ("code2m", "code512k", "code64k", "funcs64", "tiny", "const64k", "zero4k", "zero8m", "init1m")


def roundup(x: int, a: int) -> int:
    return -(-x // a) * a


def code_rows(path: Path) -> list[tuple[str, list[int], int]]:
    """(variant, its functions' .text sizes, measured device-used growth) per code placement, in run order."""
    out = []
    for r in map(json.loads, path.read_text().splitlines()):
        if r["kind"] in ("load", "triton"):
            texts = [v for k, v in r["device_sections"].items() if k.startswith(".text")]
            growth = r["growth"]["get_function"] if r["kind"] == "load" else r["growth"]
            out.append((r.get("variant") or f"triton{r['unroll']}", texts, growth["device_used"]))
    return out


class Heap:
    def __init__(self, placement: str, room: int) -> None:
        self.placement, self.rooms = placement, [room]

    def place(self, size: int) -> int:
        """Bytes the heap grows by to hold one object of ``size``."""
        if self.placement == "contig":
            grown = roundup(max(size - self.rooms[-1], 0), PAGE)
            self.rooms[-1] += grown - size
            return grown
        searched = range(len(self.rooms)) if self.placement == "firstfit" else [len(self.rooms) - 1]
        for i in searched:
            if size <= self.rooms[i]:
                self.rooms[i] -= size
                return 0
        self.rooms.append(roundup(size, PAGE) - size)
        return roundup(size, PAGE)


def fits(rows, placement: str, a: int, o: int, room: int) -> bool:
    heap = Heap(placement, room)
    return all(sum(heap.place(roundup(t, a) + o) for t in texts) == grown for _, texts, grown in rows)


def main(path: Path) -> None:
    rows = code_rows(path)
    found = [(p, a, o, room) for p in ("contig", "chunk", "firstfit") for a in (128, 256, 512, 1024, 2048)
             for o in range(0, 8193, 128) for room in range(0, 2 * PAGE + 1, 2048) if fits(rows, p, a, o, room)]
    by_rule = collections.defaultdict(list)
    for p, a, o, room in found:
        by_rule[(p, a, o)].append(room)
    for (p, a, o), rooms in sorted(by_rule.items()):
        print(f"{p} a={a} o={o}: room {min(rooms):,}..{max(rooms):,} B ({len(rooms)} of 2 KiB grid)")
    envelope = max(a - 1 + o for p, a, o, _ in found) if found else None
    print(f"fits: {len(found)}; largest per-function footprint beyond .text: {envelope} B")
    sizes = {r["variant"]: [v for k, v in r["device_sections"].items() if k.startswith(".text")]
             for r in map(json.loads, path.read_text().splitlines()) if r["kind"] == "load"}
    copies = collections.Counter(r[0] for r in rows)
    predictions = collections.Counter()
    for p, a, o, room in found:
        heap, grown = Heap(p, room), collections.defaultdict(int)
        for v in SECOND_ORDER:
            for _ in range(copies[v]):
                grown[v] += sum(heap.place(roundup(t, a) + o) for t in sizes[v])
        predictions[(p, json.dumps({v: grown[v] >> 20 for v in SECOND_ORDER}))] += 1
    for (p, text), n in predictions.most_common():
        print(f"second order, {p} ({n} fits), MiB grown at get_function: {text}")


if __name__ == "__main__":
    main(Path(sys.argv[1]) if len(sys.argv) > 1 else Path(__file__).parent / "lazy" / "module_load.jsonl")
