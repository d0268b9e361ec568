"""A process-memory status typed (``estimator/process/status.py``) and said (``livebytes/process_words.py``): the kind
combined from its notes, the words each part reads as, the commands a hint names."""
import copy
import pickle

import pytest

from livebytes.estimator.process.status import (MEASURED, Act, Assumption, Cite, Hint, Kind, LooError, OffGpu, Part,
                                                ProbeCase, Status, read_note, read_status, said)
from livebytes.process_words import (NO_PROBE, Said, assumption_words, derive_command, measure_command, status_words)

KDA = ProbeCase("fla-kda@0.6.0", "report", 256, 16, 16, "3.6.0", 4096)
GDN_LAYER = ProbeCase("fla-gdn-layer@0.6.0", None, 128, 16, 32, None, 8192,
                      (("hidden", 2048), ("layers", 2), ("checkpoint", True), ("conv_size", 4)))


@pytest.mark.parametrize("kinds,combined", [
    ((Kind.BOUNDED, Kind.BOUNDED), Kind.BOUNDED),
    ((Kind.BOUNDED, Kind.ESTIMATED), Kind.ESTIMATED),
    ((Kind.ESTIMATED, Kind.UNBOUNDED, Kind.BOUNDED), Kind.UNBOUNDED)])
def test_a_status_resting_on_several_takes_the_weakest_kind_and_keeps_every_note_in_order(kinds, combined):
    parts = [said(k, f"note {i}") for i, k in enumerate(kinds)]
    s = Status.of(parts)
    assert s.kind is combined
    assert status_words(s) == f"{combined.value}: " + "; ".join(f"note {i}" for i in range(len(kinds)))


def test_measured_and_derived_read_bare_aside_or_on_this_machine():
    assert status_words(MEASURED) == "measured"
    assert status_words(Status(Kind.DERIVED, aside="compiled for sm90 on the CPU")) == \
        "derived (compiled for sm90 on the CPU)"
    assert status_words(Status(Kind.MEASURED, here="2026-12-01")) == "measured (on this machine, 2026-12-01)"
    assert status_words(said(Kind.MEASURED, "within the modules figure")) == "measured: within the modules figure"


def test_a_cited_status_reads_with_or_without_its_kind():
    cold = said(Kind.UNBOUNDED, "the limit at 8,192 tokens used")
    warm = said(Kind.UNBOUNDED, "no warm process (", Cite(cold, kind=False), ")")
    bound = said(Kind.BOUNDED, "its cold figure (", Cite(MEASURED), ") bounds it")
    assert status_words(warm) == "unbounded: no warm process (the limit at 8,192 tokens used)"
    assert status_words(bound) == "bounded: its cold figure (measured) bounds it"


def test_the_commands_a_hint_names():
    assert derive_command(KDA) == ("livebytes frames derive --impl fla-kda@0.6.0 --contract report --head-dim 256 "
                                   "--num-heads 16 --triton 3.6.0")
    assert measure_command(KDA) == ("livebytes process measure --impl fla-kda@0.6.0 --contract report --head-dim 256 "
                                    "--num-heads 16 --triton 3.6.0")            # 4,096 tokens: the probe's default
    assert measure_command(GDN_LAYER) == ("livebytes process measure --impl fla-gdn-layer@0.6.0 --head-dim 128 "
                                          "--num-heads 16 --num-v-heads 32 --seq-len 8192 --hidden-size 2048 "
                                          "--num-hidden-layers 2 --conv-size 4 --checkpoint")


def test_a_hint_without_a_case_says_why_or_nothing():
    derive = said(Kind.ESTIMATED, "frames from the nearest cases; ", Hint(Act.DERIVE, None))
    assert status_words(derive) == f"estimated: frames from the nearest cases; {NO_PROBE}"
    measure = said(Kind.ESTIMATED, "modules").plus(said(Kind.ESTIMATED, Hint(Act.MEASURE, KDA)).notes[0])
    assert status_words(measure) == f"estimated: modules; measure the case's process on the GPU itself (minutes): " \
                                    f"{measure_command(KDA)}"


def test_an_assumption_keeps_its_kind_apart_through_json_pickle_and_copy():
    a = assumption_words(Assumption(said(Kind.BOUNDED, "proof"), Part.MODULES))
    assert a == "bounded: kernel modules: proof" and (a.kind, a.text) == ("bounded", "kernel modules: proof")
    for twin in (pickle.loads(pickle.dumps(a)), copy.deepcopy(a)):
        assert isinstance(twin, Said) and (twin, twin.kind, twin.text) == (a, a.kind, a.text)
    library = assumption_words(Assumption(said(Kind.UNBOUNDED, "not measured"), library="newlib 1.0"))
    assert library == "unbounded: newlib 1.0: not measured"
    assert assumption_words(Assumption(read_note("unbounded: the snapshot's figures used"))) == \
        "unbounded: the snapshot's figures used"


@pytest.mark.parametrize("bad", ["estimated: a guess", "unbounded", "measured: x"])
def test_the_data_files_say_only_what_they_may(bad):
    with pytest.raises(ValueError):
        read_note(bad)
    with pytest.raises(ValueError):
        read_status(bad)


def test_an_estimates_error_and_another_gpus_figure_read_in_mib_and_words():
    # -73,400,320 B = -70 MiB, 394,264,576 B = 376 MiB, 1,572,864 B = 1.5 MiB -> "+2" (nearest, ties to even)
    error = LooError(100, -73_400_320, 394_264_576, 1_572_864)
    s = said(Kind.ESTIMATED, "frames from the nearest cases; ", error)
    assert status_words(s) == ("estimated: frames from the nearest cases; leave-one-out over 100 committed cases: -70 "
                               "to +376 MiB; the high end (+2 MiB) counted")
    off = said(Kind.ESTIMATED, OffGpu("H200", "the H200's figure"))
    assert status_words(off) == ("estimated: off the H200: the H200's figure, its error on this GPU not measured (no "
                                 "process of this GPU committed)")
