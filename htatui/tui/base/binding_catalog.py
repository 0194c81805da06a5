"""Every binding htatui declares, by id: what a keymap may name, what docs/keymap.md lists, and which keys
a keymap takes from another binding."""

from __future__ import annotations

import functools
import importlib
import inspect
import pkgutil
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from textual.binding import Binding
from textual.dom import DOMNode


@dataclass(frozen=True)
class BindingInfo:
    """One binding of htatui as the code defines it: what a keymap names and the docs list."""

    id: str
    keys: str
    """The default keys, comma-separated, as the keymap writes them."""
    description: str
    owner: type[DOMNode]
    """The class that binds it (an app, a screen or a widget)."""


@functools.cache
def all_bindings() -> tuple[BindingInfo, ...]:
    """Every binding that an app, screen or widget class in htatui/tui declares, in module and class order.

    Walks the package rather than importing the apps by name: the apps import this module (through the
    keymap), and a screen that only one app opens still counts.
    """
    found: list[BindingInfo] = []
    package = Path(__file__).parent.parent  # htatui/tui, this module being in htatui/tui/base
    for module_info in sorted(pkgutil.walk_packages([str(package)], "htatui.tui."), key=lambda m: m.name):
        module = importlib.import_module(module_info.name)
        # A module's namespace keeps definition order; imported classes are skipped by their module.
        classes = [
            cls
            for cls in vars(module).values()
            if inspect.isclass(cls) and issubclass(cls, DOMNode) and cls.__module__ == module.__name__
        ]
        for cls in classes:
            for item in cls.__dict__.get("BINDINGS", []):
                if isinstance(item, Binding) and item.id:
                    description = item.tooltip or item.description or item.action
                    found.append(BindingInfo(item.id, item.key, description, cls))
    return tuple(found)


def binding_ids() -> frozenset[str]:
    """The ids a keymap may name."""
    return frozenset(info.id for info in all_bindings())


def keymap_clashes(keymap: Mapping[str, str], source: str) -> tuple[str, ...]:
    """One line per key the keymap gives a binding that another binding of the same class already has.

    Textual then drops the other binding without a word, so say which one is lost (or which two now share
    a key). A class's bindings are its own and those it inherits, as Textual merges them. A key that
    takes bindings in several screens is one line naming each (it was one line per screen).
    """
    found: dict[_Clash, list[type[DOMNode]]] = {}
    # Bases first, so that a clash a view inherits is found in its base before the view.
    for owner in sorted(dict.fromkeys(info.owner for info in all_bindings()), key=lambda cls: len(cls.__mro__)):
        for clash in _clashes_in(owner, keymap):
            owners = found.setdefault(clash, [])
            # A clash in a base class (ViewScreen) is named there, not again in each view that inherits it.
            if not any(issubclass(owner, named) for named in owners):
                owners.append(owner)
    by_claim: dict[tuple[str, str, bool], list[str]] = {}
    for clash, owners in found.items():
        where = ", ".join(owner.__name__ for owner in owners)
        place = f"{clash.lost} in {where}" if clash.lost else where
        by_claim.setdefault((clash.key, clash.claimants, clash.lost is not None), []).append(place)
    lines = []
    for (key, claimants, replaces), places in by_claim.items():
        if replaces:
            lines.append(f"{source}: {key!r} for {claimants} replaces {', '.join(places)}")
        else:
            lines.append(f"{source}: {key!r} is given to both {claimants} in {', '.join(places)}")
    return tuple(lines)


@dataclass(frozen=True)
class _Clash:
    key: str
    claimants: str
    """The remapped ids that claim the key, quoted and joined by " and "."""
    lost: str | None
    """The binding the key took (None when two remapped ids share it)."""


def _clashes_in(owner: type[DOMNode], keymap: Mapping[str, str]) -> list[_Clash]:
    defaults: dict[str, Binding] = {}
    for klass in reversed(owner.__mro__):
        for item in Binding.make_bindings(klass.__dict__.get("BINDINGS", [])):
            defaults[item.key] = item
    kept = {key: item for key, item in defaults.items() if item.id not in keymap}
    remapped_ids = sorted({item.id for item in defaults.values() if item.id and item.id in keymap})
    claims: dict[str, list[str]] = {}
    for binding_id in remapped_ids:
        for key in _key_names(keymap[binding_id]):
            claims.setdefault(key, []).append(binding_id)
    clashes: list[_Clash] = []
    for key, claimants in claims.items():
        named = " and ".join(repr(claimant) for claimant in claimants)
        if key in kept:
            lost = repr(kept[key].id) if kept[key].id else f"Textual's {kept[key].action!r}"
            clashes.append(_Clash(key, named, lost))
        elif len(claimants) > 1:
            clashes.append(_Clash(key, named, None))
    return clashes


def _key_names(keys: str) -> list[str]:
    """Textual's names for comma-separated keys ("?" is question_mark), as its bindings store them."""
    return [binding.key for binding in Binding.make_bindings([Binding(keys, "")])]
