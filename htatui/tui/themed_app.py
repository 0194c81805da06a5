"""ThemedApp: the base of the apps (the views, the diff, memory): htatui's themes and the user's keymap, once."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from rich.text import Text
from textual import on
from textual.app import App
from textual.command import CommandPalette
from textual.content import Content
from textual.theme import BUILTIN_THEMES
from textual.widgets.option_list import Option

from htatui.tui import theming
from htatui.tui.base.keymap import load_keymap


class ThemedApp(App[int]):
    """Registers the theme files, hides the pass-through themes, applies the keymap, and reports bad files."""

    def __init__(self, theme: str | None = None) -> None:
        super().__init__()
        self._theme_problems: list[str] = []
        self._register_themes(theme)
        loaded = load_keymap()
        self._keymap_problems = loaded.problems
        self.set_keymap(loaded.keymap)
        self._palette_prompts: dict[int, tuple[Option, Any]] = {}
        """The palette entries marked ▶, by id, with the prompt each had."""

    @property
    def keymap(self) -> Mapping[str, str]:
        """Binding id → keys as Textual applies them (normalized: "question_mark", not "?")."""
        return self._keymap

    def _register_themes(self, requested: str | None) -> None:
        loaded = theming.load_themes(theming.themes_dir())
        self._theme_problems.extend(loaded.problems)
        for theme in loaded.themes:
            self.register_theme(theme)
        for name in theming.HIDDEN_THEMES:
            if name in self.available_themes:
                self.unregister_theme(name)
        fallback = theming.DEFAULT_THEME if theming.DEFAULT_THEME in self.available_themes else "textual-dark"
        if requested and requested not in self.available_themes:
            choices = ", ".join(self.theme_names())
            self._theme_problems.append(f"unknown theme {requested!r}; choose one of: {choices}")
            requested = None
        self.theme = requested or fallback

    def theme_names(self) -> list[str]:
        """htatui's own themes first, then Textual's."""
        own = sorted(name for name in self.available_themes if name not in BUILTIN_THEMES)
        return own + sorted(name for name in self.available_themes if name in BUILTIN_THEMES)

    def get_theme_variable_defaults(self) -> dict[str, str]:
        try:
            return theming.domain_defaults(self.current_theme)
        except Exception:  # noqa: BLE001 - before a theme is set, fall back to the dark palette
            return {}

    def on_mount(self) -> None:
        for problem in self._theme_problems:
            self.notify(problem, title="Theme", severity="warning", timeout=8)
        if self._keymap_problems:
            # markup=False: the lines quote "[keys]" and the user's text, which are no Rich markup.
            self.notify("\n".join(self._keymap_problems), title="Keymap", severity="warning", timeout=10, markup=False)

    @on(CommandPalette.OptionHighlighted)
    def _mark_palette_entry(self, event: CommandPalette.OptionHighlighted) -> None:
        """A ▶ before the palette's highlighted entry, so it reads without colour (issue 38 #5);
        every other entry gets its own prompt back (the palette re-adds entries as results come)."""
        highlighted = event.highlighted_event
        options, current = highlighted.option_list, highlighted.option
        for index, option in enumerate(options.options):
            original = self._palette_prompts.get(id(option))
            if original is not None and option is not current and original[0] is option:
                options.replace_option_prompt_at_index(index, original[1])
                del self._palette_prompts[id(option)]
        if id(current) not in self._palette_prompts:
            self._palette_prompts[id(current)] = (current, current.prompt)
            options.replace_option_prompt_at_index(highlighted.option_index, marked_prompt(current.prompt))


PALETTE_MARK = "▶ "


def marked_prompt(prompt: Any) -> Any:
    """A palette entry's prompt with PALETTE_MARK before it (its highlighted letters kept)."""
    if isinstance(prompt, Text):
        return Text.assemble(PALETTE_MARK, prompt)
    if isinstance(prompt, Content):
        return Content(PALETTE_MARK) + prompt
    return f"{PALETTE_MARK}{prompt}"
