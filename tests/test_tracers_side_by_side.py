"""A deep stack's traces come from tracer processes run side by side (``model.run_tracers``). Each tracer reads its
spec from standard input before anything else, so a spec handed over inside the previous tracer's ``communicate()``
started the second tracer only when the first had ended: Kimi-Linear-48B-A3B's two tracers (7 and 11 layers) ran one
after another, 59 s instead of 36 s of a cold answer's 109 s (benchmarks/preset_speed.md).

Proved with two stand-in tracers that can only finish together: the first waits for a file the second writes once it
has read its spec. Handed over one after another, the first waits out its deadline and says so.
"""
import subprocess
import sys

from livebytes.lifetimes.traced import model as traced

# a stand-in tracer: read the spec, then (as "second") write the flag, or (as "first") wait for it, 20 s at most
STAND_IN = """
import json, os, sys, time
spec = json.loads(sys.stdin.read())
flag = spec["flag"]
if spec["role"] == "second":
    open(flag, "w").close()
deadline = time.monotonic() + 20
while spec["role"] == "first" and not os.path.exists(flag):
    if time.monotonic() > deadline:
        print("error: the other tracer never started", file=sys.stderr)
        sys.exit(1)
    time.sleep(0.05)
print(json.dumps({"role": spec["role"]}))
"""


def test_tracers_start_together(monkeypatch, tmp_path):
    def stand_in(spec: dict) -> subprocess.Popen:
        return subprocess.Popen([sys.executable, "-c", STAND_IN], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                stderr=subprocess.PIPE, text=True)
    monkeypatch.setattr(traced, "_start", stand_in)
    monkeypatch.setattr(traced, "installed_versions", lambda: {"torch": "x"})
    flag = str(tmp_path / "second-started")
    specs = [{"role": "first", "flag": flag}, {"role": "second", "flag": flag}]
    assert traced.run_tracers(specs) == [{"role": "first"}, {"role": "second"}]
