"""Generated wire paths aimed at a jail: dot-dots, absolute and relative forms,
links that lead out, the spec's reserved names, two Unicode normal forms of one
name, names at and past the length limits, and trailing slashes.

Components are drawn from a vocabulary that knows the arena's layout
(`arena.py`), so a few draws reach the sentinel (`../outside/secret.txt`,
`link_out/secret.txt`, `<ROOT>-evil/secret.txt`), while the rest of the space
— random text, odd dots — keeps the jail honest about everything else.
"""

from __future__ import annotations

from hypothesis import strategies as st

from tetherbed.simulator.fuzz.paths.arena import (
    CAFE_NFC,
    CAFE_NFD,
    LINK_ABSOLUTE,
    LINK_IN,
    LINK_OUT,
    PARKED,
    ROOT_DIR,
    ROOT_FILE,
    SWAP,
)

#: Placeholders a generated path may start with, replaced by the arena's real
#: directories when the operation runs (so a shrunk example reads
#: `<BASE>/outside/secret.txt` on every machine).
ROOT, BASE, OUTSIDE = "<ROOT>", "<BASE>", "<OUTSIDE>"

#: Windows device names the spec answers PATH_RESERVED_NAME (agent/reserved_names.py).
RESERVED_NAMES = ("CON", "nul", "Aux.txt", "COM1", "lpt9.log", "PRN ", "COM¹", "NUL.")
#: Names of the arena, of the sentinel, and of nothing at all.
KNOWN_NAMES = (
    ROOT_FILE,
    ROOT_DIR,
    "sub",
    "inner.txt",
    LINK_OUT,
    LINK_IN,
    LINK_ABSOLUTE,
    SWAP,
    PARKED,
    "outside",
    "root-evil",
    "root",
    "secret.txt",
    "deep.txt",
    "new",
    "new.txt",
)
#: Just at and just past NAME_MAX (255 bytes on Linux file systems).
LONG_NAMES = ("n" * 255, "n" * 256, "é" * 128)


def components() -> st.SearchStrategy[str]:
    odd = st.text(
        alphabet=st.characters(codec="utf-8", exclude_characters="/\x00"), min_size=1, max_size=8
    )
    known = st.sampled_from(KNOWN_NAMES)
    dots = st.sampled_from(("..", ".", "..."))
    # one_of picks a branch uniformly: the arena's names four times as often
    # as each other kind, so that many paths lead somewhere that exists.
    return st.one_of(
        known,
        known,
        known,
        known,
        dots,
        dots,
        st.sampled_from((CAFE_NFC, CAFE_NFD)),
        st.sampled_from(RESERVED_NAMES),
        st.sampled_from(LONG_NAMES),
        odd,
    )


#: Whole paths worth trying every time: what exists, and the classic escapes.
CURATED_PATHS = (
    ROOT_FILE,
    ROOT_DIR,
    f"{ROOT_DIR}/inner.txt",
    f"{ROOT_DIR}/sub",
    CAFE_NFC,
    CAFE_NFD,
    LINK_OUT,
    LINK_IN,
    f"{LINK_IN}/inner.txt",
    f"{LINK_IN}/../{ROOT_FILE}",
    LINK_ABSOLUTE,
    f"{SWAP}/{ROOT_FILE}",
    f"{ROOT_DIR}/../{ROOT_FILE}",
    f"../root/{ROOT_FILE}",
    "../outside/secret.txt",
    f"{LINK_OUT}/secret.txt",
    f"{LINK_OUT}/../root/{ROOT_FILE}",
    f"{ROOT}/../root/{ROOT_DIR}",
    f"{ROOT}-evil/secret.txt",
    f"{OUTSIDE}/sub/deep.txt",
    ".",
    "..",
    f"{ROOT}",
)


def wire_paths() -> st.SearchStrategy[str]:
    """Relative paths, and absolute ones from `/`, the root, its parent or the sentinel."""
    prefixes = st.sampled_from(
        (
            "",
            "",
            "./",
            f"{ROOT}/",
            f"{ROOT}/",
            f"{BASE}/",
            f"{OUTSIDE}/",
            f"{ROOT}-evil/",
            "/",
            "//",
        )
    )
    suffixes = st.sampled_from(("", "", "", "/"))
    body = st.lists(components(), min_size=0, max_size=4).map("/".join)
    very_long = st.just("/".join(["d" * 200] * 25))  # past PATH_MAX
    return st.one_of(
        st.sampled_from(CURATED_PATHS),
        st.tuples(prefixes, body, suffixes).map("".join).filter(bool),
        very_long,
    )


def swap_paths() -> st.SearchStrategy[str]:
    """Paths through the directory the swapper keeps replacing with a link out."""
    below = st.sampled_from(("", "/", f"/{ROOT_FILE}", "/secret.txt", "/sub", "/new.txt", "/a/b"))
    prefix = st.sampled_from(("", f"{ROOT}/", f"{LINK_IN}/../"))
    return st.tuples(prefix, st.just(SWAP), below).map("".join)
