"""The GPU presets (estimator/data/devices.json): each preset's bytes are the figure its source quotes, as arithmetic
beside it; each source says what kind of figure it is, so a datasheet estimate reads as one in the output."""
import json

import pytest

from livebytes.estimator.devices import CAPACITY_KINDS, DEVICES, GiB, MiB, PRESETS_FILE, get_device, preset

# (preset, capacity_bytes as its source's figure, SMs, the figure as the source prints it)
FIGURES = [
    ("H200", 150_109_880_320, 132, "validate/data/records/h200_device.json"),        # our probe's total_memory, to the byte
    ("H100", 85_017_493_504, 132, "run39/a/a-kda7b-32k.json"),                   # our run 39 probe's total_memory
    ("B200", 182_642 * MiB, 148, "total_memory=182642MB"),                      # PyTorch prints MiB, rounded down
    ("B300", 287_428_771_840, 148, "287.4 GB total"),                            # 287,428,771,840 / 10^9 = 287.4
    ("A100-40GB", 42_298_834_944, 108, "42298834944 bytes"),                     # deviceQuery prints the bytes
    ("A100-80GB", 85_100_068_864, 108, "85100068864 bytes"),                     # deviceQuery prints the bytes
    ("H20", 97_285 * MiB, 78, "total_memory=97285MB"),                          # PyTorch prints MiB, rounded down
    ("L40S", 47_803_596_800, 142, "47803596800 bytes"),                          # deviceQuery prints the bytes
    ("GB200", 186 * 10**9, 152, "up to 372 GB HBM3e"),                           # datasheet: 372 GB / 2 GPUs = 186 GB
    ("RTX4090", 25_386_352_640, 128, "25386352640 bytes"),                       # deviceQuery prints the bytes
    ("RTX5090", 33_677_180_928, 170, "33677180928 bytes"),                       # deviceQuery prints the bytes
]


@pytest.mark.parametrize("name,capacity,sms,quoted", FIGURES)
def test_each_preset_is_its_sources_figure(name, capacity, sms, quoted):
    d = get_device(name)
    assert (d.capacity_bytes, d.sm_count) == (capacity, sms)
    assert quoted in d.capacity_source


def test_the_measured_presets_are_our_cards():
    """150,109,880,320 B = 143,155.9375 MiB: validate/data/records/h200_device.json's total_memory; 85,017,493,504 B =
    81,078.75 MiB: run 39's H100 (a public deviceQuery under CUDA driver 13.0 printed 262,144 B more, kept as also
    reported). The only two measured."""
    h200, h100 = get_device("H200"), get_device("H100")
    assert h200.capacity_bytes == 150_109_880_320 and h200.capacity_measured
    assert h100.capacity_bytes == 85_017_755_648 - 262_144 and h100.capacity_measured
    assert [d.name for d in DEVICES.values() if d.capacity_measured] == ["H200", "H100"]


@pytest.mark.parametrize("name,gib", [("H100", "79.18"), ("B200", "178.36"), ("B300", "267.69"), ("A100-40GB", "39.39"),
                                      ("A100-80GB", "79.26"), ("H20", "95.00"), ("L40S", "44.52"), ("RTX4090", "23.64"),
                                      ("RTX5090", "31.36")])
def test_the_reported_totals_in_gib(name, gib):
    """What PyTorch's out-of-memory message would print as the total: 85,017,493,504 / 2^30 = 79.18;
    182,642 / 1,024 = 178.36; 287,428,771,840 / 2^30 = 267.69 (sglang#25225 prints 267.7, to 0.1 GiB);
    42,298,834,944 / 2^30 = 39.39; 85,100,068,864 / 2^30 = 79.26; 97,285 / 1,024 = 95.00; 47,803,596,800 / 2^30 = 44.52
    (45,589.06 MiB: the L40S's torch print 'total_memory=45589MB' agrees); 25,386,352,640 / 2^30 = 23.64;
    33,677,180,928 / 2^30 = 31.36."""
    assert f"{get_device(name).capacity_bytes / GiB:.2f}" == gib


@pytest.mark.parametrize("name", ["B200", "B300", "A100-40GB", "A100-80GB", "H20", "L40S", "RTX4090", "RTX5090"])
def test_a_public_figure_names_its_address_and_is_labelled(name):
    d = get_device(name)
    assert d.capacity_kind == "reported" and not d.capacity_measured
    assert d.capacity_source.startswith("public report, not measured by us: ") and "https://" in d.capacity_source


def test_no_reported_preset_is_a_datasheet_gb_figure():
    """The old presets were 80, 180 and 288 GB as bytes (80 * 10^9 ...): a card never reports a round 10^9 multiple, so
    only a row labelled a datasheet estimate holds one (the GB200's 186 GB: no public print gives its total to the byte)."""
    assert all(d.capacity_bytes % 10**9 for d in DEVICES.values() if d.capacity_kind != "datasheet")
    assert [d.name for d in DEVICES.values() if d.capacity_kind == "datasheet"] == ["GB200"]


def test_the_datasheet_row_is_below_what_public_torch_prints():
    """The GB200's datasheet 186 GB = 173.23 GiB, under the 184.31 GiB PyTorch's out-of-memory message prints on the
    card (its also_reported): the estimate errs on the side of 'does not fit'."""
    gb200 = get_device("GB200")
    assert gb200.capacity_source.startswith("datasheet estimate, not measured: ")
    assert f"{gb200.capacity_bytes / GiB:.2f}" == "173.23" and gb200.capacity_bytes < 184.305 * GiB


