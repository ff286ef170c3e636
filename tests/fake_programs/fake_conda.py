"""A scriptable stand-in for conda/mamba/micromamba on PATH (installed by tests as an executable script).

It records each argv (one JSON line per call) to $FAKE_CONDA_LOG and, for `create`, makes the
environment layout conda makes (conda-meta/, bin/python) at -p PATH or $FAKE_CONDA_ENVS/NAME.
$FAKE_CONDA_FAIL=1 makes `create` fail the way conda does when a spec is missing from the channels
(message text from conda's PackagesNotFoundError, conda/exceptions.py). $FAKE_CONDA_SLEEP sleeps first.
"""

import json
import os
import sys
import time


def main(argv):
    with open(os.environ["FAKE_CONDA_LOG"], "a") as fh:
        fh.write(json.dumps([os.path.basename(sys.argv[0]), *argv]) + "\n")
    if os.environ.get("FAKE_CONDA_SLEEP"):
        time.sleep(float(os.environ["FAKE_CONDA_SLEEP"]))
    if argv[:1] == ["info"]:
        print(json.dumps({"envs_dirs": [os.environ.get("FAKE_CONDA_ENVS", "/nonexistent")]}))
        return 0
    if argv[:1] != ["create"]:
        return 2
    if os.environ.get("FAKE_CONDA_FAIL"):
        specs = [a for a in argv[1:] if "=" in a]
        print("PackagesNotFoundError: The following packages are not available from current channels:\n")
        for s in specs:
            print("  - " + s)
        return 1
    if "-p" in argv:
        prefix = argv[argv.index("-p") + 1]
    else:
        prefix = os.path.join(os.environ["FAKE_CONDA_ENVS"], argv[argv.index("-n") + 1])
    os.makedirs(os.path.join(prefix, "conda-meta"))
    os.makedirs(os.path.join(prefix, "bin"))
    with open(os.path.join(prefix, "conda-meta", "history"), "w") as fh:
        fh.write("# cmd: " + " ".join(argv) + "\n")
    os.symlink(sys.executable, os.path.join(prefix, "bin", "python"))
    print("Preparing transaction: done")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
