"""`python -m tfgpu`."""

from __future__ import annotations

from tfgpu.cli import main

if __name__ == "__main__":
    main()
