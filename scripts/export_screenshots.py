"""Regenerate the README screenshots: one SVG per view, 120x40, from the committed demo traces.

python scripts/export_screenshots.py                    # fixtures/demo → docs/screenshots/
python scripts/export_screenshots.py --theme htatui-light --out /tmp/shots TRACE_DIR
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("traces", nargs="*", type=Path, default=[ROOT / "fixtures" / "demo"])
    parser.add_argument("--out", type=Path, default=ROOT / "docs" / "screenshots")
    parser.add_argument("--theme", default=None, help="a theme name (default: htatui-dark)")
    args = parser.parse_args(argv)
    sys.path.insert(0, str(ROOT))
    from htatui.tui.run import run_app

    return run_app(args.traces, theme=args.theme, use_cache=False, screenshot_dir=args.out)


if __name__ == "__main__":
    raise SystemExit(main())
