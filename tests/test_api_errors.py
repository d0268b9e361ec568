"""Every public call of ``import livebytes`` refuses a bad argument with the library's own error (issue 50, point 2):
one ``livebytes.ArgumentError`` (a ``LivebytesError`` and a ``TypeError``) whose ``argument`` is the parameter and whose
message names it, for every wrong type, empty list, NaN or out-of-range value and unknown keyword, checked before
anything is built or traced (the ``*_at`` calls that would build are replaced by a failure here). Each row of
``BAD`` raised Python's own AttributeError, IndexError or TypeError, or was answered, before ``api/arguments.py``."""
import pytest

import livebytes
from livebytes import calls
from livebytes.estimator.errors import LivebytesError
from livebytes.frames import derive_frames, derived_frames
from livebytes.frames import why_none_read as frames_why_none_read
from livebytes.process import measure_process, measured_processes
from livebytes.process import why_none_read as process_why_none_read

K = "fla-kda@0.6.0"
LAYER = "fla-kda-layer@0.6.0"
NAN, INF = float("nan"), float("inf")
S = dict(seq_len=8192, num_heads=8)            # a valid shape the bad keyword is added to


@pytest.fixture(autouse=True)
def nothing_runs(monkeypatch):
    """A bad argument is refused before the call builds, traces, compiles or measures anything."""
    import livebytes.frames as frames
    import livebytes.process as process

    def ran(*args, **kwargs):
        pytest.fail("the call ran past its argument checks")
    for name in ("predict_at", "compare_at", "plan_at", "sweep_at", "explain_at", "models_at"):
        monkeypatch.setattr(calls, name, ran)
    monkeypatch.setattr(frames, "derive_frames_at", ran)
    monkeypatch.setattr(process, "measure_process_at", ran)


def bad(call, *args, argument, **kwargs):
    """One row: ``call(*args, **kwargs)`` must be refused, naming ``argument`` (None: the positional arguments)."""
    shown = ", ".join([*map(repr, args), *(f"{k}={v!r}" for k, v in kwargs.items())])
    return pytest.param(call, args, kwargs, argument, id=f"{call.__name__}({shown})"[:90])


def sizes_of(call, *args, names, base=S):
    """Each size keyword of ``names`` given a NaN, infinity, a float, a bool, zero, a negative, a list, bytes, and
    2^51 (beyond ``shapes.MAX_SIZE`` = 2^50)."""
    return [bad(call, *args, argument=n, **{**base, n: v})
            for n in names for v in (NAN, INF, 1.5, True, 0, -1, [], b"8", 2**51, "8x")]


