"""One query path (issue 35): ``api/query.py`` resolves a ``Query`` once (each model built once, Triton's part asked
once) and ``answer`` walks each model once (one verdict); predict, compare and timeline answer through it. The
commands are modules (``cli/commands``) assembled in one list, their options declared once (``options.query_options``).
Every command's --json and table output through the new path is held by tests/test_golden.py and tests/test_json.py."""
import collections
import inspect
import json

import pytest
from typer.testing import CliRunner

from livebytes.cli.app import app

SHAPE = ["--seq", "8K", "--heads", "32"]
FLA, HOPPER = "fla-kda@0.6.0", "cudnn-kda-hopper@1.32.0"


@pytest.fixture
def calls_to(monkeypatch):
    """``calls_to(module, name)``: count the calls of a module's function from here on (a Counter by name)."""
    seen = collections.Counter()

    def count(module, name):
        original = getattr(module, name)

        def counted(*args, **kwargs):
            seen[name] += 1
            return original(*args, **kwargs)
        monkeypatch.setattr(module, name, counted)
        return seen
    return count


# (command line, models in it): each model built once, judged once
CASES = [(["predict", "--impl", FLA, *SHAPE], 1),
         (["compare", "--impl", FLA, "--impl", HOPPER, *SHAPE], 2),        # two --impl: two models
         (["timeline", "--impl", FLA, "--impl", HOPPER, *SHAPE], 2)]


@pytest.mark.parametrize("args,models", CASES)
def test_a_query_builds_each_model_once_and_judges_it_once(calls_to, args, models):
    from livebytes.estimator import capacity, registry
    seen = calls_to(registry, "get_compiled")
    calls_to(registry, "get_model")
    calls_to(capacity, "verdict")
    r = CliRunner().invoke(app, args + ["--json"])
    assert r.exit_code == 0, r.output
    assert seen["get_compiled"] == models and seen["get_model"] == 0      # compiled, never built twice
    assert seen["verdict"] == models                                     # one fresh process per model


@pytest.mark.parametrize("args,models", CASES)
def test_whether_a_model_runs_triton_kernels_is_asked_once(calls_to, args, models):
    """Resolution asks ``capacity.triton_cache_matters`` once per model; the cache state, the warning of several
    --impl and the JSON's allocator terms take that answer (before: each asked again)."""
    from livebytes import choose
    from livebytes.estimator import capacity
    seen = calls_to(capacity, "triton_cache_matters")
    resolved = calls_to(choose, "triton_settings")
    r = CliRunner().invoke(app, args + ["--triton-cache", "warm", "--json"])
    assert r.exit_code == 0, r.output
    assert resolved["triton_settings"] == models
    assert seen["triton_cache_matters"] == models


def test_resolve_refuses_in_the_flags_order_before_any_simulation(calls_to):
    """A bad --alloc-conf is refused after the models are built and the shape's warnings told, before any verdict."""
    from livebytes.estimator import capacity
    from livebytes.estimator.shapes import Shape
    from livebytes.query import Query, Setting, resolve
    seen = calls_to(capacity, "verdict")
    told = []
    with pytest.raises(Exception, match="alloc"):
        resolve(Query((FLA,), Shape(1, 2**40, 32, 128), Setting(alloc_conf="bogus:1")), told.append)
    # 2^40 = 1,099,511,627,776 tokens: implausible (16M or more), told before the refusal; no process simulated
    assert len(told) == 1 and "1,099,511,627,776 tokens" in told[0] and seen["verdict"] == 0


def test_the_compiled_answer_is_the_built_models_answer():
    """The query's compiled models (``get_compiled``) give the document the models as built give (``sources``, the
    snapshot's path, and compare's path before): one path, the same bytes."""
    from livebytes import report
    from livebytes.estimator.shapes import Shape
    from livebytes.query import Query, answer, resolve
    shape = Shape(1, 8192, 32, 128)
    documents = []
    for sources in (False, True):
        done = answer(resolve(Query((FLA, HOPPER), shape, several=True, sources=sources)))
        documents.append(report.compare_data(done.predictions, [m.records for m in done.models],
                                             [m.replay_peak_bytes for m in done.models], done.verdicts))
    assert documents[0] == documents[1]
    assert {type(m).__name__ for m in (r.model for r in resolve(Query((FLA,), shape)).models)} == {"CompiledModel"}


