"""The Triton version as a variable (issue 22 point 5, run 22 on the H200): fla-kda@0.6.0's allocator peaks are the
same under Triton 3.6.0 and 3.9.0 (same autotune candidates, same failing dhu configs), its process memory is not (other
stack frames), so the Triton version is data of the process-memory model alone: one file per version, chosen with
``--triton``."""
import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from livebytes.cli.app import app
from livebytes.estimator import get_model
from livebytes.estimator.devices import get_device
from livebytes.estimator.process.memory import process_memory, triton_versions
from livebytes.estimator.process.driver import stack_reservation_bytes
from livebytes.estimator.shapes import Shape

RUNS = Path(__file__).resolve().parents[1] / "validate" / "data" / "records" / "runs"
H200 = get_device("H200")
CONTEXT = 552_402_944          # the H200's CUDA context (estimator/data/process_memory.json)


def record(folder: str, prefix: str) -> dict:
    (path,) = (RUNS / folder).glob(f"{prefix}_*.json")
    return json.loads(path.read_text())["records"][0]


@pytest.mark.parametrize("seq_mbs", ["1_8192", "2_8192"])
def test_kda_peaks_do_not_depend_on_the_triton_version(seq_mbs):
    """Run 7a (Triton 3.6.0) and run 22d (3.9.0): the same report-contract shapes, cold, one shared process each, the
    same allocated, requested and reserved peaks to the byte, and the same autotuned kernels."""
    old, new = record("run7a_capture", f"fla-kda_0.6.0_{seq_mbs}_64_128"), record("run22", f"fla-kda_0.6.0_{seq_mbs}_64_128")
    assert (old["triton"], new["triton"]) == ("3.6.0", "3.9.0")
    assert old["triton_cache"] == new["triton_cache"] == "cold"
    for field in ("peaks_bytes", "requested_peak_bytes", "reserved_bytes", "autotuned_kernels"):
        assert old[field] == new[field], field


def test_kda_process_memory_depends_on_it():
    """D64 H16 report, cold, T 4,096 (alone on the GPU): Triton 3.9.0's candidates raise the stack limit to 19,216 B
    (3.6.0: 18,592), so 5,575,081,984 B = context 552,402,944 + modules 102,760,448 + the reservation 4,919,918,592
    (19,216 x 270,336 threads = 5,194,776,576 in 2,477 pages of 2 MiB, less the default 1,024-B limit's 276,824,064),
    against 3.6.0's 5,407,309,824."""
    model, shape = get_model("fla-kda@0.6.0", "H200", contract="report"), Shape(1, 4096, 16, 64)
    new, old = (process_memory(H200, model, "cold", shape, triton=t) for t in ("3.9.0", None))
    assert stack_reservation_bytes(19_216, H200) == 4_919_918_592
    assert (new.stack_limit_bytes, new.bytes) == (19_216, CONTEXT + 102_760_448 + 4_919_918_592) == (19_216, 5_575_081_984)
    assert (old.stack_limit_bytes, old.bytes) == (18_592, 5_407_309_824)
    assert triton_versions("fla-kda@0.6.0") == ("3.6.0", "3.9.0")       # the default first: KDA's records ran 3.6.0
    assert triton_versions("fla-gdn@0.6.0") == ("3.9.0",)              # the backward refuses 3.4-3.7.0 on Hopper


@pytest.mark.parametrize("state,limit,nbytes", [
    # 678,232,064 = context 552,402,944 + modules 98,566,144 + 1,120-B limit's 27,262,976 (145 - 132 pages of 2 MiB)
    ("cold", 1_120, 678_232_064),
    ("warm", 1_024, 650_969_088),         # context + modules 98,566,144, no stack raise
])
def test_gdn_process_memory_at_d64_is_its_own(state, limit, nbytes):
    """Run 22e: GDN forward+backward H16/HV32 D64 T 4,096 alone on the GPU; the model reads D64's own frames and modules
    (D128's cold modules are 2 MiB more: 100,663,296 B)."""
    p = process_memory(H200, get_model("fla-gdn@0.6.0", "H200", gva=True), state, Shape(1, 4096, 16, 64, 32))
    assert (p.stack_limit_bytes, p.bytes) == (limit, nbytes)
    assert p.bytes < process_memory(H200, get_model("fla-gdn@0.6.0", "H200", gva=True), state,
                                    Shape(1, 4096, 16, 128, 32)).bytes or state == "warm"


def cli(*args: str, dim: str = "64"):
    return CliRunner().invoke(app, ["predict", "--seq", "8K", "--heads", "16", "--dim", dim, *args])


def test_triton_option_changes_the_process_memory_only():
    default, new = (json.loads(cli("--impl", "fla-kda@0.6.0", "--json", *extra).stdout)["results"][0]
                    for extra in ((), ("--triton", "3.9.0")))
    assert new["peak_bytes"] == default["peak_bytes"]
    assert "Triton 3.9.0" in new["process_memory"]["library"] and "Triton 3.6.0" in default["process_memory"]["library"]
    assert new["process_memory"]["bytes"] - default["process_memory"]["bytes"] == 5_575_081_984 - 5_407_309_824


