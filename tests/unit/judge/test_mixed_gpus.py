"""Mixed GPUs (issue 27, section 1, rule 2): a GPU a build cannot run beside GPUs it can does not block the
machine; the verdict names the GPUs TensorFlow will use, warns about the other and gives CUDA_VISIBLE_DEVICES
to hide it (with CUDA_DEVICE_ORDER=PCI_BUS_ID, as nvidia-smi numbers GPUs in PCI order; UUIDs need no order)."""

from __future__ import annotations

from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from tfgpu.judge.findings import BLOCKED, CAVEATS
from tfgpu.judge.verdict import judge_release
from tfgpu.kb.knowledge import load_kb
from tfgpu.kb.versions import version

KB = load_kb()
BLACKWELL = ("NVIDIA GeForce RTX 5070 Ti", "12.0")
AMPERE = ("NVIDIA GeForce RTX 3090", "8.6")
FERMI = ("GeForce GTX 460", "2.1")
KEPLER = ("GeForce GTX 780 Ti", "3.5")


def _facts(gpus: list[tuple[str, str]], *, uuids: bool = False, env: dict[str, str] | None = None) -> dict[str, Any]:
    return {"platform": {"os": "linux", "glibc": "2.35"}, "cpu": {"avx": True},
            "python": {"current": "3.12.3", "interpreters": [{"version": "3.12.3", "path": "/usr/bin/python3.12"}]},
            "driver": {"version": "580.65.06", "cuda": "13.0", "source": "nvidia-smi"},
            "gpus": [{"index": i, "name": n, "compute_capability": cc, "memory_mib": 24576,
                      "uuid": f"GPU-{i:08d}-aaaa-bbbb-cccc-000000000000" if uuids else None}
                     for i, (n, cc) in enumerate(gpus)],
            "cuda_toolkits": [], "cudnn": [], "env": env or {}}


def _pip(facts: dict[str, Any], tf: str = "2.21.0") -> Any:
    return judge_release(facts, KB, version(tf), backend="pip")


def test_a_blackwell_gpu_beside_two_ampere_gpus_is_hidden_not_blocking() -> None:
    tv = _pip(_facts([BLACKWELL, AMPERE, AMPERE]))
    assert tv.verdict == CAVEATS
    mixed = [c for c in tv.caveats if c.check == "gpu.mixed"]
    assert len(mixed) == 1
    assert "will use GPU 1 (NVIDIA GeForce RTX 3090), 2 (NVIDIA GeForce RTX 3090)" in mixed[0].summary
    assert "GPU 0 (NVIDIA GeForce RTX 5070 Ti)" in mixed[0].summary
    assert mixed[0].fix == "export CUDA_DEVICE_ORDER=PCI_BUS_ID CUDA_VISIBLE_DEVICES=1,2"
    assert mixed[0].severity == "risky"
    assert not any(b.check == "gpu.arch" for b in tv.blockers)


def test_uuids_need_no_device_order() -> None:
    tv = _pip(_facts([BLACKWELL, AMPERE], uuids=True))
    mixed = next(c for c in tv.caveats if c.check == "gpu.mixed")
    assert mixed.fix == "export CUDA_VISIBLE_DEVICES=GPU-00000001-aaaa-bbbb-cccc-000000000000"


def test_the_gpu_alone_still_blocks() -> None:
    tv = _pip(_facts([BLACKWELL]))
    assert tv.verdict == BLOCKED
    assert any(b.check == "gpu.arch" for b in tv.blockers)


def test_a_gpu_already_hidden_by_cuda_visible_devices_is_not_mentioned() -> None:
    tv = _pip(_facts([BLACKWELL, AMPERE], env={"CUDA_VISIBLE_DEVICES": "1"}))
    assert tv.verdict != BLOCKED
    assert not any(c.check == "gpu.mixed" for c in tv.caveats)


def test_a_fermi_beside_a_kepler_on_tf_1_0() -> None:
    # nvidia-docker#262: TF 1.0's floor is compute capability 3.0; the GTX 780 Ti runs it with the GTX 460 hidden
    tv = judge_release(_facts([FERMI, KEPLER]) | {"driver": {"version": "367.57"}, "cuda_toolkits": [
        {"version": "8.0", "path": "/usr/local/cuda-8.0"}], "cudnn": [{"version": "5.1", "path": "/usr/lib"}],
        "python": {"current": "3.5.2", "interpreters": [{"version": "3.5.2", "path": "/usr/bin/python3.5"}]}},
        KB, version("1.0.1"), backend="pip")
    assert tv.verdict != BLOCKED, tv.blockers
    assert next(c for c in tv.caveats if c.check == "gpu.mixed").fix.endswith("CUDA_VISIBLE_DEVICES=1")


_kinds = st.lists(st.sampled_from((BLACKWELL, AMPERE, FERMI, KEPLER, ("NVIDIA H100 80GB HBM3", "9.0"))),
                  min_size=1, max_size=4)


@settings(max_examples=120, deadline=None)
@given(_kinds, st.sampled_from(("2.21.0", "2.15.1", "2.4.0", "1.15.0")))
def test_blocked_by_the_gpus_only_when_no_gpu_runs_the_build(gpus: list[tuple[str, str]], tf: str) -> None:
    facts = _facts(gpus)
    tv = _pip(facts, tf)
    alone = {cc: _pip(_facts([(n, cc)]), tf) for n, cc in gpus}
    runs = {cc for cc, t in alone.items() if not any(b.check == "gpu.arch" for b in t.blockers)}
    arch_blocked = any(b.check == "gpu.arch" for b in tv.blockers)
    assert arch_blocked == (not runs)
    mixed = [c for b in tv.backends for c in b.caveats if c.check == "gpu.mixed"]  # a blocked target's too
    if runs and len(runs) < len(alone):
        assert len(mixed) == 1
        keep = [str(i) for i, (_n, cc) in enumerate(gpus) if cc in runs]
        assert mixed[0].fix == f"export CUDA_DEVICE_ORDER=PCI_BUS_ID CUDA_VISIBLE_DEVICES={','.join(keep)}"
    else:
        assert not mixed