def test_timeline_leaves_out_what_it_does_not_show(calls_to):
    """timeline asks for neither the steady-state replay nor the records (``answer``'s ``asks``); predict asks both."""
    from livebytes.estimator.shapes import Shape
    from livebytes.query import EVERYTHING, Query, answer, resolve
    resolution = resolve(Query((FLA,), Shape(1, 8192, 32, 128)))
    (bare,) = answer(resolution, asks=frozenset()).models
    (full,) = answer(resolution, EVERYTHING).models
    assert bare.replay_peak_bytes is None and bare.records == []
    assert full.replay_peak_bytes >= full.prediction.peak_bytes       # the allocator's replay never below the sum of blocks
    assert bare.verdict == full.verdict and bare.prediction.peak_bytes == full.prediction.peak_bytes


def test_the_app_is_the_command_modules_in_their_order():
    """app.py registers ``commands.COMMANDS`` and nothing else, in that order (--help's and docs/json.md's)."""
    from typer.main import get_command

    from livebytes.cli import schema
    from livebytes.cli.commands import COMMANDS, modules
    assert list(get_command(app).commands) == list(COMMANDS) == list(schema.schemas())
    for m in modules():
        assert m.NAME == m.__name__.rsplit(".", 1)[1] and callable(m.command) and m.schema()["title"].startswith(
            f"livebytes {m.NAME} --json")


def test_query_options_declares_the_options_once_in_the_order_given():
    """A command names the query options it takes; it receives them as one ``QueryFlags`` (the others at their
    defaults), its own parameters as they are."""
    from livebytes.cli import options as o

    @o.query_options("impl", "seq", "own", "gpu", seq=o.Mbs)
    def command(q: o.QueryFlags, own: int = 3, last: bool = o.Json):
        return q, own, last
    assert list(inspect.signature(command).parameters) == ["impl", "seq", "own", "gpu", "last"]
    assert inspect.signature(command).parameters["seq"].default is o.Mbs          # replaced for this command
    q, own, last = command(impl=["k"], seq="8K", own=4, gpu=None, last=True)
    assert (q.impl, q.seq, q.gpu, q.heads, q.packed, own, last) == (["k"], "8K", None, None, False, 4, True)


def test_every_query_command_takes_the_shared_declarations():
    """predict, compare and timeline take the same option objects (declared once in ``options.QUERY_OPTIONS``)."""
    from livebytes.cli import options as o
    from livebytes.cli.commands import compare, predict, timeline
    for name in ("seq", "heads", "gpu", "alloc_conf", "triton_cache", "cp"):
        defaults = {inspect.signature(m.command).parameters[name].default for m in (predict, compare, timeline)}
        assert defaults == {o.QUERY_OPTIONS[name][1]}, name


def test_a_column_table_is_the_hand_built_table():
    """``render.table`` of Columns draws what rich's own calls draw: a key column, a number column, a folding one."""
    import io

    from rich.console import Console
    from rich.table import Table

    from livebytes.cli import render
    from livebytes.cli.render import Column, T
    rows = [("fla-kda@0.6.0", "1.500", "a long description that folds"), render.SECTION, ("b", "22.000", "c")]
    ours = render.table("title", [Column("impl", lambda r: r[0], "key"), Column("GiB", lambda r: r[1], "number"),
                                  Column("what", lambda r: r[2])], rows)
    theirs = Table(title=T("title"), title_justify="left")
    theirs.add_column(T("impl"), no_wrap=True)
    theirs.add_column(T("GiB"), justify="right", no_wrap=True)
    theirs.add_column(T("what"), overflow="fold")
    theirs.add_row(T(rows[0][0]), T(rows[0][1]), T(rows[0][2]))
    theirs.add_section()
    theirs.add_row(T("b"), T("22.000"), T("c"))

    def drawn(t) -> str:
        console = Console(width=40, file=io.StringIO(), color_system=None)
        console.print(t)
        return console.file.getvalue()
    assert drawn(ours) == drawn(theirs) and "22.000" in drawn(ours)


def test_the_python_api_and_the_command_answer_alike():
    """``livebytes.predict`` and ``livebytes predict --json`` go through the one query: the same result."""
    import livebytes
    r = CliRunner().invoke(app, ["predict", "--impl", FLA, *SHAPE, "--json"])
    assert json.loads(r.stdout)["results"][0] == livebytes.predict(FLA, seq_len="8K", num_heads=32).to_dict()
