"""The module-load probe's CPU side (validate/gpu/probes/module_load.py): its PTX images, the cubin section reader,
the growth arithmetic, the arguments and the dry run. The GPU readings themselves run on the H200 only."""
import json
import struct

import pytest

from livebytes.validate.gpu.probes import module_load as ml

TINY, ZERO4K = ml.Variant("tiny"), ml.Variant("zero4k", zero_bytes=4096)


def _ptxas_or_skip() -> None:
    try:
        ml.ptxas_path()
    except SystemExit:
        pytest.skip("no ptxas (triton not installed)")


@pytest.mark.parametrize("variant, entries, mads", [
    (ml.Variant("a"), 1, 1),
    (ml.Variant("b", instructions=7, functions=3), 3, 21),       # 7 mads in each of 3 entries
])
def test_ptx_has_each_entry_and_its_chain(variant, entries, mads):
    ptx = ml.variant_ptx(variant)
    assert ptx.count(".visible .entry k") == entries
    assert ptx.count("mad.lo.u32") == mads
    assert f".entry k{entries - 1}(" in ptx and f".entry k{entries}(" not in ptx


@pytest.mark.parametrize("field, declaration", [
    ({"const_bytes": 16}, ".const .align 4 .b8 ctbl[16] = {1,2,3,4,5,6,7,8,9,10,11,12,13,14,15,16};"),
    ({"zero_bytes": 4096}, ".global .align 8 .b8 zbuf[4096];"),
    ({"init_bytes": 3}, ".global .align 4 .b8 ibuf[3] = {1,2,3};"),
])
def test_ptx_declares_and_reads_each_array(field, declaration):
    ptx = ml.variant_ptx(ml.Variant("x", **field))
    assert declaration in ptx
    assert ptx.count("add.u32 %r1, %r1, %r2;") == 1          # one read of the array, so ptxas keeps it


def _elf(sections: list[tuple[str, int, int, int]]) -> bytes:
    """A minimal ELF64 image: a 64-byte header, the section-name table, then the headers (name, type, flags, size)."""
    names = b"\0" + b"".join(n.encode() + b"\0" for n, *_ in sections) + b".shstrtab\0"
    shoff = 64 + len(names)
    offsets, at = [], 1
    for n, *_ in sections:
        offsets.append(at)
        at += len(n) + 1
    headers = [struct.pack("<IIQQQQIIQQ", 0, 0, 0, 0, 0, 0, 0, 0, 0, 0)]
    headers += [struct.pack("<IIQQQQIIQQ", o, t, f, 0, 0, s, 0, 0, 1, 0) for o, (_, t, f, s) in zip(offsets, sections)]
    headers.append(struct.pack("<IIQQQQIIQQ", at, 3, 0, 0, 64, len(names), 0, 0, 1, 0))
    head = bytearray(64)
    head[:5] = b"\x7fELF\x02"
    struct.pack_into("<Q", head, 0x28, shoff)
    struct.pack_into("<HHH", head, 0x3A, 64, len(headers), len(headers) - 1)
    return bytes(head) + names + b"".join(headers)


def test_sections_keep_what_the_loader_places_on_the_device():
    image = _elf([(".text.k", 1, 6, 256), (".nv.info", 0x70000000, 0, 36), (".nv.global", 8, 3, 4096),
                  (".nv.shared.reserved.0", 8, 3, 1024), (".nv.constant0.k", 1, 66, 536)])
    sections = ml.cubin_sections(image)
    assert sections[".nv.global"] == {"size": 4096, "flags": 3, "nobits": True}
    # .nv.info lacks SHF_ALLOC, shared memory is on-chip: 256 + 4,096 + 536 = 4,888 B
    assert ml.device_sections(sections) == {".text.k": 256, ".nv.global": 4096, ".nv.constant0.k": 536}
    assert ml.image_fields(image)["device_section_bytes"] == 4888


def test_a_non_elf_image_is_refused():
    with pytest.raises(ValueError, match="not an ELF64"):
        ml.cubin_sections(b"// PTX text, not a cubin")


def test_growth_is_after_minus_before():
    before = {"free": 10_000, "device_used": 5_000, "process_used": 4_000}
    after = {"free": 7_000, "device_used": 8_000, "process_used": None}
    # used 5,000 -> 8,000: +3,000; free 10,000 -> 7,000: a 3,000 drop; a missing process figure is left out
    assert ml.delta(before, after) == {"device_used": 3_000, "free_drop": 3_000}
    assert ml.delta(before, {**after, "process_used": 6_500})["process_used"] == 2_500      # 6,500 - 4,000


