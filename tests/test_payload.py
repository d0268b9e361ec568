"""Saved payload: the models against the real autograd graph on the CPU (float32, one thread).

The document's tables (seed 004, measured on torch 2.8) are reproduced on the installed torch; the
integers are checked against our own measurement, the shape of the result against the document."""
import importlib

import pytest

from livebytes.estimator.payload import predict_payload, totals
from livebytes.lifetimes.attention_payload import PAYLOAD_MODELS

torch = pytest.importorskip("torch")
from livebytes.validate.gpu.payload import gradients_match, measure  # noqa: E402

CASES = [
    (128, 32, 32, 32, 32), (256, 32, 32, 32, 32), (1024, 32, 32, 32, 32),
    (100, 16, 8, 32, 32),    # T not a multiple of the block
    (97, 8, 12, 16, 24),     # odd T, rectangular tiles, dv != d
    (33, 4, 6, 64, 16),      # a query block larger than T
]


@pytest.mark.parametrize("fn", ["dense", "tiled", "checkpointed"])
@pytest.mark.parametrize("T,d,dv,bq,bk", CASES)
def test_predicted_payload_equals_measured(fn, T, d, dv, bq, bk):
    p = predict_payload(PAYLOAD_MODELS[fn], T, d, dv, bq, bk)
    m = measure(fn, T, d, dv, bq, bk)
    assert (p.bytes, p.events, p.largest) == (m.bytes, m.save_events, m.largest)


def test_document_table_one_by_hand():
    """T=128, d=dv=32, 32x32 tiles: 4 key blocks. Inputs reachable as views 4*128*96 = 49,152 B; per tile
    (25 + 4*32) B per row x 4 blocks x 128 rows = 78,336; the p tiles 4*128^2 = 65,536; alpha and its view
    in 3 of 4 tiles 8*3*128 = 3,072; the final division and log (8 + 4*32)*128 = 17,408: 213,504 B = 208.5 KiB,
    which the document prints as 208. Save events: 4 query blocks x (12 + 3*14 + 3) = 228."""
    p = predict_payload(PAYLOAD_MODELS["tiled"], 128, 32, 32, 32, 32)
    assert p.bytes == 49_152 + 78_336 + 65_536 + 3_072 + 17_408 == 213_504
    assert p.events == 228 and p.largest == 32 * 32


def test_shape_of_the_result():
    tiled = [predict_payload(PAYLOAD_MODELS["tiled"], t, 32).bytes for t in (128, 256, 512, 1024)]
    dense = [predict_payload(PAYLOAD_MODELS["dense"], t, 32).bytes for t in (128, 256, 512, 1024)]
    ckpt = [predict_payload(PAYLOAD_MODELS["checkpointed"], t, 32).bytes for t in (128, 256, 512, 1024)]
    growth = [b / a for a, b in zip(tiled, tiled[1:])]
    assert all(3.3 < g < 4 for g in growth) and growth == sorted(growth)        # quadratic, climbing to 4
    assert all(1.8 < t / d < 2.3 for t, d in zip(tiled, dense))                # about twice dense
    assert ckpt == [3 * t * 32 * 4 for t in (128, 256, 512, 1024)]             # the three inputs only
    assert max(predict_payload(PAYLOAD_MODELS["tiled"], t, 32).largest for t in (128, 1024)) == 1024


def test_checkpointed_gradients_equal_dense():
    assert gradients_match() < 1e-5


def test_every_record_names_its_formula():
    for model in PAYLOAD_MODELS.values():
        for r in model.records:
            assert r.op and r.formula and r.dtype in ("fp32", "int64", "bool")
        nbytes, events, largest = totals(model)
        p = predict_payload(model, 100, 16, 8, 32, 24)
        assert p.bytes > 0 and p.events >= len(model.records) and p.largest > 0
        assert {str(s) for s in nbytes.free_symbols} <= {"T", "d", "dv", "bq", "bk"}


def test_payload_command():
    from typer.testing import CliRunner

    from livebytes.cli.app import app
    r = CliRunner().invoke(app, ["payload", "--fn", "tiled", "--T", "128,256", "--d", "32", "--json"])
    assert r.exit_code == 0, r.output
    import json
    rows = json.loads(r.stdout)["results"]
    assert [row["predicted_bytes"] for row in rows] == [row["measured_bytes"] for row in rows] == [213_504, 722_944]


def test_the_measurement_cap_is_one_gib_per_t_by_t_matrix():
    from livebytes.validate.gpu.payload import MEASURE_MAX_MATRIX_BYTES, largest_measurable_tokens
    t = largest_measurable_tokens()
    assert t == 16384                                          # 16,384^2 * 4 B = 2^30 B
    assert t * t * 4 <= MEASURE_MAX_MATRIX_BYTES < (t + 1) ** 2 * 4


