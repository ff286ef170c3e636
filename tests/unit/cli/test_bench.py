"""The benchmark's own parsing and statistics (bench/run.py); the benchmark itself runs with `nox -s bench`."""

from __future__ import annotations

import importlib.util
import sys
from types import ModuleType

import pytest

from tests import REPO

BENCH_RUN = REPO / "bench" / "run.py"

# Recorded on this project's dev machine (Python 3.11.7): `python -X importtime -c "import tfgpu.core.errors"`,
# the header line and the last six lines of stderr.
IMPORTTIME = """\
import time: self [us] | cumulative | imported package
import time:        63 |         63 |         _collections
import time:      1466 |       2061 |       collections
import time:        69 |         69 |       _functools
import time:       648 |       2777 |     functools
import time:      1621 |       5402 |   enum
import time:      1068 |       8795 | tfgpu.core.errors
"""


@pytest.fixture(scope="module")
def bench() -> ModuleType:
    spec = importlib.util.spec_from_file_location("tfgpu_bench_run", BENCH_RUN)
    assert spec is not None
    assert spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses look their module up while the class is built
    spec.loader.exec_module(module)
    return module


@pytest.fixture(scope="module")
def measure(bench: ModuleType) -> ModuleType:
    """bench/bench_measure.py: what every benchmark shares (run.py puts bench/ on sys.path to import it)."""
    import bench_measure

    return bench_measure


def test_parse_importtime_reads_self_cumulative_and_depth(bench: ModuleType) -> None:
    rows = bench.parse_importtime(IMPORTTIME + "some other stderr line\n")
    assert rows[0] == ("_collections", 63, 63, 4)
    assert rows[-1] == ("tfgpu.core.errors", 1068, 8795, 0)
    assert [r[3] for r in rows] == [4, 3, 3, 2, 1, 0]


def test_summarize_median_quartiles_and_peak(measure: ModuleType) -> None:
    samples = [measure.Sample(w, rss, 0, cpu) for w, rss, cpu in
               [(0.5, 40_000, 0.4), (0.1, 41_000, 0.1), (0.3, 39_000, 0.3), (0.2, 61_440, 0.2), (0.4, 1, 0.2)]]
    st = measure.summarize(samples)
    assert (st.n, st.median, st.low, st.high) == (5, 0.3, 0.1, 0.5)
    assert (st.p25, st.p75) == pytest.approx((0.2, 0.4))
    assert st.peak_mb == 60.0
    assert st.cpu == 0.2
    assert measure.summarize([]) is None
    one = measure.summarize([measure.Sample(1.5, 1024, 0)])
    assert (one.p25, one.p75) == (1.5, 1.5)


def test_ratio_row_and_skipped_row(measure: ModuleType) -> None:
    me = measure.Contestant("a", "tfgpu doctor --json", [["/venv/bin/tfgpu", "doctor", "--json"]])
    me.samples = [measure.Sample(0.2, 40 * 1024, 0, 0.1)] * 3
    other = measure.Contestant("b", "other", [["python", "-c", "print('a|b')"]])
    other.samples = [measure.Sample(2.0, 500 * 1024, 0, 0.5)] * 3
    gone = measure.Contestant("c", "gone", [["x"]], skipped="command not available")
    rows = measure.contestant_rows([me, other, gone], me)
    assert rows[0][1] == "`tfgpu doctor --json`"
    assert rows[0][-1] == ""
    assert rows[1][-1] == "10.00×; CPU 5.00×"
    assert rows[1][7] == "500"
    assert rows[2][3] == "skipped: command not available"
    table = measure.md_table(measure.TIME_HEADER, rows)
    assert "print('a\\|b')" in table  # a pipe inside a cell must not split the Markdown row
    assert measure.ratio(other, me) == pytest.approx(10.0)
    assert measure.ratio(gone, me) is None


@pytest.mark.parametrize(("seconds", "text"), [(0.0421, "42 ms"), (1.234, "1.23 s"), (24.04, "24.0 s"), (612.0, "612 s")])
def test_fmt_s(measure: ModuleType, seconds: float, text: str) -> None:
    assert measure.fmt_s(seconds) == text