BAD = [
    # the examples: gpu=1, a list or a bool; alloc_conf=1; budget NaN or 1e30; empty lists; explain(None)...
    bad(livebytes.predict, K, argument="gpu", gpu=1, **S),
    bad(livebytes.predict, K, argument="gpu", gpu=["H200"], **S),
    bad(livebytes.predict, K, argument="gpu", gpu=True, **S),
    bad(livebytes.predict, K, argument="gpu", gpu="nope", **S),
    bad(livebytes.predict, K, argument="alloc_conf", alloc_conf=1, **S),
    bad(livebytes.predict, K, argument="alloc_conf", alloc_conf=b"expandable_segments:True", **S),
    bad(livebytes.predict, K, argument="alloc_conf", alloc_conf="max_split_size_mb:128", **S),
    bad(livebytes.plan, K, argument="budget", budget=NAN),
    bad(livebytes.plan, K, argument="budget", budget=1e30),               # 1e30 B >= 2^63 B (~9.2e18)
    bad(livebytes.plan, K, argument="budget", budget=2**63),              # parse_budget's bound: below 2^63 bytes
    bad(livebytes.plan, K, argument="budget", budget=-INF),
    bad(livebytes.plan, K, argument="budget", budget=1.5),                # not a whole number of bytes
    bad(livebytes.plan, K, argument="budget", budget=0),
    bad(livebytes.plan, K, argument="budget", budget=True),
    bad(livebytes.plan, K, argument="budget", budget="80"),               # no unit
    bad(livebytes.plan, K, argument="budget", budget=b"80GiB"),
    bad(livebytes.plan, [], argument="model"),
    bad(livebytes.plan, [K, K], argument="model"),
    bad(livebytes.plan, K, argument="solve", solve=1),
    bad(livebytes.plan, K, argument="solve", solve=None),
    bad(livebytes.plan, K, argument="solve", solve="nope"),
    bad(livebytes.compare, [], argument="models", **S),
    bad(livebytes.compare, (), argument="models", **S),
    bad(livebytes.compare, None, argument="models", **S),
    bad(livebytes.compare, {K}, argument="models", **S),                  # a set: no order to compare in
    bad(livebytes.compare, [K, 1], argument="models", **S),
    bad(livebytes.compare, [K, K], argument="models", **S),
    bad(livebytes.sweep, K, argument="seq_len", seq_len=[], num_heads=8),
    bad(livebytes.sweep, K, argument="num_heads", seq_len=8192, num_heads=()),
    bad(livebytes.sweep, K, argument="batch_size", seq_len=8192, num_heads=8, batch_size=[NAN]),
    bad(livebytes.sweep, K, argument="head_dim", seq_len=8192, num_heads=8, head_dim=""),
    bad(livebytes.sweep, K, argument="num_v_heads", seq_len=8192, num_heads=8, num_v_heads=[]),
    bad(livebytes.sweep, K, argument="expand_v", seq_len=8192, num_heads=8, expand_v=[]),
    bad(livebytes.sweep, K, argument="expand_v", seq_len=8192, num_heads=8, expand_v=[NAN]),
    bad(livebytes.sweep, K, argument="seq_len", seq_len=None, num_heads=8),
    bad(livebytes.sweep, [], argument="models", **S),
    bad(livebytes.sweep, {}, argument="models", **S),                     # a config: sweep takes registry keys
    bad(livebytes.sweep, LAYER, argument="checkpoint", checkpoint="no", **S),
    bad(livebytes.explain, None, K, argument="snapshot", **S),
    bad(livebytes.explain, 123, K, argument="snapshot", **S),
    bad(livebytes.explain, b"p.pickle", K, argument="snapshot", **S),
    bad(livebytes.explain, "", K, argument="snapshot", **S),
    bad(livebytes.explain, "p.pickle", None, argument="model", **S),
    bad(livebytes.explain, "p.pickle", K, argument="at", at="nope", **S),
    bad(livebytes.explain, "p.pickle", K, argument="at", at=None, **S),
    # the model itself, and a config dict holding what config.json cannot
    bad(livebytes.predict, None, argument="model", **S),
    bad(livebytes.predict, 123, argument="model", **S),
    bad(livebytes.predict, b"fla-kda@0.6.0", argument="model", **S),
    bad(livebytes.predict, [K], argument="model", **S),
    bad(livebytes.predict, "", argument="model", **S),
    bad(livebytes.predict, {"model_type": "kda", "rms_norm_eps": NAN}, argument="model", seq_len=8192),
    bad(livebytes.predict, {"model_type": "kda", "hidden_size": INF}, argument="model", seq_len=8192),
    bad(livebytes.predict, {"model_type": "kda", "layers": {1, 2}}, argument="model", seq_len=8192),
    bad(livebytes.predict, {"model_type": "kda", "name": b"x"}, argument="model", seq_len=8192),
    bad(livebytes.predict, {"model_type": "kda", "rope": {"factor": [1, NAN]}}, argument="model", seq_len=8192),
    bad(livebytes.predict, {"model_type": "kda", 1: 2}, argument="model", seq_len=8192),
    bad(livebytes.predict, {"model_type": ["kda"]}, argument="model", seq_len=8192),
    # the other keywords' types
    *[bad(livebytes.predict, K, argument=n, **{**S, n: v})
      for n in ("contract", "cp_layout", "cp_rank", "triton", "triton_cache", "optimizer", "precision", "routing")
      for v in (1, [], NAN, b"x", "", {})],
    *[bad(livebytes.predict, LAYER, argument=n, **{**S, n: v})
      for n in ("checkpoint", "no_recompute", "packed") for v in ("yes", "no", 1, 0.0, NAN, [])],
    bad(livebytes.predict, K, argument="triton_cache", triton_cache="lukewarm", **S),
    bad(livebytes.predict, K, argument="expand_v", expand_v=NAN, **S),
    bad(livebytes.predict, K, argument="expand_v", expand_v=0, **S),
    bad(livebytes.predict, K, argument="expand_v", expand_v=2**21, **S),  # beyond shapes.parse_ratio's 2^20
    bad(livebytes.predict, K, argument="expand_v", expand_v=[2], **S),
    bad(livebytes.predict, K, argument="num_heads", seq_len=8192),        # required: no config gives it
    *sizes_of(livebytes.predict, K, names=("seq_len", "num_heads", "batch_size", "head_dim", "num_v_heads", "hidden_size",
                                           "num_hidden_layers", "conv_size", "cp", "fsdp", "ep")),
    # a whole model's mesh (the command line's --fsdp, --ep), refused before anything is traced
    bad(livebytes.predict, "kimi-linear-small", argument="fsdp", seq_len=8192, fsdp=1 << 20),
    bad(livebytes.predict, "kimi-linear-small", argument="ep", seq_len=8192, ep=1 << 20),
    bad(livebytes.predict, K, argument="fsdp", fsdp=2, **S),             # a kernel has no training step to shard
    *sizes_of(livebytes.plan, K, names=("num_heads",), base={}),
    # the calls' form: positional arguments, a missing one
    bad(livebytes.predict, argument="model"),
    bad(livebytes.predict, K, 8192, argument=None),
    bad(livebytes.explain, argument="snapshot"),
    bad(livebytes.models, 1, argument=None),
    bad(derived_frames, 1, argument=None),
    bad(measured_processes, 1, argument=None),
    bad(frames_why_none_read, 1, argument=None),
    bad(process_why_none_read, 1, argument=None),
    # livebytes.frames and livebytes.process
    *[bad(call, v, argument="impl", num_heads=8) for call in (derive_frames, measure_process)
      for v in (None, 123, b"fla-kda@0.6.0", [], "")],
    *[bad(call, K, argument=n, num_heads=8, **{n: v}) for call in (derive_frames, measure_process)
      for n, v in (("contract", []), ("contract", 1), ("triton", 3.6), ("triton", ""), ("python", 1), ("python", b"py"),
                   ("timeout", NAN), ("timeout", -1), ("timeout", INF), ("timeout", "60"), ("timeout", True))],
    *sizes_of(derive_frames, K, names=("num_heads", "head_dim", "num_v_heads"), base={"num_heads": 8}),
    *sizes_of(measure_process, LAYER, names=("seq_len", "hidden_size", "num_hidden_layers", "conv_size"),
              base={"num_heads": 8}),
    bad(measure_process, LAYER, argument="checkpoint", num_heads=8, checkpoint="yes"),
    bad(derive_frames, K, argument="num_heads"),
]


