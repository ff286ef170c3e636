"""The smoke test: script.py runs inside the target environment; runner.py runs it and reports."""