def test_splice_replaces_the_create_section_and_its_budget_rows(bench: ModuleType, measure: ModuleType) -> None:
    earlier = ("# tfgpu benchmarks\n\n## Budgets (issue 9)\n\n| budget | measured | limit | result |\n|---|---|---|---|\n"
               "| doctor row | 0.1× | ≤ 0.3× | ✓ met |\n| create (old) | 1× | report both | ✓ met |\n\n## Figures\n\n"
               "### No GPU\n\ntable\n\n### `tfgpu create old`\n\nold table\n\nLoad average at the end (1, 5, 15 min): 1."
               "\n\n(create benchmark still running)\n")
    rep = measure.Report()
    rep.parts = ["header", "### `tfgpu create new`\n\nnew table"]
    rep.budgets = [["create (uv warm cache) vs venv + pip by hand", "3.0× faster", "report both", "✓ met"]]
    text = bench.splice(earlier, rep)
    assert "old table" not in text
    assert "(old)" not in text
    assert "still running" not in text
    assert "| doctor row | 0.1× | ≤ 0.3× | ✓ met |\n| create (uv warm cache)" in text
    assert text.index("### No GPU") < text.index("new table") < text.index("Load average at the end")
    assert text.count("Load average at the end") == 1


def test_quick_run_keeps_the_earlier_create_figures(bench: ModuleType) -> None:
    old = ("# tfgpu benchmarks\n\n## Budgets (issue 9)\n\n| budget | measured | limit | result |\n|---|---|---|---|\n"
           "| doctor | 0.4× | ≤ 0.3× | ✗ missed |\n| create (uv warm cache) vs venv + pip by hand | 21.8× faster | "
           "report both | ✓ met |\n\n## Figures\n\n### No GPU\n\nold rows\n\n"
           "### `tfgpu create --tf 2.20 --backend pip` vs the same install by hand\n\ncreate rows\n\n"
           "Load average at the end (1, 5, 15 min): 1, 1, 1.\n")
    new = ("# tfgpu benchmarks\n\n## Budgets (issue 9)\n\n| budget | measured | limit | result |\n|---|---|---|---|\n"
           "| doctor | 0.35× | ≤ 0.3× | ✗ missed |\n\n## Figures\n\n### No GPU\n\nnew rows\n\n"
           "Load average at the end (1, 5, 15 min): 2, 2, 2.\n")
    merged = bench.carry_create(old, new)
    assert "new rows" in merged
    assert "old rows" not in merged
    assert "create rows" in merged
    assert "| create (uv warm cache)" in merged.split("## Figures")[0]
    assert merged.rstrip().endswith("2, 2, 2.")


def test_both_create_sections_are_kept_by_quick_and_replaced_by_only_create(bench: ModuleType,
                                                                             measure: ModuleType) -> None:
    """Issue 32 added `create --cpu` against its steps by hand: two create sections, both carried and replaced."""
    old = ("# tfgpu benchmarks\n\n## Budgets (issue 9)\n\n| budget | measured | limit | result |\n|---|---|---|---|\n"
           "| create --tf 2.21 --cpu --no-smoke / its steps by hand | 1.05× | ≤ 1.1× | ✓ met |\n\n## Figures\n\n"
           "### No GPU\n\nold rows\n\n### `tfgpu create --tf 2.21 --cpu --no-smoke` vs its own steps\n\ncpu rows\n\n"
           "### `tfgpu create --tf 2.20 --backend pip` vs the same install by hand\n\npip rows\n\n"
           "Load average at the end (1, 5, 15 min): 1, 1, 1.\n")
    new = ("# tfgpu benchmarks\n\n## Budgets (issue 9)\n\n| budget | measured | limit | result |\n|---|---|---|---|\n"
           "\n\n## Figures\n\n### No GPU\n\nnew rows\n\nLoad average at the end (1, 5, 15 min): 2, 2, 2.\n")
    merged = bench.carry_create(old, new)
    assert "cpu rows" in merged
    assert "pip rows" in merged
    assert "| create --tf 2.21 --cpu" in merged.split("## Figures")[0]
    rep = measure.Report()
    rep.parts = ["header", "### `tfgpu create --tf 2.21 --cpu --no-smoke` again\n\nnew cpu rows"]
    rep.budgets = [["create --tf 2.21 --cpu --no-smoke / its steps by hand", "1.02×", "≤ 1.1×", "✓ met"]]
    text = bench.splice(old, rep)
    assert "cpu rows" not in text.replace("new cpu rows", "")
    assert "pip rows" not in text
    assert "new cpu rows" in text
    assert text.count("| create --tf 2.21 --cpu") == 1
