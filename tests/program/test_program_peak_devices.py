"""The peak table's newer devices: each row against its cited vendor figure, URLs, unknown devices refused."""

from __future__ import annotations

import re

import pytest

from fleetlib.program import PEAK_RATES, PEAK_RATES_BY_PRECISION, peak_rate
from fleetlib.quality import DomainError

# (device, precision, dense TFLOP/s, HBM TB/s, URL fragment) as the vendor pages print them:
# Google Cloud TPU docs (v5p page; TPU7x page generation table), AWS Neuron Trainium2 architecture page.
CITED = [
    ("TPU v5p", "BF16", 459.0, 2.765, "cloud.google.com/tpu/docs/v5p"),
    ("TPU v5p", "FP8", 459.0, 2.765, "tpu/docs/tpu7x"),
    ("TPU v6e", "FP8", 918.0, 1.64, "tpu/docs/tpu7x"),
    ("Trainium2", "BF16", 667.0, 2.9, "trainium2"),
    ("Trainium2", "FP8", 1299.0, 2.9, "trainium2"),
]


@pytest.mark.parametrize(("device", "precision", "tflops", "tb_s", "url"), CITED)
def test_new_rows_hold_the_cited_vendor_figures(device, precision, tflops, tb_s, url):
    rate = peak_rate(device, precision)
    assert (rate.dense_tflops, rate.hbm_tb_per_s, rate.precision) == (tflops, tb_s, precision)
    assert url in rate.source
    assert rate.named == f"{device} dense {precision}"


def test_named_peak_with_precision_resolves_to_the_fp8_row():
    assert peak_rate("trainium2 dense fp8").dense_tflops == 1299.0
    assert peak_rate("TPU v5p").precision == "BF16"


def test_every_added_row_cites_a_url():
    for device in ("TPU v5p", "TPU v6e", "Trainium2"):
        rows = [r for (d, _), r in PEAK_RATES_BY_PRECISION.items() if d == device]
        assert len(rows) == 2
        assert all(re.search(r"https://\S+", r.source) for r in rows)


@pytest.mark.parametrize("name", ["B200", "MI355X", "TPU v7", "Trainium3", "H20"])
def test_devices_without_a_sourced_row_are_still_refused(name):
    assert name not in PEAK_RATES
    with pytest.raises(DomainError, match="no peak rate for accelerator"):
        peak_rate(name)


def test_a_known_device_without_a_published_precision_is_refused():
    with pytest.raises(DomainError, match="no FP4 peak for TPU v5p"):
        peak_rate("TPU v5p", "FP4")