@pytest.mark.parametrize("argv, message", [
    (["--variants", "tiny"], "--out"),
    (["--out", "x", "--variants", "tiny,huge"], "unknown variant(s) huge"),
    (["--out", "x", "--cubins", "/nonexistent/folder"], "not a folder"),
    (["--out", "x", "--loading", "sometimes"], "invalid choice"),
])
def test_bad_arguments_exit_2_with_one_line(argv, message, capsys):
    with pytest.raises(SystemExit) as stop:
        ml.parse_args(argv)
    assert stop.value.code == 2
    assert message in capsys.readouterr().err


def test_real_cubins_have_the_sections_the_variants_ask_for(tmp_path):
    _ptxas_or_skip()
    v64k = ml.Variant("code64k", instructions=4096)
    images = ml.compile_variants((TINY, v64k, ZERO4K, ml.Variant("c", const_bytes=1024)), tmp_path)
    text = {n: ml.device_sections(ml.cubin_sections(i))[".text.k0"] for n, i in images.items()}
    # 4,095 more mads of 16 B each: 65,520 B more code, the text padded to 128 B
    assert 4095 * 16 <= text["code64k"] - text["tiny"] < 4095 * 16 + 128
    assert ml.cubin_sections(images["zero4k"])[".nv.global"] == {"size": 4096, "flags": 3, "nobits": True}
    assert ml.device_sections(ml.cubin_sections(images["c"]))[".nv.constant3"] == 1024


def test_dry_run_writes_one_row_per_image_and_no_gpu_is_exit_1(tmp_path, monkeypatch):
    _ptxas_or_skip()
    assert ml.main(["--out", str(tmp_path), "--dry-run", "--no-triton", "--variants", "tiny,zero4k"]) == 0
    rows = [json.loads(line) for line in (tmp_path / "module_load.jsonl").read_text().splitlines()]
    assert [(r["kind"], r["variant"], r["copies"]) for r in rows] == [("image", "tiny", 64), ("image", "zero4k", 32)]
    assert rows[1]["device_sections"][".nv.global"] == 4096
    monkeypatch.setattr(ml, "has_cuda", lambda: False)
    assert ml.main(["--out", str(tmp_path), "--no-triton", "--variants", "tiny"]) == 1


class FakeCuda:
    """Free memory drops 2 MiB at every 4th cuModuleLoadData and 64 KiB at every cuModuleGetFunction."""

    def __init__(self):
        self.free, self.loads, self.unloaded = 80 << 30, 0, 0

    def free_bytes(self):
        return self.free

    def load(self, image):
        self.loads += 1
        self.free -= (2 << 20) if self.loads % 4 == 1 else 0
        return self.loads

    def function(self, module, name):
        self.free -= 64 << 10
        return (module, name)

    def launch(self, fn):
        pass

    def unload(self, module):
        self.unloaded += 1


class FakeNvml:
    def __init__(self, cuda):
        self.cuda = cuda

    def device_used(self):
        return (80 << 30) - self.cuda.free + 500

    def process_used(self, pid):
        return None


def test_load_rows_hold_each_steps_growth(tmp_path):
    _ptxas_or_skip()
    image = ml.compile_variants((TINY,), tmp_path)["tiny"]
    cuda = FakeCuda()
    log, held = ml.Log(tmp_path / "rows.jsonl"), []
    ml.load_copies(cuda, FakeNvml(cuda), log, "ptx", "tiny", image, ["k0"], 5, True, held)
    log.file.close()
    rows = [json.loads(line) for line in (tmp_path / "rows.jsonl").read_text().splitlines()]
    # loads 1 and 5 take a 2 MiB step (2,097,152 B), the others none; each get_function 64 KiB (65,536 B)
    assert [r["growth"]["load"]["device_used"] for r in rows] == [2_097_152, 0, 0, 0, 2_097_152]
    assert {r["growth"]["get_function"]["free_drop"] for r in rows} == {65_536}
    assert [r["modules_held"] for r in rows] == [1, 2, 3, 4, 5] and held == [1, 2, 3, 4, 5]
    assert rows[0]["growth"]["launch"] == {"device_used": 0, "free_drop": 0}


def test_gpu_run_writes_header_context_loads_then_unload(tmp_path, monkeypatch):
    _ptxas_or_skip()
    cuda = FakeCuda()
    monkeypatch.setattr(ml, "start_cuda", lambda loading: (cuda, FakeNvml(cuda), {"kind": "header",
                                                                                  "driver_loading_mode": loading}))
    monkeypatch.setattr(ml, "torch_steps", lambda *a: (_ for _ in ()).throw(RuntimeError("no torch GPU")))
    args = ml.parse_args(["--out", str(tmp_path), "--variants", "tiny", "--no-triton", "--loading", "eager"])
    variants = ml.chosen(args.variants)
    log = ml.Log(tmp_path / "module_load.jsonl")
    ml.gpu_run(args, variants, ml.compile_variants(variants, tmp_path), log, deadline=float("inf"))
    log.file.close()
    kinds = [json.loads(line)["kind"] for line in (tmp_path / "module_load.jsonl").read_text().splitlines()]
    # header, context, tiny's 64 copies, the torch step's failure as a row, the unloading of all 64
    assert kinds == ["header", "context"] + ["load"] * 64 + ["error", "unload"]
    assert cuda.unloaded == 64


