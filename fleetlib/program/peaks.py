"""Published peak rates of accelerators (dense FLOP/s per precision, HBM bandwidth), with sources.

:data:`PEAK_RATES` is the table of each device's default precision (BF16, or FP16 where the device has
no BF16 tensor cores); :data:`PEAK_RATES_BY_PRECISION` adds the other precisions a device has
(FP8 on Hopper, Blackwell, the MI300/MI350 series, TPU v5p/v6e/v7 and Trainium2; FP4 where the vendor
publishes a dense figure: Blackwell and MI350X/MI355X).  Every row cites the vendor page it comes from.
Per-GPU figures of a system datasheet are the system figure divided by its GPU count, and "with
sparsity" figures are halved to dense; the source string says which.  :func:`peak_rate` looks an entry
up by device and precision -- the named peak always carries its precision (``"H100 SXM dense BF16"``,
``"H100 SXM dense FP8"``), so FP8 work is never divided by a BF16 peak unnoticed.  An unknown
device or a precision the device has no peak for is an error, never a fallback.  A
program-goodput convention always names the entry it divides by (:mod:`fleetlib.program.flops`).
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass

from fleetlib.program._arrays import checked_values
from fleetlib.quality import DomainError

__all__ = ["PEAK_RATES", "PEAK_RATES_BY_PRECISION", "PRECISIONS", "PeakRate", "peak_rate"]
# ---------------------------------------------------------------------------------------------------
# Peak rates
# ---------------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class PeakRate:
    """A published dense peak arithmetic rate and HBM bandwidth for one accelerator.

    Attributes
    ----------
    accelerator
        Device name as used in the table, e.g. ``"H100 SXM"``.
    dense_tflops
        Dense (no structured sparsity) tensor-core peak in TFLOP/s at ``precision``.
    hbm_tb_per_s
        Peak HBM bandwidth in TB/s (decimal, 1 TB = 1e12 bytes).
    precision
        Number format of the arithmetic peak, one of :data:`PRECISIONS` (``"BF16"``, ``"FP16"``,
        ``"FP8"``, ``"TF32"``).
    source
        Where the numbers come from; always reported with the peak.
    """

    accelerator: str
    dense_tflops: float
    hbm_tb_per_s: float
    precision: str
    source: str

    def __post_init__(self) -> None:
        if not self.accelerator:
            raise DomainError("a peak rate needs an accelerator name")
        checked_values(f"{self.accelerator} dense TFLOP/s", self.dense_tflops, positive=True)
        checked_values(f"{self.accelerator} HBM TB/s", self.hbm_tb_per_s, positive=True)
        if self.precision not in PRECISIONS:
            raise DomainError(f"precision must be one of {PRECISIONS}; got {self.precision!r}")
        for part in (self.accelerator, self.precision):
            if "," in part:
                raise DomainError(f"peak-rate names may not contain commas (they separate convention "
                                  f"fields); got {part!r}")

    @property
    def peak_flops_per_s(self) -> float:
        """Dense peak arithmetic rate in FLOP/s."""
        return self.dense_tflops * 1e12

    @property
    def hbm_bytes_per_s(self) -> float:
        """Peak HBM bandwidth in bytes/s."""
        return self.hbm_tb_per_s * 1e12

    @property
    def ridge_flop_per_byte(self) -> float:
        """Roofline ridge point of the device against HBM, FLOP/byte."""
        return self.peak_flops_per_s / self.hbm_bytes_per_s

    @property
    def named(self) -> str:
        """The named peak with its precision, e.g. ``"H100 SXM dense BF16"``."""
        return f"{self.accelerator} dense {self.precision}"

    @property
    def arithmetic_label(self) -> str:
        """The arithmetic peak as it appears in a convention, e.g. ``"H100 SXM dense BF16 989 TFLOP/s"``."""
        return f"{self.accelerator} dense {self.precision} {self.dense_tflops:g} TFLOP/s"

    @property
    def bandwidth_label(self) -> str:
        """The bandwidth peak as it appears in a convention, e.g. ``"H100 SXM HBM 3.35 TB/s"``."""
        return f"{self.accelerator} HBM {self.hbm_tb_per_s:g} TB/s"


_FIELD_NOTES = "field_notes/step_traces.md section 6 (Peaks)"
_TPU7X_URL = "https://docs.cloud.google.com/tpu/docs/tpu7x"
_H100_URL = "https://www.nvidia.com/en-us/data-center/h100/"
_H200_URL = "https://www.nvidia.com/en-us/data-center/h200/"
_MI300X_URL = "https://www.amd.com/en/products/accelerators/instinct/mi300/mi300x.html"
_HGX_URL = "https://www.nvidia.com/en-us/data-center/hgx/"
_DGX_B200_URL = "https://www.nvidia.com/en-us/data-center/dgx-b200/"
_GB200_URL = "https://www.nvidia.com/en-us/data-center/gb200-nvl72/"
_GB300_URL = "https://www.nvidia.com/en-us/data-center/gb300-nvl72/"
_BLACKWELL_ULTRA_URL = "https://resources.nvidia.com/en-us-blackwell-architecture/blackwell-ultra-datasheet"
_MI325X_URL = "https://www.amd.com/en/products/accelerators/instinct/mi300/mi325x.html"
_MI350X_URL = "https://www.amd.com/en/products/accelerators/instinct/mi350/mi350x.html"
_MI355X_URL = "https://www.amd.com/en/products/accelerators/instinct/mi350/mi355x.html"
_VERL_PEAKS_URL = "https://github.com/volcengine/verl/blob/main/verl/utils/flops_counter.py"
_H20_SPEC_URL = "https://willitrunai.com/es/gpus/h20-96gb"
_H20_NOTE = ("NVIDIA publishes no public H20 datasheet: the figures are not a vendor's but those the "
             "public tables agree on")
_TRAINIUM2_URL = ("https://awsdocs-neuron.readthedocs-hosted.com/en/latest/about-neuron/arch/neuron-hardware/"
                  "trainium2.html")

#: Precisions a peak may be stated in.
PRECISIONS: tuple[str, ...] = ("BF16", "FP16", "FP8", "FP4", "TF32", "FP32", "FP64", "INT8")

#: Dense peak rates with their sources.  Datasheet figures quoted "with sparsity" are halved to the
#: dense rate; always name the entry (and its source) in a program-goodput convention.
PEAK_RATES: Mapping[str, PeakRate] = {
    p.accelerator: p
    for p in (
        PeakRate("H100 SXM", 989.0, 3.35, "BF16",
                 "NVIDIA H100 Tensor Core GPU datasheet: BF16 1,979 TFLOP/s with sparsity -> 989 dense; "
                 f"HBM3 3.35 TB/s {_H100_URL}; torchtitan get_peak_flops 989e12; {_FIELD_NOTES}"),
        PeakRate("H200 SXM", 989.0, 4.8, "BF16",
                 "NVIDIA H200 datasheet: same Hopper tensor peak as H100 SXM (989 dense BF16; 1,979 is "
                 f"with sparsity), 141 GB HBM3e at 4.8 TB/s {_H200_URL}; torchtitan 989e12; {_FIELD_NOTES}"),
        PeakRate("H20", 148.0, 4.0, "BF16",
                 f"{_H20_NOTE}: dense BF16 148 TFLOP/s in volcengine/verl's peak table {_VERL_PEAKS_URL}; "
                 f"96 GB HBM3 at 4.0 TB/s (and 148 FP16, 296 INT8 dense) on {_H20_SPEC_URL}"),
        PeakRate("A100 SXM", 312.0, 2.039, "BF16",
                 "NVIDIA A100 80GB SXM datasheet: BF16 tensor 312 TFLOP/s dense (624 with sparsity), "
                 f"HBM2e 2,039 GB/s (40 GB SXM: 1,555 GB/s) https://www.nvidia.com/en-us/data-center/a100/; "
                 f"nanoGPT/torchtitan 312e12; {_FIELD_NOTES}"),
        PeakRate("V100 SXM", 125.0, 0.9, "FP16",
                 "NVIDIA Tesla V100 SXM2 datasheet: 125 tensor TFLOP/s mixed-precision FP16, HBM2 900 GB/s; "
                 "NVIDIA developer blog 'Programming Tensor Cores in CUDA 9' (125 Tensor TFLOPS) "
                 "https://developer.nvidia.com/programming-tensor-cores-cuda-9-0"),
        PeakRate("MI300X", 1307.4, 5.3, "BF16",
                 "AMD Instinct MI300X datasheet: BF16 1,307.4 TFLOP/s dense (2,614.9 with sparsity), HBM3 "
                 f"5.3 TB/s {_MI300X_URL}; torchtitan rounds to 1300e12; measured 'achievable' 708 is not "
                 f"a peak; {_FIELD_NOTES}"),
        PeakRate("TPU v5e", 197.0, 0.819, "BF16",
                 "Google Cloud TPU v5e documentation: 197 TFLOP/s BF16, 819 GB/s HBM "
                 f"https://docs.cloud.google.com/tpu/docs/v5e; {_FIELD_NOTES}"),
        PeakRate("TPU v6e", 918.0, 1.64, "BF16",
                 "Google Cloud TPU v6e (Trillium) documentation: 918 TFLOP/s BF16, about 1,640 GB/s HBM "
                 f"(1,638 GBps) https://docs.cloud.google.com/tpu/docs/v6e; {_FIELD_NOTES}"),
        PeakRate("TPU v5p", 459.0, 2.765, "BF16",
                 "Google Cloud TPU v5p documentation: peak compute per chip 459 TFLOP/s BF16, HBM2e 95 GB at "
                 "2,765 GB/s https://cloud.google.com/tpu/docs/v5p; the same 459 in the generation table of "
                 f"{_TPU7X_URL}"),
        PeakRate("Trainium2", 667.0, 2.9, "BF16",
                 "AWS Neuron documentation, Trainium2 architecture: eight NeuronCore-v3 deliver 667 "
                 "BF16/FP16/TF32 TFLOP/s dense (2,563 sparse), 96 GiB device memory at 2.9 TB/s "
                 f"{_TRAINIUM2_URL}"),
        PeakRate("B200", 2250.0, 8.0, "BF16",
                 "NVIDIA HGX B200 (8 GPUs): FP16/BF16 36 PFLOP/s with sparsity -> 18 dense / 8 = 2,250 "
                 f"TFLOP/s per GPU {_HGX_URL}; NVIDIA DGX B200: 1,440 GB HBM3e at 64 TB/s for 8 GPUs -> "
                 f"8 TB/s per GPU {_DGX_B200_URL}"),
        PeakRate("B300", 2250.0, 7.7, "BF16",
                 "NVIDIA Blackwell Ultra datasheet, individual GPU specifications, HGX B300: FP16/BF16 "
                 "4.5 PFLOP/s with sparsity -> 2,250 dense, 270 GB HBM3E at 7.7 TB/s "
                 f"{_BLACKWELL_ULTRA_URL}; "
                 f"the same 36 PFLOP/s sparse / 8 GPUs on {_HGX_URL}"),
        PeakRate("GB200", 2500.0, 8.0, "BF16",
                 "NVIDIA GB200 NVL72 (72 GPUs): FP16/BF16 360 PFLOP/s with sparsity -> 5,000 sparse, "
                 "2,500 dense TFLOP/s per GPU; HBM3e 13.4 TB at 576 TB/s -> 8 TB/s per GPU "
                 f"{_GB200_URL}"),
        PeakRate("GB300", 2500.0, 8.0, "BF16",
                 "NVIDIA GB300 NVL72 (72 Blackwell Ultra GPUs): FP16/BF16 360 PFLOP/s with sparsity -> "
                 f"2,500 dense TFLOP/s per GPU; 20 TB HBM at up to 576 TB/s -> 8 TB/s per GPU {_GB300_URL}; "
                 f"Blackwell Ultra datasheet GB300 column: 5 PFLOP/s sparse, 279 GB at 8 TB/s "
                 f"{_BLACKWELL_ULTRA_URL}"),
        PeakRate("MI325X", 1307.4, 6.0, "BF16",
                 "AMD Instinct MI325X specifications: BF16 1,307.4 TFLOP/s dense (2,614.9 with "
                 f"sparsity), 256 GB HBM3E at 6 TB/s {_MI325X_URL}"),
        PeakRate("MI350X", 2300.0, 8.0, "BF16",
                 "AMD Instinct MI350X specifications: BF16 2.3 PFLOP/s dense (4.6 with sparsity; 256 CUs "
                 f"at 2.2 GHz give 2,306.9), 288 GB HBM3E at 8 TB/s {_MI350X_URL}"),
        PeakRate("MI355X", 2500.0, 8.0, "BF16",
                 "AMD Instinct MI355X specifications: BF16 2.5 PFLOP/s dense (5 with sparsity; 256 CUs "
                 f"at 2.4 GHz give 2,516.6), 288 GB HBM3E at 8 TB/s {_MI355X_URL}"),
        PeakRate("TPU v7", 2307.0, 7.38, "BF16",
                 "Google Cloud TPU7x (Ironwood) documentation: peak compute per chip 2,307 TFLOP/s BF16, "
                 "HBM 192 GiB at 7,380 GBps per chip; per chip, while JAX shows each of its two "
                 f"TensorCores as a device {_TPU7X_URL}"),
    )
}


def _fp8(accelerator: str, dense_tflops: float, source: str) -> PeakRate:
    return _at(accelerator, "FP8", dense_tflops, source)


def _fp4(accelerator: str, dense_tflops: float, source: str) -> PeakRate:
    return _at(accelerator, "FP4", dense_tflops, source)


def _at(accelerator: str, precision: str, dense_tflops: float, source: str) -> PeakRate:
    base = PEAK_RATES[accelerator]
    return PeakRate(accelerator, dense_tflops, base.hbm_tb_per_s, precision, source)


#: Every (device, precision) peak: the default-precision entries of :data:`PEAK_RATES`, the FP8
#: peaks of the devices that have FP8 tensor cores and the FP4 peaks the vendors publish dense
#: (datasheet "with sparsity" figures halved).
PEAK_RATES_BY_PRECISION: Mapping[tuple[str, str], PeakRate] = {
    **{(p.accelerator, p.precision): p for p in PEAK_RATES.values()},
    **{(p.accelerator, p.precision): p for p in (
        _fp8("H100 SXM", 1979.0, "NVIDIA H100 Tensor Core GPU datasheet: FP8 3,958 TFLOP/s with sparsity -> "
                                 f"1,979 dense {_H100_URL}"),
        _fp8("H200 SXM", 1979.0, "NVIDIA H200 datasheet: FP8 3,958 TFLOP/s with sparsity -> 1,979 dense (the "
                                 f"Hopper tensor peak of H100 SXM) {_H200_URL}"),
        _fp8("H20", 296.0, f"{_H20_NOTE}: Hopper's FP8 tensor rate is its INT8 rate, 296 dense on "
                           f"{_H20_SPEC_URL} (twice the 148 BF16, as on H100 SXM: 1,979 = 2 x 989)"),
        _fp8("MI300X", 2614.9, "AMD Instinct MI300X datasheet: FP8 2,614.9 TFLOP/s dense (5,229.8 with "
                               f"sparsity) {_MI300X_URL}"),
        _fp8("TPU v5p", 459.0, f"Google Cloud TPU7x documentation, generation table: v5p peak compute "
                               f"per chip (FP8) 459 TFLOP/s {_TPU7X_URL}"),
        _fp8("TPU v6e", 918.0, f"Google Cloud TPU7x documentation, generation table: v6e peak compute "
                               f"per chip (FP8) 918 TFLOP/s {_TPU7X_URL}"),
        _fp8("Trainium2", 1299.0, f"AWS Neuron documentation, Trainium2 architecture: 1,299 FP8 TFLOP/s "
                                  f"{_TRAINIUM2_URL}"),
        _fp8("B200", 4500.0, f"NVIDIA DGX B200: FP8 72 PFLOP/s with sparsity for 8 GPUs -> 4,500 dense per "
                             f"GPU {_DGX_B200_URL}; the same 72 PFLOP/s on {_HGX_URL}"),
        _fp8("B300", 4500.0, "NVIDIA Blackwell Ultra datasheet, HGX B300: FP8/FP6 9 PFLOP/s with sparsity -> "
                             f"4,500 dense {_BLACKWELL_ULTRA_URL}; HGX B300 72 PFLOP/s sparse / 8 GPUs "
                             f"{_HGX_URL}"),
        _fp8("GB200", 5000.0, "NVIDIA GB200 NVL72: FP8/FP6 720 PFLOP/s with sparsity for 72 GPUs -> 5,000 "
                              f"dense per GPU {_GB200_URL}"),
        _fp8("GB300", 5000.0, "NVIDIA GB300 NVL72: FP8/FP6 720 PFLOP/s with sparsity for 72 GPUs -> 5,000 "
                              f"dense per GPU {_GB300_URL}"),
        _fp8("MI325X", 2614.9, "AMD Instinct MI325X specifications: FP8 2,614.9 TFLOP/s dense (5,229.8 with "
                               f"sparsity) {_MI325X_URL}"),
        _fp8("MI350X", 4600.0, "AMD Instinct MI350X specifications: FP8 4.6 PFLOP/s dense (formula "
                               f"4,613.7) {_MI350X_URL}"),
        _fp8("MI355X", 5000.0, "AMD Instinct MI355X specifications: FP8 5 PFLOP/s dense (formula "
                               f"5,033.2) {_MI355X_URL}"),
        _fp8("TPU v7", 4614.0, "Google Cloud TPU7x (Ironwood) documentation: peak compute per chip (FP8) "
                               f"4,614 TFLOP/s {_TPU7X_URL}"),
        _fp4("B200", 9000.0, "NVIDIA DGX B200: FP4 Tensor Core '144 PFLOPS | 72 PFLOPS' (sparse | dense) for "
                             f"8 GPUs -> 9,000 dense per GPU {_DGX_B200_URL}"),
        _fp4("B300", 13500.0, "NVIDIA HGX B300: FP4 Tensor Core '144 PFLOPS | 108 PFLOPS' (sparse | dense) "
                              f"for 8 GPUs -> 13,500 dense per GPU {_HGX_URL} (the datasheet's per-GPU row "
                              f"rounds to 14 PFLOP/s {_BLACKWELL_ULTRA_URL})"),
        _fp4("GB200", 10000.0, "NVIDIA GB200 NVL72: FP4 Tensor Core 1,440 PFLOP/s with sparsity (720 dense) "
                               f"for 72 GPUs -> 10,000 dense per GPU {_GB200_URL}"),
        _fp4("GB300", 15000.0, "NVIDIA GB300 NVL72: FP4 Tensor Core '1,440 | 1,080 PFLOPS' (the second "
                               f"without sparsity) for 72 GPUs -> 15,000 dense per GPU {_GB300_URL}"),
        _fp4("MI350X", 9200.0, "AMD Instinct MI350X specifications: MXFP4 9.2 PFLOP/s dense (formula "
                               f"9,227.5) {_MI350X_URL}"),
        _fp4("MI355X", 10100.0, "AMD Instinct MI355X specifications: MXFP4 10.1 PFLOP/s dense (formula "
                                f"10,066.3) {_MI355X_URL}"),
    )},
}

_DENSE_WORD = re.compile(r"\s+dense\b", re.IGNORECASE)
#: Other names of a device: Google's documentation and APIs call TPU v7 "TPU7x" (Ironwood).
_ALIASES: Mapping[str, str] = {"tpu7x": "TPU v7", "tpu v7x": "TPU v7", "ironwood": "TPU v7"}
#: Vendor prefixes of device names as traces and nvidia-smi / rocm-smi print them ("NVIDIA B200",
#: "AMD Instinct MI355X"); the rest of the name must still be a device of the table.
_VENDOR_PREFIX = re.compile(r"^(?:nvidia|amd\s+instinct|amd|google)\s+", re.IGNORECASE)


def peak_rate(accelerator: str, precision: str | None = None) -> PeakRate:
    """Look up a device's dense peak at a precision (case-insensitive); unknown ones are errors.

    Parameters
    ----------
    accelerator
        A device of :data:`PEAK_RATES` (``"H100 SXM"``), or a named peak that carries its precision
        (``"H100 SXM dense FP8"``, ``"H100 SXM FP8"``).  A vendor prefix as device properties print it
        (``"NVIDIA B200"``, ``"AMD Instinct MI355X"``) and the names ``"TPU7x"`` / ``"Ironwood"`` of
        ``"TPU v7"`` are accepted; nothing else is guessed.
    precision
        One of :data:`PRECISIONS`; None: the precision the name states, else the device's default
        (the :data:`PEAK_RATES` entry, BF16 or FP16).

    Returns
    -------
    PeakRate
        The entry, with its source.

    Raises
    ------
    DomainError
        An unknown device, or a precision the device has no published peak for (never a fallback).

    Examples
    --------
    >>> peak_rate("H100 SXM").named, peak_rate("h100 sxm dense fp8").dense_tflops
    ('H100 SXM dense BF16', 1979.0)
    """
    text = _DENSE_WORD.sub("", str(accelerator).strip())
    words = text.split()
    if precision is None and words and words[-1].upper() in PRECISIONS:
        precision, text = words[-1], " ".join(words[:-1])
    wanted = _VENDOR_PREFIX.sub("", text.strip()).lower()
    wanted = _ALIASES.get(wanted, wanted).lower()
    device = next((name for name in PEAK_RATES if name.lower() == wanted), None)
    if device is None:
        raise DomainError(f"no peak rate for accelerator {accelerator!r}; known: {sorted(PEAK_RATES)}. "
                          "Build a PeakRate with a cited source for other devices")
    if precision is None:
        return PEAK_RATES[device]
    prec = str(precision).strip().upper()
    rate = PEAK_RATES_BY_PRECISION.get((device, prec))
    if rate is None:
        have = sorted(p for d, p in PEAK_RATES_BY_PRECISION if d == device)
        raise DomainError(f"no {prec} peak for {device}: its published dense peaks are {have}; name the "
                          f"precision the work ran in")
    return rate


def peak_label(peak: PeakRate | str, *, bandwidth: bool) -> str:
    if isinstance(peak, PeakRate):
        return peak.bandwidth_label if bandwidth else peak.arithmetic_label
    text = str(peak).strip()
    if not text or "," in text:
        raise DomainError(f"a peak label must be non-empty and contain no commas; got {peak!r}")
    return text
