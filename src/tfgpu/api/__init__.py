"""The Python interface: `tfgpu.doctor()`, `tfgpu.explain(text)` and `tfgpu.smoke()` for notebooks and scripts,
and the doctor as a library. A stage of its own between tools and cli (tests/unit/test_architecture.py, STAGES):
it uses every stage before it and returns their records, and the command line (cli) is built on it -- `tfgpu
doctor` and `tfgpu.doctor()` make their report with the same function (tfgpu.api.doctor.doctor_report)."""