@pytest.mark.parametrize("call, args, kwargs, argument", BAD)
def test_a_bad_argument_is_the_librarys_error_naming_it(call, args, kwargs, argument):
    with pytest.raises(livebytes.ArgumentError) as raised:
        call(*args, **kwargs)
    err = raised.value
    assert isinstance(err, LivebytesError) and isinstance(err, TypeError) and isinstance(err, ValueError)
    assert err.argument == argument, str(err)
    if argument is not None:
        assert argument in str(err)
    assert "\n" not in str(err)                     # one line, as the command line prints it


@pytest.mark.parametrize("call, args, given, close", [
    (livebytes.predict, (K,), "seq", "seq_len"),            # the command line's alias (shapes.HF_NAMES)
    (livebytes.predict, (K,), "heads", "num_heads"),
    (livebytes.predict, (K,), "seqlen", "seq_len"),         # a near spelling (difflib)
    (livebytes.predict, (K,), "gpus", "gpu"),
    (livebytes.predict, (K,), "expandv", "expand_v"),
    (livebytes.plan, (K,), "solv", "solve"),
    (livebytes.sweep, (K,), "num_head", "num_heads"),
    (livebytes.explain, ("p.pickle", K), "At", "at"),
    (measure_process, (K,), "heads", "num_heads"),
    (derive_frames, (K,), "timout", "timeout"),
    (livebytes.predict, (K,), "xyzzy", None),
    (livebytes.compare, ([K],), "optimiser", "optimizer"),
    (livebytes.models, (), "verbose", None),
    (derived_frames, (), "impl", None),
])
def test_an_unknown_keyword_is_named_with_its_close_match(call, args, given, close):
    with pytest.raises(livebytes.ArgumentError) as raised:
        call(*args, **{given: 1})
    message = str(raised.value)
    assert raised.value.argument == given
    assert f"{call.__name__}() got unexpected keyword argument {given}" in message
    assert (f"(did you mean {close}?)" in message) if close else ("did you mean" not in message)


def test_every_public_call_is_checked():
    """Each call in ``livebytes.__all__`` (and of its frames and process modules) is wrapped by ``arguments.checked``,
    so a call added later without it fails here."""
    import inspect

    import livebytes.frames as frames
    import livebytes.process as process
    public = [getattr(livebytes, n) for n in livebytes.__all__ if inspect.isfunction(getattr(livebytes, n))]
    public += [f for m in (frames, process) for n, f in vars(m).items()
               if inspect.isfunction(f) and f.__module__ == m.__name__ and not n.startswith("_") and not n.endswith("_at")]
    assert len(public) >= 12                    # predict, compare, plan, sweep, explain, models; 3 + 3 of the modules
    unchecked = [f.__qualname__ for f in public if not hasattr(f, "__wrapped__")]
    assert not unchecked


@pytest.mark.parametrize("budget, expected", [
    ("80GiB", 80 * 2**30),                      # 85,899,345,920 B
    (80 * 2**30, 80 * 2**30),
    (8e10, 80_000_000_000),                     # a whole float: bytes
])
def test_a_good_budget_reaches_the_plan(monkeypatch, budget, expected):
    """The checks refuse only what is wrong: the plan gets the budget in bytes whichever way it was written."""
    seen = {}
    monkeypatch.setattr(calls, "plan_at", lambda keys, base, solve, setting, limit: seen.setdefault("limit", limit))
    livebytes.plan(K, budget=budget)
    assert seen["limit"] == expected and isinstance(seen["limit"], int)


def test_a_whole_models_triton_is_checked_before_its_trace():
    """triton= for a whole model: refused from the process-memory data, before the minute-long trace (calls.*_at
    fail here if reached)."""
    with pytest.raises(livebytes.ArgumentError, match="^triton: .*no process-memory data for Triton 'nope'") as raised:
        livebytes.predict("qwen3-next-small", seq_len=8192, triton="nope")
    assert raised.value.argument == "triton"

