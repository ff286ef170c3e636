"""The backend names: what --backend takes, everywhere. The backend table owns them (tfgpu.backends.runners keeps
a row of runners for each); a module of its own with no imports, so that the doctor's fast path and the
verdicts can read the names without loading the runners."""

from __future__ import annotations

#: The values --backend takes, everywhere (doctor, plan, create, lock).
BACKENDS = ("auto", "pip", "conda", "rattler")
#: The container route (issue 19): the --backend values that run a GPU image. doctor, plan and create accept
#: them in addition to BACKENDS; each has its row of runtimes in tfgpu.backends.runners.RUNNERS, the one table of
#: runners (a test checks that the rows and these values agree).
CONTAINER_BACKENDS = ("container", "docker", "podman", "apptainer")
