"""The footer, fitted to the terminal's width: a screen's way out and its help key always show.

Textual's footer lays its keys out in one row and cuts what does not fit at the right, which at 80 columns was
the dashboard's `q Quit` and `? Help`. This one chooses what to show before it draws: every key while they fit;
then the compact style (one column less per key); then, still short, it leaves out the keys declared last,
never those in `keep` (the screen's quit or close), help, or the command palette's. A key left out still works,
and `?` and the palette (ctrl+p) still list it.
"""

from __future__ import annotations

from collections.abc import Iterable

from rich.cells import cell_len
from textual import events
from textual.app import ComposeResult
from textual.binding import Binding
from textual.screen import Screen
from textual.widgets import Footer
from textual.widgets._footer import FooterKey

HELP_ID = "help"
PALETTE_ID = "command-palette"
# The cells a key takes beside its key and description (textual/widgets/_footer.py's padding and margins, as
# measured): the normal style pads the key on both sides and the description on its right; the compact one puts
# a space between them and a margin after. The palette's key (always drawn compact, docked right) has a border on
# its left and a padding or a margin on its right.
NORMAL_EXTRA = 3
COMPACT_EXTRA = 2
PALETTE_EXTRA = 3
# What a footer shows: the indexes of its keys, whether compact, and each drawn key (key, description, enabled,
# tooltip).
Shown = tuple[tuple[int, ...], bool, tuple[tuple[str, str, bool, str], ...]]


def key_width(key: str, description: str, *, compact: bool) -> int:
    return cell_len(key) + cell_len(description) + (COMPACT_EXTRA if compact else NORMAL_EXTRA)


def fit_keys(
    keys: list[tuple[str, str, str]], width: int, *, keep: frozenset[str], palette: tuple[str, str] | None
) -> tuple[list[int], bool]:
    """Which of `keys` (binding id, key as shown, description) to show in `width` cells, and whether compact.
    Returns their indexes in order. Pure: the footer and its tests use it."""

    def total(shown: list[int], compact: bool) -> int:
        cells = sum(key_width(keys[i][1], keys[i][2], compact=compact) for i in shown)
        if palette is not None:
            cells += cell_len(palette[0]) + cell_len(palette[1]) + PALETTE_EXTRA
        return cells

    shown = list(range(len(keys)))
    if total(shown, False) <= width:
        return shown, False
    droppable = [i for i in reversed(shown) if keys[i][0] not in keep]
    while total(shown, True) > width and droppable:
        shown.remove(droppable.pop(0))
    return shown, True


class FittedFooter(Footer):
    """Textual's Footer choosing its keys by width (fit_keys). `keep`: the binding ids that always show besides
    help, e.g. the screen's quit or close."""

    def __init__(self, *, keep: Iterable[str] = ()) -> None:
        super().__init__()
        self.keep = frozenset(keep) | {HELP_ID}
        self._shown: Shown | None = None

    def _keys(self) -> tuple[list[tuple[Binding, bool, str]], tuple[Binding, bool, str] | None]:
        """The screen's footer keys (one per action, as Textual's footer has them) and the palette's."""
        by_action: dict[str, tuple[Binding, bool, str]] = {}
        for _node, binding, enabled, tooltip in self.screen.active_bindings.values():
            if binding.show:
                by_action.setdefault(binding.action, (binding, enabled, tooltip))
        palette = None
        if self.show_command_palette and self.app.ENABLE_COMMAND_PALETTE:
            found = self.screen.active_bindings.get(self.app.COMMAND_PALETTE_BINDING)
            if found is not None:
                palette = (found.binding, found.enabled, found.tooltip)
        return list(by_action.values()), palette

    def _fit(
        self, keys: list[tuple[Binding, bool, str]], palette: tuple[Binding, bool, str] | None
    ) -> tuple[list[int], bool]:
        width = self.size.width or self.app.size.width
        rows = [(b.id or b.action, self.app.get_key_display(b), b.description) for b, _e, _t in keys]
        shown_palette = (self.app.get_key_display(palette[0]), palette[0].description) if palette else None
        return fit_keys(rows, width, keep=self.keep, palette=shown_palette)

    def bindings_changed(self, screen: Screen[object]) -> None:
        """Composed again only when what it shows changes. The screen says its bindings changed at every focus
        move and every refresh_bindings; a new set of keys each time was most of a form's CPU per keystroke."""
        self._bindings_ready = True
        if screen.app.app_focus and self.is_attached and screen is self.screen:
            self.call_after_refresh(self._recompose_if_changed)

    async def _recompose_if_changed(self) -> None:
        if self.is_attached and self._shows(*self._keys()) != self._shown:
            await self.recompose()

    def _shows(self, keys: list[tuple[Binding, bool, str]], palette: tuple[Binding, bool, str] | None) -> Shown:
        """What the footer draws for these keys: which (as drawn: key, description, enabled, tooltip), compact."""
        shown, compact = self._fit(keys, palette)
        drawn = [keys[i] for i in shown] + ([palette] if palette is not None else [])
        return tuple(shown), compact, tuple((b.key, b.description, e, t) for b, e, t in drawn)

    def compose(self) -> ComposeResult:
        if not self._bindings_ready:
            return
        keys, palette = self._keys()
        self._shown = self._shows(keys, palette)
        shown, compact, _drawn = self._shown
        self.set_reactive(Footer.compact, compact)
        self.set_class(compact, "-compact")
        for index in shown:
            binding, enabled, tooltip = keys[index]
            yield self._key(binding, enabled, tooltip, compact=compact)
        if palette is not None:
            binding, enabled, _tooltip = palette
            yield self._key(
                binding, enabled, binding.tooltip or binding.description, compact=True, classes="-command-palette"
            )

    def _key(self, binding: Binding, enabled: bool, tooltip: str, *, compact: bool, classes: str = "") -> FooterKey:
        """A key born in its style. Textual's footer binds each key's `compact` to its own, which sets the key's
        class once it is mounted: a style update per key at every compose, about a sixth of the console's CPU in a
        form. The footer's
        `compact` changes only here, so the key takes it, and its class, before it mounts."""
        key = FooterKey(
            binding.key,
            self.app.get_key_display(binding),
            binding.description,
            binding.action,
            classes=f"{classes} -compact" if compact else classes,
            disabled=not enabled,
            tooltip=tooltip,
        )
        key.set_reactive(FooterKey.compact, compact)
        return key

    def on_resize(self, _event: events.Resize) -> None:
        """Composed again only when the width changes what it shows (a resize redraws the rest anyway)."""
        if self._bindings_ready and self._shown is not None:
            self.call_after_refresh(self._recompose_if_changed)