def test_cpu_frames_records_the_same_sections_per_candidate(tmp_path):
    """cpu_frames.py's candidate lines carry module_load's fields for each compiled cubin (issue 33's sums)."""
    _ptxas_or_skip()
    from types import SimpleNamespace

    from livebytes.validate.gpu.probes import cpu_frames
    image = ml.compile_variants((ZERO4K,), tmp_path)["zero4k"]
    fields = cpu_frames.cubin_fields(SimpleNamespace(asm={"cubin": image}))
    assert fields == ml.image_fields(image) and fields["device_sections"][".nv.global"] == 4096


def test_a_cache_folders_cubins_load_first_each_under_its_json_name(tmp_path, monkeypatch):
    _ptxas_or_skip()
    cache = tmp_path / "cache" / "HASH"
    cache.mkdir(parents=True)
    (cache / "k.cubin").write_bytes(ml.compile_variants((TINY,), tmp_path)["tiny"])
    (cache / "k.json").write_text(json.dumps({"name": "k0"}))           # the kernel's name is the json's, not the file's
    cuda = FakeCuda()
    names = []
    monkeypatch.setattr(cuda, "function", lambda module, name: names.append(name))
    monkeypatch.setattr(ml, "start_cuda", lambda loading: (cuda, FakeNvml(cuda), {"kind": "header"}))
    monkeypatch.setattr(ml, "torch_steps", lambda *a: None)
    args = ml.parse_args(["--out", str(tmp_path), "--variants", "tiny", "--no-triton", "--cubins", str(tmp_path / "cache")])
    log = ml.Log(tmp_path / "module_load.jsonl")
    ml.gpu_run(args, (), {}, log, deadline=float("inf"))
    log.file.close()
    rows = [json.loads(line) for line in (tmp_path / "module_load.jsonl").read_text().splitlines()]
    assert [r["kind"] for r in rows] == ["header", "context", "cache_cubin", "unload"] and names == ["k0"]
    assert rows[2]["path"] == "HASH/k.cubin" and rows[2]["growth"]["load"]["device_used"] == 2_097_152   # the 1st load's step


def test_eager_is_asked_for_before_anything_can_initialise_the_driver(tmp_path, monkeypatch):
    """Run 35's eager process set CUDA_MODULE_LOADING after has_cuda's cuInit; the driver read it too late (lazy)."""
    _ptxas_or_skip()
    monkeypatch.delenv("CUDA_MODULE_LOADING", raising=False)
    seen = []
    monkeypatch.setattr(ml, "has_cuda", lambda: seen.append(ml.os.environ.get("CUDA_MODULE_LOADING")) or False)
    assert ml.main(["--out", str(tmp_path), "--no-triton", "--variants", "tiny", "--loading", "eager"]) == 1
    assert seen == ["EAGER"]


@pytest.mark.parametrize("asked, driver, code, rows", [("eager", "lazy", 1, 1), ("eager", "eager", 0, 67),
                                                       ("default", "lazy", 0, 67)])
def test_a_loading_mode_the_driver_did_not_take_measures_nothing(tmp_path, monkeypatch, asked, driver, code, rows):
    """Asked eager, driver lazy: the header only, exit 1; otherwise header, context, tiny's 64 loads and the unload."""
    _ptxas_or_skip()
    cuda = FakeCuda()
    monkeypatch.setattr(ml, "start_cuda", lambda loading: (cuda, FakeNvml(cuda), {"kind": "header",
                                                                                  "driver_loading_mode": driver}))
    monkeypatch.setattr(ml, "torch_steps", lambda *a: None)
    args = ml.parse_args(["--out", str(tmp_path), "--variants", "tiny", "--no-triton", "--loading", asked])
    variants = ml.chosen(args.variants)
    log = ml.Log(tmp_path / "module_load.jsonl")
    assert ml.gpu_run(args, variants, ml.compile_variants(variants, tmp_path), log, deadline=float("inf")) == code
    log.file.close()
    assert len((tmp_path / "module_load.jsonl").read_text().splitlines()) == rows


@pytest.mark.parametrize("names, order", [("code2m,tiny,funcs64", ["code2m", "tiny", "funcs64"]),
                                          ("tiny,code2m", ["tiny", "code2m"])])
def test_variants_load_in_the_order_asked(names, order):
    assert [v.name for v in ml.chosen(names)] == order
