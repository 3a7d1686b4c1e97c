"""The peak table's newer devices: each row against its cited vendor figure, URLs, unknown devices refused.

The expected figures are written out here from the vendor pages (the per-GPU value derived by hand from
the page's system figure and sparse/dense convention, stated beside each row), independently of the
table's own arithmetic.
"""

from __future__ import annotations

import re

import pytest

from fleetlib.program import PEAK_RATES, PEAK_RATES_BY_PRECISION, check_model_fits, peak_rate
from fleetlib.quality import DomainError

# (device, precision, dense TFLOP/s, HBM TB/s, URL fragment) as the vendor pages print them:
# Google Cloud TPU docs (v5p page; TPU7x page generation table), AWS Neuron Trainium2 architecture page.
CITED = [
    ("TPU v5p", "BF16", 459.0, 2.765, "cloud.google.com/tpu/docs/v5p"),
    ("TPU v5p", "FP8", 459.0, 2.765, "tpu/docs/tpu7x"),
    ("TPU v6e", "BF16", 918.0, 1.64, "tpu/docs/v6e"),
    ("TPU v6e", "FP8", 918.0, 1.64, "tpu/docs/tpu7x"),
    ("Trainium2", "BF16", 667.0, 2.9, "trainium2"),
    ("Trainium2", "FP8", 1299.0, 2.9, "trainium2"),
    # NVIDIA: HGX B200 36 PF BF16 sparse / 8 / 2; DGX B200 72 PF FP8 sparse / 8 / 2, FP4 72 PF dense / 8,
    # 64 TB/s / 8.
    ("B200", "BF16", 2250.0, 8.0, "nvidia.com/en-us/data-center/hgx"),
    ("B200", "FP8", 4500.0, 8.0, "nvidia.com/en-us/data-center/dgx-b200"),
    ("B200", "FP4", 9000.0, 8.0, "nvidia.com/en-us/data-center/dgx-b200"),
    # Blackwell Ultra datasheet, HGX B300 GPU: BF16 4.5 PF / FP8 9 PF sparse, 7.7 TB/s;
    # HGX B300 FP4 108 PF dense / 8.
    ("B300", "BF16", 2250.0, 7.7, "blackwell-ultra-datasheet"),
    ("B300", "FP8", 4500.0, 7.7, "blackwell-ultra-datasheet"),
    ("B300", "FP4", 13500.0, 7.7, "nvidia.com/en-us/data-center/hgx"),
    # GB200 NVL72: BF16 360 / FP8 720 / FP4 1,440 PF sparse over 72 GPUs, 576 TB/s.
    ("GB200", "BF16", 2500.0, 8.0, "gb200-nvl72"),
    ("GB200", "FP8", 5000.0, 8.0, "gb200-nvl72"),
    ("GB200", "FP4", 10000.0, 8.0, "gb200-nvl72"),
    # GB300 NVL72: BF16 360 / FP8 720 PF sparse, FP4 1,080 PF dense over 72 GPUs, 576 TB/s.
    ("GB300", "BF16", 2500.0, 8.0, "gb300-nvl72"),
    ("GB300", "FP8", 5000.0, 8.0, "gb300-nvl72"),
    ("GB300", "FP4", 15000.0, 8.0, "gb300-nvl72"),
    # AMD product pages print dense figures directly.
    ("MI325X", "BF16", 1307.4, 6.0, "amd.com/en/products/accelerators/instinct/mi300/mi325x"),
    ("MI325X", "FP8", 2614.9, 6.0, "mi325x"),
    ("MI350X", "BF16", 2300.0, 8.0, "amd.com/en/products/accelerators/instinct/mi350/mi350x"),
    ("MI350X", "FP8", 4600.0, 8.0, "mi350x"),
    ("MI350X", "FP4", 9200.0, 8.0, "mi350x"),
    ("MI355X", "BF16", 2500.0, 8.0, "amd.com/en/products/accelerators/instinct/mi350/mi355x"),
    ("MI355X", "FP8", 5000.0, 8.0, "mi355x"),
    ("MI355X", "FP4", 10100.0, 8.0, "mi355x"),
    # Google Cloud TPU7x page: per chip, HBM 7,380 GBps.
    ("TPU v7", "BF16", 2307.0, 7.38, "docs.cloud.google.com/tpu/docs/tpu7x"),
    ("TPU v7", "FP8", 4614.0, 7.38, "docs.cloud.google.com/tpu/docs/tpu7x"),
]
NEW_DEVICES = ("TPU v5p", "TPU v6e", "Trainium2", "B200", "B300", "GB200", "GB300", "MI325X", "MI350X",
               "MI355X", "TPU v7")


@pytest.mark.parametrize(("device", "precision", "tflops", "tb_s", "url"), CITED)
def test_new_rows_hold_the_cited_vendor_figures(device, precision, tflops, tb_s, url):
    rate = peak_rate(device, precision)
    assert (rate.dense_tflops, rate.hbm_tb_per_s, rate.precision) == (tflops, tb_s, precision)
    assert url in rate.source
    assert rate.named == f"{device} dense {precision}"


