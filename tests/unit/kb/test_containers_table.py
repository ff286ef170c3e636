"""compat/containers.toml: the image table against its own series dates, the CUDA table and the releases."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from tfgpu.kb import parse, records
from tfgpu.kb.knowledge import load_kb
from tfgpu.kb.queries import container_images, load_container_table, ngc_images
from tfgpu.kb.versions import version


def _yymm(text: str) -> tuple[int, int]:
    year, month = text.split(".")
    return int(year), int(month)


def test_no_ngc_image_is_listed_beyond_its_series_publication_end():
    _images, series, _rules = load_container_table()
    by_id = {s.id: s for s in series}
    for image in ngc_images():
        release, flavor = image.ref.rsplit(":", 1)[1].split("-", 1)
        s = by_id[f"ngc-{flavor.split('-')[0]}"] if flavor != "py3" else by_id["ngc-py3"]
        assert _yymm(s.first) <= _yymm(release), image.ref
        if s.last:
            assert _yymm(release) <= _yymm(s.last), f"{image.ref} is newer than {s.id}'s last release {s.last}"


def test_publication_dates_match_the_release_names():
    for image in ngc_images():
        release = image.ref.rsplit(":", 1)[1].split("-", 1)[0]
        year, month = _yymm(release)
        assert image.published == f"20{year:02d}-{month:02d}", image.ref


def test_tf1_monthly_releases_end_with_23_03_and_tf2_with_25_02():
    series = {s.id: s for s in load_container_table()[1]}
    assert series["ngc-tf1"].last == "23.03"
    assert series["ngc-tf2"].last == "25.02"
    assert series["tf-gpu"].last == ""  # TensorFlow still tags <version>-gpu with each release


def test_every_ngc_floor_is_in_its_cuda_branch_and_above_every_compat_branch():
    kb = load_kb()
    for image in ngc_images():
        cuda = version(image.cuda)
        toolkit = kb.toolkit(f"{cuda.major}.{cuda.minor}")
        assert toolkit is not None, f"{image.ref}: CUDA {image.cuda} is not in compat/cuda.toml"
        assert toolkit.linux_min_driver is not None
        assert image.driver is not None
        assert image.driver.major == toolkit.linux_min_driver.major, image.ref
        assert all(c < image.driver for c in image.compat_drivers), image.ref
        assert image.family == "ngc"
        assert image.source


def test_every_linux_gpu_release_has_tensorflows_own_image_with_its_build():
    kb = load_kb()
    for build in kb.builds:
        if build.os != "linux":
            continue
        images = container_images(kb, build.tf)
        own = images[0]
        assert own.ref == f"tensorflow/tensorflow:{build.tf}-gpu"
        assert own.jupyter_ref == f"tensorflow/tensorflow:{build.tf}-gpu-jupyter"
        # a tf_image_faults row replaces the cuDNN the rule assumes with the one the published image carries
        assert (own.cuda, own.cudnn) == (build.cuda, own.fault.cudnn if own.fault else build.cudnn)
        assert (own.fault is not None) == (build.tf >= version("2.18")), build.tf
        assert own.driver == kb.toolkit(build.cuda).linux_min_driver  # type: ignore[union-attr]


def test_ngc_images_follow_the_release_series():
    kb = load_kb()
    refs = [i.ref for i in container_images(kb, "2.17.0")]
    assert refs == ["tensorflow/tensorflow:2.17.0-gpu", "nvcr.io/nvidia/tensorflow:25.02-tf2-py3"]
    assert all(i.tf.major == 1 for i in container_images(kb, "1.15.5")[1:])


@pytest.mark.parametrize("image", ngc_images(), ids=lambda i: i.ref)
def test_driver_floor_cases_generated_from_the_rows(image: records.ContainerImage):
    assert image.driver is not None
    assert image.driver_ok(image.driver, datacenter=False)
    below = version(f"{image.driver.major - 1}.99")
    assert not image.driver_ok(below, datacenter=False)
    for branch in image.compat_drivers:
        assert image.driver_ok(branch, datacenter=True)
        assert not image.driver_ok(branch, datacenter=False)


@given(major=st.integers(300, 700), minor=st.integers(0, 200))
def test_forward_compatibility_never_helps_a_consumer_gpu(major: int, minor: int):
    driver = version(f"{major}.{minor}")
    for image in ngc_images():
        consumer = image.driver_ok(driver, datacenter=False)
        datacenter = image.driver_ok(driver, datacenter=True)
        assert consumer <= datacenter  # data-center GPUs can only gain
        assert consumer == (image.driver is None or driver >= image.driver)


# --------------------------------------------------------------------------- how each NGC row is cited

NVIDIA_HOSTS = ("https://docs.nvidia.com/", "https://github.com/NVIDIA/", "https://www.github.com/NVIDIA/")


def _raw() -> dict:
    return parse.load_toml("containers")


def test_a_verified_ngc_row_cites_only_nvidia():
    data = _raw()
    sources = data["sources"]
    verified = [r for r in data["ngc"] if "confidence" not in r]
    assert len(verified) >= 3  # 22.06, 22.10 and 23.01 tf1: every value read on NVIDIA's pages or repository
    for row in verified:
        for key in ("source", "source2", "compat_source"):
            if key in row:
                assert sources[row[key]]["url"].startswith(NVIDIA_HOSTS), (row["release"], row["flavor"], key)


def test_an_inferred_or_secondary_row_says_what_is_inferred():
    for row in _raw()["ngc"]:
        if row.get("confidence") in ("inferred", "secondary"):
            assert "nferred" in row["note"], (row["release"], row["flavor"])
        assert row.get("confidence", "verified") in ("verified", "inferred", "secondary")


def test_every_source_is_a_url_a_user_can_open():
    for key, src in _raw()["sources"].items():
        assert src["url"].startswith("https://"), key
        assert " " not in src["url"], key
        assert "/work/" not in src["url"], key
        assert src["title"], key
        assert src["retrieved"], key


def test_tf1_rows_agree_with_nvidias_tensorflow_fork():
    # NVIDIA/tensorflow's release branches are TF 1.15.x; its last release (23.03) ends the TF1 series
    tf1 = [i for i in ngc_images() if i.ref.endswith("-tf1-py3")]
    assert tf1
    assert all((i.tf.major, i.tf.minor) == (1, 15) for i in tf1)
    newest = max(tf1, key=lambda i: _yymm(i.ref.rsplit(":", 1)[1].split("-")[0]))
    assert newest.ref == "nvcr.io/nvidia/tensorflow:23.03-tf1-py3"


def test_every_cited_source_key_is_in_the_sources_table():
    # the loader checks source/source2/compat_source; tf_source (the TensorFlow version's own citation) here
    data = _raw()
    for table in ("ngc", "series", "tf_images", "tf_image_faults"):
        for row in data[table]:
            for key, value in row.items():
                if key == "source" or key.endswith("_source") or key.startswith("source"):
                    assert value in data["sources"], (table, row.get("release") or row.get("id"), key, value)


#: NVIDIA/framework-reproducibility doc/d9m/tensorflow.md: the TensorFlow minor version of each NGC release
NGC_TF_TABLE = [("19.06", "19.06", "1.13"), ("19.07", "19.10", "1.14"), ("19.11", "20.01", "2.0"),
                ("20.02", "20.03", "2.1"), ("20.06", "20.08", "2.2"), ("20.09", "20.12", "2.3"),
                ("21.02", "21.05", "2.4"), ("21.06", "21.08", "2.5"), ("21.09", "21.12", "2.6"),
                ("22.01", "22.02", "2.7"), ("22.03", "22.05", "2.8"), ("22.06", "22.09", "2.9"),
                ("22.10", "22.12", "2.10"), ("23.01", "23.01", "2.11")]


def test_rows_carry_the_minor_version_nvidias_table_gives():
    checked = 0
    for row in _raw()["ngc"]:
        if "tf_source" not in row:
            continue
        (minor,) = [m for lo, hi, m in NGC_TF_TABLE if _yymm(lo) <= _yymm(row["release"]) <= _yymm(hi)]
        if row["flavor"] == "tf1-py3":
            minor = "1.15"
        assert row["tf"].startswith(minor + "."), (row["release"], row["tf"], minor)
        checked += 1
    assert checked == 10
