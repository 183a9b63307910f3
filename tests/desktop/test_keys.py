"""Key names and characters to keysyms (xdotool names, aliases, Unicode). No display."""

from __future__ import annotations

import pytest
from Xlib import XK

from tetherbed.agent.desktop.errors import UnknownKey, UntypableText
from tetherbed.agent.desktop.keys import (
    keysym_for_char,
    keysym_for_name,
    modifier_keysyms,
    parse_combo,
    parse_sequence,
)


def ks(name: str) -> int:
    return XK.string_to_keysym(name)


def test_exact_names_and_aliases() -> None:
    assert keysym_for_name("Return") == keysym_for_name("enter") == ks("Return")
    assert keysym_for_name("KP_Enter") == ks("KP_Enter")
    assert keysym_for_name("ctrl") == ks("Control_L")
    assert keysym_for_name("pagedown") == ks("Next")
    assert keysym_for_name("f12") == ks("F12")
    assert keysym_for_name("A") == ord("A")


def test_combos_and_sequences() -> None:
    assert parse_combo("ctrl+shift+t") == [ks("Control_L"), ks("Shift_L"), ord("t")]
    assert parse_combo("ctrl++") == [ks("Control_L"), ord("+")]
    assert parse_sequence("ctrl+a Delete") == [[ks("Control_L"), ord("a")], [ks("Delete")]]
    with pytest.raises(UnknownKey):
        parse_combo("ctrl+nosuchkey")
    with pytest.raises(UnknownKey):
        parse_combo("ctrl++a")
    with pytest.raises(UnknownKey):
        parse_sequence("   ")


def test_characters() -> None:
    assert keysym_for_char("é") == 0xE9
    assert keysym_for_char("✓") == 0x01000000 + 0x2713
    assert keysym_for_char("\n") == ks("Return")
    assert keysym_for_char("\t") == ks("Tab")
    with pytest.raises(UntypableText):
        keysym_for_char("\x07")


def test_modifiers() -> None:
    assert modifier_keysyms(["shift", "super"]) == [ks("Shift_L"), ks("Super_L")]
    with pytest.raises(UnknownKey):
        modifier_keysyms(["hyper"])