def test_named_peak_with_precision_resolves_to_the_fp8_row():
    assert peak_rate("trainium2 dense fp8").dense_tflops == 1299.0
    assert peak_rate("TPU v5p").precision == "BF16"


def test_every_added_row_is_cited_and_the_table_holds_exactly_the_cited_rows():
    cited = {(d, p) for d, p, *_ in CITED}
    added = {key for key in PEAK_RATES_BY_PRECISION if key[0] in NEW_DEVICES}
    assert added == cited
    for key in added:
        assert re.search(r"https://\S+", PEAK_RATES_BY_PRECISION[key].source), key


def test_every_row_of_the_table_names_an_https_source():
    assert all(re.search(r"https://\S+", r.source) for r in PEAK_RATES_BY_PRECISION.values())


def test_lower_precisions_are_never_slower_and_share_the_bandwidth():
    for (device, precision), rate in PEAK_RATES_BY_PRECISION.items():
        base = PEAK_RATES[device]
        assert rate.hbm_tb_per_s == base.hbm_tb_per_s
        fp8 = PEAK_RATES_BY_PRECISION.get((device, "FP8"))
        if precision == "FP8":
            assert rate.dense_tflops >= base.dense_tflops, device
        if precision == "FP4":
            assert fp8 is not None and rate.dense_tflops >= fp8.dense_tflops, device


@pytest.mark.parametrize(("device", "precision", "ridge"), [
    ("B200", "BF16", 2250.0 / 8.0),      # 281.25 FLOP/byte
    ("B300", "FP4", 13500.0 / 7.7),
    ("GB300", "FP8", 5000.0 / 8.0),
    ("MI325X", "BF16", 1307.4 / 6.0),
    ("TPU v7", "FP8", 4614.0 / 7.38),
])
def test_ridge_point_of_the_new_rows(device, precision, ridge):
    assert peak_rate(device, precision).ridge_flop_per_byte == pytest.approx(ridge, rel=1e-12)


@pytest.mark.parametrize(("name", "named"), [
    ("NVIDIA B200", "B200 dense BF16"),             # Kineto deviceProperties / nvidia-smi spelling
    ("NVIDIA GB200", "GB200 dense BF16"),
    ("AMD Instinct MI355X", "MI355X dense BF16"),   # rocm-smi / torch.cuda.get_device_name on ROCm
    ("TPU7x", "TPU v7 dense BF16"),                 # Google Cloud's name for TPU v7
    ("ironwood dense fp8", "TPU v7 dense FP8"),
    ("nvidia gb300 fp4", "GB300 dense FP4"),
])
def test_device_names_as_traces_and_vendors_spell_them(name, named):
    assert peak_rate(name).named == named


@pytest.mark.parametrize("name", ["B900", "Trainium3", "H2", "NVIDIA H200X", "NVIDIA", "TPU v8", "MI400X"])
def test_devices_without_a_sourced_row_are_still_refused(name):
    assert name not in PEAK_RATES
    with pytest.raises(DomainError, match="no peak rate for accelerator"):
        peak_rate(name)


def test_a_device_without_a_published_fp4_peak_is_refused_fp4():
    for device in ("MI325X", "TPU v7", "H100 SXM"):
        with pytest.raises(DomainError, match=f"no FP4 peak for {device}"):
            peak_rate(device, "FP4")


def test_a_known_device_without_a_published_precision_is_refused():
    with pytest.raises(DomainError, match="no FP4 peak for TPU v5p"):
        peak_rate("TPU v5p", "FP4")


@pytest.mark.parametrize(("accelerator", "trace_name", "code"), [
    ("GB200", "NVIDIA GB200", None),
    ("GB200", "NVIDIA B200", "model_device_mismatch"),   # "GB200" holds "B200": the longer name decides
    ("B300", "NVIDIA GB200", "model_device_mismatch"),
    ("MI355X", "AMD Instinct MI355X", None),
    ("MI355X", "AMD Instinct MI300X", "model_device_mismatch"),
    ("TPU v7", "TPU7x", None),
])
def test_a_model_config_of_a_new_device_is_checked_against_the_trace_device(accelerator, trace_name, code):
    config = {"devices": 4, "peak": peak_rate(accelerator)}
    flags = check_model_fits(config, 4, [trace_name])
    assert [c for c, _ in flags] == ([] if code is None else [code])


def test_h20_is_sourced_and_says_it_is_not_a_vendor_figure():
    bf16, fp8 = peak_rate("NVIDIA H20"), peak_rate("H20", "FP8")
    assert (bf16.dense_tflops, bf16.hbm_tb_per_s, fp8.dense_tflops) == (148.0, 4.0, 296.0)
    assert "no public H20 datasheet" in bf16.source and "https://" in bf16.source
    with pytest.raises(DomainError, match="no peak rate"):  # names match whole: H200 never falls to H20
        peak_rate("NVIDIA H200")
