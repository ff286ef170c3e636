"""`python -m tfgpu`."""

from __future__ import annotations

from tfgpu.cli.entry import main

if __name__ == "__main__":
    main()
