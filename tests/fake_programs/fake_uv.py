"""A stand-in for `uv pip compile` on PATH (installed by tests as an executable script) that replays real
uv output recorded in tests/data/lock/ (SOURCES.md there).

It records each call (argv, pid, whether PYTHONPATH reached it) as one JSON line to $FAKE_UV_LOG.
$FAKE_UV_SLEEP sleeps first (timeouts, signals). $FAKE_UV_FAIL=1 prints uv's recorded "No solution
found" output and exits 1. Otherwise it writes the recorded `-o` file, naming the input file it was
given in the "# via -r" line as uv does.
"""

import json
import os
import sys
import time

DATA = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "data", "lock")


def main(argv):
    with open(os.environ["FAKE_UV_LOG"], "a") as fh:
        fh.write(json.dumps({"argv": argv, "pid": os.getpid(), "pythonpath": "PYTHONPATH" in os.environ}) + "\n")
    if os.environ.get("FAKE_UV_SLEEP"):
        time.sleep(float(os.environ["FAKE_UV_SLEEP"]))
    if argv[:2] != ["pip", "compile"] or "-o" not in argv:
        return 2
    if os.environ.get("FAKE_UV_FAIL"):
        with open(os.path.join(DATA, "uv-0.13.9-pip-compile-unsatisfiable.txt")) as fh:
            sys.stderr.write(fh.read())
        return 1
    out = argv[argv.index("-o") + 1]
    req_in = argv[argv.index("-o") - 1]
    with open(os.path.join(DATA, "uv-0.13.9-pip-compile-fake-tf-2.20.0.txt")) as fh:
        text = fh.read().replace("-r requirements.in", "-r " + req_in)
    with open(out, "w") as fh:
        fh.write(text)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