@pytest.mark.parametrize("args,dim,words", [
    (("--impl", "fla-kda@0.6.0", "--triton", "3.7.0"), "64", "no process-memory data for Triton '3.7.0' (measured on the H200: 3.6.0, 3.9.0)"),
    (("--impl", "fla-gdn@0.6.0", "--triton", "3.6.0"), "64", "(measured on the H200: 3.9.0)"),
    (("--impl", "cudnn-kda-hopper-cuda@1.32.0", "--triton", "3.9.0"), "128", "--triton changes nothing for it"),
])
def test_a_triton_version_without_data_is_one_line_and_exit_1(args, dim, words):
    result = cli(*args, dim=dim)
    assert result.exit_code == 1
    assert words in result.output and len(result.output.strip().splitlines()) == 1


def probe_module():
    from livebytes.validate.gpu.probes import process_memory     # a probe is a module too
    return process_memory


@pytest.mark.parametrize("cases,ok", [("fla-report:128:16:16:4096:cold;fla-gdn-fwd:64:16:32:4096:warm;"
                                       "fla-kda-layer:128:32:32:8192:cold", True),      # run 16b's layer case too
                                      ("fla-kda:128:16:16:4096:cold", False),      # run 22g: no such harness
                                      ("fla-report:128:16:16:4096:hot", False)])
def test_the_process_probe_refuses_an_unknown_case_before_it_starts(cases, ok):
    """Run 22g asked for ``fla-kda`` (the harness is ``fla-report``): the probe ran no kernel and wrote the bare context
    as a measurement; now it stops on the case first."""
    parse = probe_module().parse_cases
    if ok:
        assert [c["impl"] for c in parse(cases, "/tmp/pm")] == ["fla-report", "fla-gdn", "fla-kda-layer"]
    else:
        with pytest.raises(SystemExit, match="impl must be one of fla-plain, fla-report, fla-gdn, fla-kda-layer"):
            parse(cases, "/tmp/pm")


def test_plan_counts_the_chosen_tritons_process_memory():
    """Triton 3.9.0 holds 167,772,160 B more outside PyTorch at KDA report H16 D64 (19,216-B limit against 18,592,
    modules 102,760,448 against 104,857,600): plan's longest sequence is shorter under it, and says whose data it used."""
    def planned(*extra):
        args = ["plan", "--impl", "fla-kda@0.6.0", "--heads", "16", "--dim", "64", "--json", *extra]
        return json.loads(CliRunner().invoke(app, args).stdout)["results"][0]
    default, new = planned(), planned("--triton", "3.9.0")
    assert new["value"] < default["value"]
    assert (default["triton"], new["triton"]) == ("3.6.0", "3.9.0")


@pytest.mark.parametrize("command", [["compare", "--seq", "8K"], ["plan"], ["sweep", "--seq", "8K"], ["timeline", "--seq", "8K"]])
def test_beside_a_model_without_triton_the_options_apply_to_the_others(command):
    """Several --impl, one without Triton kernels: --triton and --triton-cache set the others and say so in one warning
    (the JSON keeps it); the cuDNN column's triton and triton_cache are n/a. FLA warm beside cuDNN was refused before."""
    args = [*command, "--impl", "fla-kda@0.6.0", "--impl", "cudnn-kda-hopper-cuda@1.32.0", "--heads", "16",
            "--triton", "3.9.0", "--triton-cache", "warm", "--json"]
    result = CliRunner().invoke(app, args)
    assert result.exit_code == 0, result.output
    data = json.loads(result.stdout)
    tritons = {r["impl"]: (r["triton"], r["triton_cache"]) for r in data["results"]}
    assert tritons == {"fla-kda@0.6.0": ("3.9.0", "warm"), "cudnn-kda-hopper-cuda@1.32.0": ("n/a", "n/a")}
    if command[0] != "plan":           # plan warns on stderr before it plans; its JSON has no envelope warnings of it
        assert any("apply to the Triton models only" in w for w in data["warnings"])


def test_compare_says_when_its_columns_count_different_tritons():
    """fla-kda@0.6.0 defaults to 3.6.0, fla-gdn@0.6.0 has 3.9.0 only: the verdicts differ by it, the peaks do not."""
    data = json.loads(CliRunner().invoke(app, ["compare", "--impl", "fla-kda@0.6.0", "--impl", "fla-gdn@0.6.0", "--seq",
                                               "8K", "--heads", "16", "--dim", "64", "--json"]).stdout)
    assert any("different Triton versions (fla-kda@0.6.0 3.6.0, fla-gdn@0.6.0 3.9.0)" in w for w in data["warnings"])


def test_sweep_names_each_rows_assumptions_once_with_its_shapes(monkeypatch):
    """A grid over D32 and D64 under Triton 3.9.0: D32's frames are not measured (a bound, said at D32 only), D64's
    are; before, the caption held the last row's assumptions alone."""
    import io

    from rich.console import Console

    from livebytes.cli import render
    console = Console(width=400, file=io.StringIO(), color_system=None, force_terminal=False)
    monkeypatch.setattr(render, "console", console)
    result = CliRunner().invoke(app, ["sweep", "--impl", "fla-kda@0.6.0", "--seq", "8K", "--heads", "16", "--dim",
                                      "32,64", "--triton", "3.9.0"])
    assert result.exit_code == 0, result.output
    text = " ".join(console.file.getvalue().split())          # the caption wraps at the table's width
    assert text.count("stack reservation:") == 1
    assert ("estimated: fla-kda@0.6.0 at batch_size=1, seq_len=8K, num_heads=16, head_dim=32: stack reservation: stack "
            "frames not measured or derived") in text
    assert "livebytes frames derive --impl fla-kda@0.6.0 --contract report --head-dim 32 --num-heads 16 --triton 3.9.0" in text