@pytest.mark.parametrize("seq", ["100000", "16385", "128,100000"])
def test_payload_refuses_a_measurement_beyond_the_cap_before_measuring(seq, monkeypatch):
    from typer.testing import CliRunner

    from livebytes.cli.app import app
    payload = importlib.import_module("livebytes.validate.gpu.payload")   # the module the command imports (sys.modules)
    monkeypatch.setattr(payload, "_measure", lambda *a: pytest.fail("measured a row before refusing"))
    r = CliRunner().invoke(app, ["payload", "--fn", "dense", "--seq", seq])
    assert r.exit_code == 1 and r.stdout == "" and "Traceback" not in r.output
    (line,) = r.stderr.strip().splitlines()
    assert line.startswith("error: ") and "--seq-len <= 16,384" in line and "--no-measure" in line


@pytest.mark.parametrize("failure", [RuntimeError("[enforce fail at alloc_cpu.cpp:117] DefaultCPUAllocator: can't allocate "
                                                  "memory: you tried to allocate 40000000000 bytes."), MemoryError()])
def test_a_host_allocation_failure_is_one_line(failure, monkeypatch):
    from typer.testing import CliRunner

    from livebytes.cli.app import app
    payload = importlib.import_module("livebytes.validate.gpu.payload")

    def fail(*args):
        raise failure
    monkeypatch.setattr(payload, "_measure", fail)
    r = CliRunner().invoke(app, ["payload", "--fn", "dense", "--seq", "1024"])
    assert r.exit_code == 1 and "Traceback" not in r.output
    (line,) = r.stderr.strip().splitlines()
    assert line.startswith("error: measuring dense at 1,024 tokens ran out of host memory")


def test_another_runtime_error_is_not_disguised_as_memory(monkeypatch):
    payload = importlib.import_module("livebytes.validate.gpu.payload")

    def fail(*args):
        raise RuntimeError("shape mismatch")
    monkeypatch.setattr(payload, "_measure", fail)
    with pytest.raises(RuntimeError, match="shape mismatch"):
        payload.measure("dense", 128)


@pytest.mark.parametrize("fn,more", [("dense", 3), ("tiled", 0), ("checkpointed", 0)])
def test_host_memory_bound_is_the_payload_and_denses_other_matrices(fn, more):
    from livebytes.estimator.payload import predict_payload
    from livebytes.lifetimes.attention_payload import PAYLOAD_MODELS
    from livebytes.validate.gpu.payload import host_bytes_needed
    payload = predict_payload(PAYLOAD_MODELS[fn], T=4096, d=32, dv=None, bq=32, bk=32).bytes
    assert host_bytes_needed(fn, 4096, 32, None, 32, 32) == payload + more * 4096 * 4096 * 4   # [T, T] fp32


def test_payload_refuses_before_measuring_when_the_host_lacks_the_memory(monkeypatch):
    from typer.testing import CliRunner

    from livebytes.cli.app import app
    payload = importlib.import_module("livebytes.validate.gpu.payload")     # the module the command imports (sys.modules)
    monkeypatch.setattr(payload, "available_host_bytes", lambda: 2**30)          # 1 GiB available
    monkeypatch.setattr(payload, "_measure", lambda *a: pytest.fail("measured although refused"))
    r = CliRunner().invoke(app, ["payload", "--fn", "dense", "--seq", "1024,16384"])
    lines = [line for line in r.stderr.splitlines() if line.strip()]
    # dense at 16,384: probabilities 16,384^2 * 4 B = 1 GiB and q, k, v 3 * 16,384 * 32 * 4 B = 6 MiB saved, plus 3 more
    # [T, T] fp32 matrices = 3 GiB: 4 GiB + 6 MiB = 4.006 GiB
    assert r.exit_code == 1 and len(lines) == 1 and "at least 4.01 GiB" in lines[0] and "1.00 GiB is available" in lines[0]


def test_a_payload_that_differs_fails_in_validates_words(monkeypatch):
    """payload speaks validate's vocabulary (schema 3): ``passed`` per row and ``error_bytes`` = predicted - measured. A
    measurement 512 B above the model's 213,504 B (tiled, T 128, d 32) fails: error_bytes -512, exit code 3."""
    import dataclasses
    import importlib
    import json

    from typer.testing import CliRunner

    from livebytes.cli.app import app
    payload = importlib.import_module("livebytes.validate.gpu.payload")   # the module the command imports (sys.modules'),
    real = payload.measure                                             # even after a test re-imported the package
    monkeypatch.setattr(payload, "measure", lambda *a, **k: dataclasses.replace(real(*a, **k), bytes=real(*a, **k).bytes + 512))
    r = CliRunner().invoke(app, ["payload", "--fn", "tiled", "--seq-len", "128", "--head-dim", "32", "--json"])
    assert r.exit_code == 3, r.output
    data = json.loads(r.stdout)
    (row,) = data["results"]
    assert data["passed"] is False and row["passed"] is False
    assert (row["predicted_bytes"], row["measured_bytes"], row["error_bytes"]) == (213_504, 214_016, -512)
    assert row["shape"] == {"seq_len": 128, "head_dim": 32, "head_v_dim": 32, "block_q": 32, "block_k": 32}
