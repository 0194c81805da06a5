"""Themes as data: read `themes/*.toml`, validate them, and turn them into Textual themes."""

from __future__ import annotations

import tomllib
from dataclasses import dataclass
from importlib import resources
from pathlib import Path
from typing import Any

from textual.color import Color, ColorParseError
from textual.theme import Theme

import htatui
from htatui.errors import HtatuiError
from htatui.sources.user_file import read_user_text

DEFAULT_THEME = "htatui-dark"

COLOR_FIELDS = (
    "primary",
    "secondary",
    "accent",
    "warning",
    "error",
    "success",
    "foreground",
    "background",
    "surface",
    "panel",
    "boost",
)
FLOAT_FIELDS = ("luminosity_spread", "text_alpha")
ALLOWED_FIELDS = {"name", "dark", "variables", *COLOR_FIELDS, *FLOAT_FIELDS}

DOMAIN_VARIABLES = (
    "hta-compute",
    "hta-noncompute",
    "hta-idle",
    "hta-comm",
    "hta-memory",
    "hta-other",
    "hta-host-wait",
    "hta-kernel-wait",
    "hta-series-1",
    "hta-series-2",
    "hta-series-3",
    "hta-series-4",
)
"""Colours the charts and tables use; a theme without them gets them from its own palette."""

HIDDEN_THEMES = ("textual-ansi",)
"""Built-in themes not offered: textual-ansi ignores every colour but the terminal's 16."""


class ThemeFileError(HtatuiError):
    """A theme file that cannot be used; the message names the file and the problem."""


@dataclass(frozen=True)
class ThemeLoad:
    """The themes read from a folder and one line per file that was rejected."""

    themes: tuple[Theme, ...]
    problems: tuple[str, ...]


def themes_dir() -> Path | None:
    """`themes/` beside the package in a checkout, else the copy packaged as `htatui/_themes`."""
    checkout = Path(htatui.__file__).resolve().parent.parent / "themes"
    if checkout.is_dir():
        return checkout
    packaged = resources.files("htatui").joinpath("_themes")
    if packaged.is_dir():
        return Path(str(packaged))
    return None


def parse_theme(data: dict[str, Any], source: str) -> Theme:
    """Validate one theme's data and build the Textual Theme; raises ThemeFileError."""
    unknown = sorted(set(data) - ALLOWED_FIELDS)
    if unknown:
        raise ThemeFileError(f"{source}: unknown key(s) {', '.join(unknown)}")
    name = data.get("name")
    if not isinstance(name, str) or not name.strip():
        raise ThemeFileError(f"{source}: 'name' must be a non-empty string")
    if "primary" not in data:
        raise ThemeFileError(f"{source}: 'primary' is required")
    colors: dict[str, str] = {}
    for field_name in COLOR_FIELDS:
        if field_name in data:
            colors[field_name] = _color(data[field_name], f"{source}: {field_name}")
    variables_raw = data.get("variables", {})
    if not isinstance(variables_raw, dict):
        raise ThemeFileError(f"{source}: [variables] must be a table")
    variables = {str(key): _color(value, f"{source}: variables.{key}") for key, value in variables_raw.items()}
    dark = data.get("dark", True)
    if not isinstance(dark, bool):
        raise ThemeFileError(f"{source}: 'dark' must be true or false")
    numbers: dict[str, float] = {}
    for field_name in FLOAT_FIELDS:
        if field_name in data:
            value = data[field_name]
            if isinstance(value, bool) or not isinstance(value, int | float) or not 0 <= value <= 1:
                raise ThemeFileError(f"{source}: '{field_name}' must be a number from 0 to 1")
            numbers[field_name] = float(value)
    return Theme(
        name=name.strip(),
        primary=colors.pop("primary"),
        dark=dark,
        variables=variables,
        **colors,  # type: ignore[arg-type]
        **numbers,  # type: ignore[arg-type]
    )


def _color(value: object, where: str) -> str:
    if not isinstance(value, str):
        raise ThemeFileError(f"{where} must be a colour string like '#5fafff'")
    try:
        Color.parse(value)
    except ColorParseError:
        raise ThemeFileError(f"{where}: {value!r} is not a colour") from None
    return value


def load_theme_file(path: Path) -> Theme:
    """Read and validate one `.toml` theme file."""
    try:
        data = tomllib.loads(read_user_text(path))
    except (OSError, UnicodeDecodeError) as exc:
        raise ThemeFileError(f"{path.name}: cannot be read ({exc})") from None
    except tomllib.TOMLDecodeError as exc:
        raise ThemeFileError(f"{path.name}: not valid TOML ({exc})") from None
    return parse_theme(data, path.name)


def load_themes(folder: Path | None) -> ThemeLoad:
    """Every valid theme in `folder` (sorted by file name) and a line per rejected file."""
    if folder is None or not folder.is_dir():
        return ThemeLoad((), ())
    themes: list[Theme] = []
    problems: list[str] = []
    seen: set[str] = set()
    for path in sorted(folder.glob("*.toml")):
        try:
            theme = load_theme_file(path)
        except ThemeFileError as exc:
            problems.append(str(exc))
            continue
        if theme.name in seen:
            problems.append(f"{path.name}: theme name {theme.name!r} is used by another file")
            continue
        seen.add(theme.name)
        themes.append(theme)
    return ThemeLoad(tuple(themes), tuple(problems))


def domain_defaults(theme: Theme) -> dict[str, str]:
    """`hta-*` colours derived from a theme's own palette, for themes that do not set them."""
    muted = theme.foreground or ("#8a8a8a" if theme.dark else "#808080")
    primary = theme.primary
    accent = theme.accent or theme.warning or "#ffaf5f"
    secondary = theme.secondary or primary
    success = theme.success or secondary
    warning = theme.warning or accent
    return {
        "hta-compute": primary,
        "hta-noncompute": accent,
        "hta-idle": muted,
        "hta-comm": accent,
        "hta-memory": secondary,
        "hta-other": success,
        "hta-host-wait": warning,
        "hta-kernel-wait": secondary,
        "hta-series-1": primary,
        "hta-series-2": accent,
        "hta-series-3": secondary,
        "hta-series-4": success,
    }