def test_a_datasheet_row_says_so_in_its_source():
    row = {"name": "X1", "arch": "sm90", "sm_count": 132, "capacity_bytes": 80 * 10**9, "capacity_kind": "datasheet",
           "capacity_source": "X1 datasheet: 80 GB", "shared_memory_per_block_optin": 232_448, "max_threads_per_sm": 2048,
           "limits_source": "guide", "process_memory": "H200"}
    d = preset(row)
    assert d.capacity_source == "datasheet estimate, not measured: X1 datasheet: 80 GB" and not d.capacity_measured


def test_an_unknown_kind_is_refused():
    row = {"name": "X1", "arch": "sm90", "sm_count": 132, "capacity_bytes": 1, "capacity_kind": "guessed",
           "capacity_source": ""}
    with pytest.raises(ValueError, match="capacity_kind 'guessed' is none of measured, reported, datasheet"):
        preset(row)


def test_every_row_says_why_its_other_figures_are_not_taken():
    rows = json.loads(PRESETS_FILE.read_text())["presets"]
    assert [r["name"] for r in rows] == list(DEVICES) and {r["capacity_kind"] for r in rows} <= set(CAPACITY_KINDS)
    assert all(o["figure"] and o["why_not"] for r in rows for o in r.get("also_reported", []))


def test_every_row_states_each_fact_a_model_asks():
    """A device is one row: arch, SMs, shared memory per block, resident threads per SM, the limits' source and whose
    process-memory data it takes; each row's limits are its compute capability's in the CUDA C++ Programming Guide."""
    from livebytes.estimator.devices import ROW_FACTS
    rows = json.loads(PRESETS_FILE.read_text())["presets"]
    assert all(all(k in r for k in ROW_FACTS) for r in rows)
    assert all((d.shared_memory_per_block_optin, d.max_threads_per_sm) == GUIDE[d.capability] for d in DEVICES.values())


# (shared memory per block opt-in, resident threads per SM) per compute capability, the Programming Guide's
# (CCCL's libcudacxx arch_traits.h states the same: shared memory per SM less the 1 KB the driver reserves per block)
GUIDE = {(8, 0): (163 * 1024, 2048),      # 163 KB = 164 KB - 1 KB = 166,912 B
         (8, 9): (99 * 1024, 1536),       # 99 KB = 100 KB - 1 KB = 101,376 B; 48 warps of 32
         (9, 0): (227 * 1024, 2048),      # 227 KB = 228 KB - 1 KB = 232,448 B
         (10, 0): (227 * 1024, 2048),
         (12, 0): (99 * 1024, 1536)}      # 99 KB = 101,376 B; 48 warps of 32


@pytest.mark.parametrize("fact", ["shared_memory_per_block_optin", "max_threads_per_sm", "process_memory"])
def test_a_row_without_a_fact_is_refused_by_name(fact):
    row = {"name": "X1", "arch": "sm90", "sm_count": 132, "capacity_bytes": 1, "capacity_kind": "reported",
           "capacity_source": "", "shared_memory_per_block_optin": 232_448, "max_threads_per_sm": 2048,
           "limits_source": "guide", "process_memory": "H200"}
    del row[fact]
    with pytest.raises(ValueError, match=f"X1: no {fact} "):
        preset(row)


def test_each_device_takes_process_memory_data_that_exist():
    """The H200's own (measured on it); every other preset the H200's as a stand-in, said unbounded in the answer."""
    from livebytes.estimator.process.driver import DATA
    measured = json.loads((DATA / "process_memory.json").read_text())["devices"]
    assert all(d.process_memory in measured for d in DEVICES.values())
    assert [d.name for d in DEVICES.values() if d.process_memory_assumed_from is None] == ["H200"]


@pytest.mark.parametrize("product,name", [
    ("NVIDIA H200", "H200"),
    ("  nvidia h200 ", "H200"),                 # case and outer spaces aside
    ("NVIDIA H100 80GB HBM3", "H100"),          # the SXM card the H100 row quotes
    ("NVIDIA B300 SXM6 AC", "B300"),
    ("NVIDIA A100-SXM4-40GB", "A100-40GB"),
    ("NVIDIA A100-SXM4-80GB", "A100-80GB"),
    ("NVIDIA H20", "H20"),
    ("NVIDIA L40S", "L40S"),
    ("NVIDIA GB200", "GB200"),
    ("NVIDIA GeForce RTX 4090", "RTX4090"),
    ("NVIDIA GeForce RTX 5090", "RTX5090"),
    ("NVIDIA A100-PCIE-40GB", None),            # another product: not the row's source
    ("NVIDIA A100 80GB PCIe", None),            # the PCIe card: not the SXM4 row's source
    ("NVIDIA L40", None),                       # another product of the L40S's chip (AD102)
    ("NVIDIA GeForce RTX 4090 D", None),        # 114 SMs, not the RTX 4090 row's 128
    ("NVIDIA H100 PCIe", None),                 # 114 SMs, HBM2e: not the SXM row's 132 SMs
    ("NVIDIA H100 NVL", None),                  # 94 GB: not the SXM row's total
    ("NVIDIA H200 NVL", None),
    ("H100", None),                             # a preset name is no product name
    ("", None), (None, None),
])
def test_a_product_name_matches_its_row_exactly_or_none(product, name):
    from livebytes.estimator.devices import preset_of
    assert preset_of(product) == name
