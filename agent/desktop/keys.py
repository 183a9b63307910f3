"""Key names and characters to X keysyms.

Key names follow xdotool (X keysym names such as "Return", "ctrl+s",
"KP_Enter") because that is what computer-use models emit; common aliases
("enter", "esc", "cmd", "pagedown") are accepted too. Pure: no display.
"""

from __future__ import annotations

from Xlib import XK

from tetherbed.agent.desktop.errors import UnknownKey, UntypableText

#: Lower-case alias -> X keysym name.
ALIASES: dict[str, str] = {
    "enter": "Return",
    "return": "Return",
    "esc": "Escape",
    "escape": "Escape",
    "tab": "Tab",
    "space": "space",
    "backspace": "BackSpace",
    "delete": "Delete",
    "del": "Delete",
    "insert": "Insert",
    "ins": "Insert",
    "home": "Home",
    "end": "End",
    "pageup": "Prior",
    "page_up": "Prior",
    "pgup": "Prior",
    "pagedown": "Next",
    "page_down": "Next",
    "pgdn": "Next",
    "up": "Up",
    "down": "Down",
    "left": "Left",
    "right": "Right",
    "shift": "Shift_L",
    "ctrl": "Control_L",
    "control": "Control_L",
    "alt": "Alt_L",
    "option": "Alt_L",
    "meta": "Meta_L",
    "super": "Super_L",
    "win": "Super_L",
    "windows": "Super_L",
    "cmd": "Super_L",
    "command": "Super_L",
    "capslock": "Caps_Lock",
    "numlock": "Num_Lock",
    "scrolllock": "Scroll_Lock",
    "printscreen": "Print",
    "print": "Print",
    "prtsc": "Print",
    "menu": "Menu",
    "pause": "Pause",
    "plus": "plus",
    "minus": "minus",
}

#: Modifier names allowed in INPUT_ACTION.modifiers -> keysym name.
MODIFIERS: dict[str, str] = {
    "shift": "Shift_L",
    "ctrl": "Control_L",
    "control": "Control_L",
    "alt": "Alt_L",
    "super": "Super_L",
    "meta": "Meta_L",
    "cmd": "Super_L",
}

#: Characters typed with a named key rather than their own keysym.
_CONTROL_CHARS: dict[str, str] = {
    "\n": "Return",
    "\r": "Return",
    "\t": "Tab",
    "\b": "BackSpace",
    "\x1b": "Escape",
}

#: First keysym of the Unicode block (X11 keysymdef: 0x01000000 + code point).
_UNICODE_KEYSYM_BASE = 0x01000000


def keysym_for_name(name: str) -> int:
    """The keysym of one key name: an exact X name, an alias, or one character."""
    if not name:
        raise UnknownKey("empty key name")
    exact = XK.string_to_keysym(name)
    if exact:
        return exact
    alias = ALIASES.get(name.lower())
    if alias is not None:
        return XK.string_to_keysym(alias)
    if name[0].lower() == "f" and name[1:].isdigit() and 1 <= int(name[1:]) <= 35:
        return XK.string_to_keysym(f"F{int(name[1:])}")
    if len(name) == 1:
        return keysym_for_char(name)
    raise UnknownKey(f"unknown key {name!r}")


def keysym_for_char(char: str) -> int:
    """The keysym that types `char`: Latin-1 maps 1:1, the rest to Unicode keysyms."""
    named = _CONTROL_CHARS.get(char)
    if named is not None:
        return XK.string_to_keysym(named)
    code = ord(char)
    if code < 0x20 or 0x7F <= code < 0xA0:
        raise UntypableText(f"cannot type control character U+{code:04X}")
    if code < 0x100:
        return code
    return _UNICODE_KEYSYM_BASE | code


def parse_combo(combo: str) -> list[int]:
    """ "ctrl+shift+t" -> keysyms, pressed in order. A literal "+" is allowed last."""
    text = combo.strip()
    if not text:
        raise UnknownKey("empty key combination")
    if text == "+":
        parts = ["+"]
    elif text.endswith("++"):
        parts = [*text[:-2].split("+"), "+"]
    else:
        parts = text.split("+")
    if any(not p for p in parts):
        raise UnknownKey(f"malformed key combination {combo!r}")
    return [keysym_for_name(p) for p in parts]


def parse_sequence(keys: str) -> list[list[int]]:
    """xdotool-style "ctrl+a Delete": combos separated by spaces, pressed one after another."""
    combos = keys.split()
    if not combos:
        raise UnknownKey("no key given")
    return [parse_combo(c) for c in combos]


def modifier_keysyms(modifiers: list[str] | tuple[str, ...]) -> list[int]:
    out = []
    for name in modifiers:
        keysym_name = MODIFIERS.get(name.lower())
        if keysym_name is None:
            raise UnknownKey(f"unknown modifier {name!r}; use {sorted(set(MODIFIERS))}")
        out.append(XK.string_to_keysym(keysym_name))
    return out
