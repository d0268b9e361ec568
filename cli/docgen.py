"""Markdown tables of every registered model's buffers (docs/models/*.md), generated from the records
themselves so the documentation cannot drift from the models. `python -m livebytes.cli.docgen DIR`."""
from __future__ import annotations

import sys
from pathlib import Path

from livebytes.estimator.registry import get_model, keyed_specs, specs


def _lifetime(model, b) -> str:
    if b.cached:
        return f"cached by the library since its first call (allocated at `{b.allocated_at}`)"
    end = "end of the measured step" if b.freed_after is None else f"`{b.freed_after}`"
    return f"`{b.allocated_at}` → {end}"


def model_markdown(key: str) -> str:
    s = [sp for sp in specs() if sp.key == key][0]
    m = get_model(key)
    lines = [f"# `{key}`", "", f"{s.implementation}, version {s.version}. {s.covers}.", "",
             f"Model: {m.summary}. Default device: {s.default_device}.", ""]
    if s.options:
        lines += ["Options: " + "; ".join(f"`{k}` ∈ {{{', '.join(map(str, v))}}}" if v else f"`{k}`: free" for k, v in s.options.items()) +
                  " (first is the default; the table shows the defaults).", ""]
    lines += ["## Timeline", "", "| # | step | phase | source |", "|---|---|---|---|"]
    for i, st in enumerate(m.steps):
        src = f"`{st.source}`" if st.source else ""
        lines.append(f"| {i} | `{st.name}` | {st.phase} | {src}{(' — ' + st.note) if st.note else ''} |")
    lines += ["", "## Buffers", "", "| buffer | group | shape | dtype | source | lifetime |", "|---|---|---|---|---|---|"]
    for b in m.buffers:
        carved = f" (region of `{b.carved_from}`)" if b.carved_from else ""
        note = f" {b.note}" if b.note else ""
        lines.append(f"| `{b.name}`{carved} | {b.group.label} | `{b.shape_text()}` | {b.dtype} | `{b.source}`{note} | "
                     f"{_lifetime(m, b)} |")
    lines += ["", "Symbols: S tokens per sequence, MBS sequences (packed), H heads, HV value heads, DK/DV head dims. "
              "Bytes are charged in 512-byte allocator blocks (a carved workspace once).", ""]
    if m.not_modelled:
        lines += ["## Not modelled", ""] + [f"- {x}" for x in m.not_modelled] + [""]
    notes = [n for n in m.notes if n]
    if notes:
        lines += ["## Evidence", ""] + [f"- {n}" for n in notes] + [""]
    return "\n".join(lines)


def write_all(directory: Path) -> list[Path]:
    directory.mkdir(parents=True, exist_ok=True)
    out = []
    for s in keyed_specs():     # a traced model is a config away: docs/models.md
        path = directory / f"{s.key.replace('@', '_')}.md"
        path.write_text(model_markdown(s.key))
        out.append(path)
    return out


if __name__ == "__main__":
    for p in write_all(Path(sys.argv[1] if len(sys.argv) > 1 else "docs/models")):
        print(p)
