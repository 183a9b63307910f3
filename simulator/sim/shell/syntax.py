"""The sim shell's grammar: a subset of the POSIX shell language, parsed exactly.

    script   := and_or ((';' | newline) and_or)* [';']
    and_or   := command (('&&' | '||') newline* command)*
    command  := (NAME=value)* word* ['>' word | '>>' word]

Words are quoted as in `sh`: '...' is literal, "..." expands $NAME, ${NAME}
and $? and honours \\ before $ ` " \\ and newline, a backslash outside quotes
quotes the next character, `#` at the start of a word begins a comment, and a
leading `~` (alone or before `/`) is $HOME.

Everything else `sh` would treat specially is refused here, before anything
runs (`Refused`): pipes, `&`, input redirections and redirections of other
descriptors, subshells and braces, command substitution, globbing, keywords
(if, for, while, case, ...), special parameters other than $?, and
${...} forms other than ${NAME}. Syntax errors are refused too, since the
sim cannot reproduce `sh`'s own message for them.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from tetherbed.simulator.sim.shell.refusal import Refused

_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
_ASSIGNMENT = re.compile(r"[A-Za-z_][A-Za-z0-9_]*=")
#: Characters that end an unquoted word.
_METACHARACTERS = frozenset(" \t\n;&|<>()")
#: Unquoted characters whose meaning (globbing, braces) the sim does not implement.
_GLOB = frozenset("*?[")
_BRACES = frozenset("{}")
#: Words the shell reads as keywords in command position.
KEYWORDS = frozenset(
    {"if", "then", "else", "elif", "fi", "do", "done", "case", "esac", "while", "until"}
    | {"for", "in", "{", "}", "!", "[[", "]]", "function", "select", "time"}
)


@dataclass(frozen=True, slots=True)
class Literal:
    text: str
    quoted: bool


@dataclass(frozen=True, slots=True)
class Parameter:
    """$NAME, ${NAME}, $? or a leading ~ (as HOME, never split)."""

    name: str
    quoted: bool
    tilde: bool = False


Part = Literal | Parameter


@dataclass(slots=True)
class Word:
    parts: list[Part] = field(default_factory=list)

    def literal(self) -> str | None:
        """The word's text when it is one unquoted literal (keywords, assignments)."""
        if len(self.parts) == 1 and isinstance(self.parts[0], Literal):
            return None if self.parts[0].quoted else self.parts[0].text
        return None

    def assignment(self) -> tuple[str, Word] | None:
        """(NAME, value) when the word is NAME=value."""
        first = self.parts[0] if self.parts else None
        if not isinstance(first, Literal) or first.quoted:
            return None
        match = _ASSIGNMENT.match(first.text)
        if match is None:
            return None
        rest = first.text[match.end() :]
        value = Word(([Literal(rest, False)] if rest else []) + self.parts[1:])
        return match.group()[:-1], value


@dataclass(frozen=True, slots=True)
class Redirect:
    append: bool
    target: Word


@dataclass(slots=True)
class Command:
    assignments: list[tuple[str, Word]] = field(default_factory=list)
    words: list[Word] = field(default_factory=list)
    redirect: Redirect | None = None

    def empty(self) -> bool:
        return not self.assignments and not self.words and self.redirect is None


#: One and-or list: (operator joining it to the previous command, command).
AndOr = list[tuple[str, Command]]


@dataclass(frozen=True, slots=True)
class _Token:
    kind: str  # "word" or an operator: ; && || > >> \n
    start: int
    end: int
    word: Word | None = None


def parse(script: str) -> list[AndOr]:
    """The script's and-or lists, or Refused."""
    return _Parser(_tokens(script)).parse()


class _Parser:
    def __init__(self, tokens: list[_Token]) -> None:
        self.tokens = tokens

    def parse(self) -> list[AndOr]:
        lists: list[AndOr] = []
        current: AndOr = []
        command = Command()
        joiner = ""
        at = 0
        while at < len(self.tokens):
            token = self.tokens[at]
            at += 1
            if token.kind == "word":
                assert token.word is not None
                self._add_word(command, token.word)
            elif token.kind in (">", ">>"):
                if at >= len(self.tokens) or self.tokens[at].kind != "word":
                    raise Refused("a syntax error (a redirection without a file)")
                if command.redirect is not None:
                    raise Refused("more than one redirection per command is not supported")
                target = self.tokens[at].word
                assert target is not None
                command.redirect = Redirect(token.kind == ">>", target)
                at += 1
            elif token.kind in ("&&", "||"):
                if command.empty():
                    raise Refused(f"a syntax error ({token.kind!r} unexpected)")
                current.append((joiner, command))
                command, joiner = Command(), token.kind
                while at < len(self.tokens) and self.tokens[at].kind == "\n":
                    at += 1
            else:  # ";" or newline
                if command.empty():
                    if token.kind == ";" or joiner:
                        raise Refused(f"a syntax error ({token.kind!r} unexpected)")
                    continue
                current.append((joiner, command))
                lists.append(current)
                current, command, joiner = [], Command(), ""
        if not command.empty():
            current.append((joiner, command))
        elif joiner:
            raise Refused("a syntax error (the script ends after an operator)")
        if current:
            lists.append(current)
        return lists

    def _add_word(self, command: Command, word: Word) -> None:
        if not command.words:
            assignment = word.assignment()
            if assignment is not None:
                if any(
                    isinstance(p, Literal) and not p.quoted and "~" in p.text for p in word.parts
                ):
                    raise Refused("tilde expansion in assignments is not supported")
                command.assignments.append(assignment)
                return
            text = word.literal()
            if text in KEYWORDS:
                raise Refused(f"the shell keyword {text!r} is not supported")
        command.words.append(word)


def _tokens(script: str) -> list[_Token]:
    tokens: list[_Token] = []
    at = 0
    end = len(script)
    while at < end:
        char = script[at]
        if char in " \t":
            at += 1
        elif char == "\\" and script.startswith("\\\n", at):
            at += 2
        elif char == "#":
            while at < end and script[at] != "\n":
                at += 1
        elif char == "\n":
            tokens.append(_Token("\n", at, at + 1))
            at += 1
        elif char == ";":
            if script.startswith(";;", at):
                raise Refused("';;' (case syntax) is not supported")
            tokens.append(_Token(";", at, at + 1))
            at += 1
        elif char == "&":
            if not script.startswith("&&", at):
                raise Refused("background jobs ('&') are not supported")
            tokens.append(_Token("&&", at, at + 2))
            at += 2
        elif char == "|":
            if not script.startswith("||", at):
                raise Refused("pipes are not supported")
            tokens.append(_Token("||", at, at + 2))
            at += 2
        elif char == ">":
            if script.startswith((">&", ">|"), at):
                raise Refused(f"the redirection {script[at : at + 2]!r} is not supported")
            previous = tokens[-1] if tokens else None
            if previous is not None and previous.end == at and previous.kind == "word":
                assert previous.word is not None
                text = previous.word.literal()
                if text is not None and text.isdigit():
                    raise Refused("redirecting descriptors other than stdout is not supported")
            kind = ">>" if script.startswith(">>", at) else ">"
            tokens.append(_Token(kind, at, at + len(kind)))
            at += len(kind)
        elif char == "<":
            raise Refused("input redirections ('<') are not supported")
        elif char in "()":
            raise Refused("subshells ('(...)') are not supported")
        else:
            word, stop = _word(script, at)
            tokens.append(_Token("word", at, stop, word))
            at = stop
    return tokens


def _word(script: str, at: int) -> tuple[Word, int]:
    """One word starting at `at`; returns it and where it stops."""
    word = Word()
    plain: list[str] = []
    start = at
    end = len(script)

    def flush() -> None:
        if plain:
            word.parts.append(Literal("".join(plain), False))
            plain.clear()

    while at < end and script[at] not in _METACHARACTERS:
        char = script[at]
        if char == "'":
            close = script.find("'", at + 1)
            if close < 0:
                raise Refused("a syntax error (an unterminated quoted string)")
            flush()
            word.parts.append(Literal(script[at + 1 : close], True))
            at = close + 1
        elif char == '"':
            flush()
            at = _double_quoted(script, at + 1, word)
        elif char == "\\":
            if at + 1 >= end:
                raise Refused("a trailing backslash is not supported")
            if script[at + 1] != "\n":
                flush()
                word.parts.append(Literal(script[at + 1], True))
            at += 2
        elif char == "$":
            flush()
            at = _parameter(script, at, word, quoted=False)
        elif char == "`":
            raise Refused("command substitution is not supported")
        elif char in _GLOB:
            raise Refused(f"globbing ({char!r} unquoted) is not supported")
        elif char in _BRACES:
            raise Refused(f"braces ({char!r} unquoted) are not supported")
        elif char == "~" and at == start:
            following = script[at + 1] if at + 1 < end else " "
            if following != "/" and following not in _METACHARACTERS:
                raise Refused("'~user' expansion is not supported")
            word.parts.append(Parameter("HOME", quoted=True, tilde=True))
            at += 1
        else:
            plain.append(char)
            at += 1
    flush()
    return word, at


def _double_quoted(script: str, at: int, word: Word) -> int:
    """Parts of a "..." string whose body starts at `at`; returns past its end."""
    text: list[str] = []
    end = len(script)
    parts_before = len(word.parts)

    def flush() -> None:
        if text:
            word.parts.append(Literal("".join(text), True))
            text.clear()

    while at < end:
        char = script[at]
        if char == '"':
            flush()
            if len(word.parts) == parts_before:
                word.parts.append(Literal("", True))  # "" is an empty word, not none
            return at + 1
        if char == "\\" and at + 1 < end and script[at + 1] in '$`"\\\n':
            if script[at + 1] != "\n":
                text.append(script[at + 1])
            at += 2
        elif char == "$":
            flush()
            at = _parameter(script, at, word, quoted=True)
        elif char == "`":
            raise Refused("command substitution is not supported")
        else:
            text.append(char)
            at += 1
    raise Refused("a syntax error (an unterminated quoted string)")


def _parameter(script: str, at: int, word: Word, *, quoted: bool) -> int:
    """The expansion at `script[at] == '$'`; returns where it ends."""
    following = script[at + 1] if at + 1 < len(script) else ""
    if following == "(":
        raise Refused("command substitution and arithmetic ('$(') are not supported")
    if following == "{":
        close = script.find("}", at + 2)
        if close < 0:
            raise Refused("a syntax error (a missing '}')")
        name = script[at + 2 : close]
        if name != "?" and not _NAME.fullmatch(name):
            raise Refused(f"the parameter expansion '${{{name}}}' is not supported")
        word.parts.append(Parameter(name, quoted))
        return close + 1
    if following == "?":
        word.parts.append(Parameter("?", quoted))
        return at + 2
    if following and (following.isdigit() or following in "@*#-$!"):
        raise Refused(f"the special parameter '${following}' is not supported")
    if not quoted and following in ("'", '"'):
        raise Refused(f"'${following}' quoting is not supported")
    match = _NAME.match(script, at + 1)
    if match is None:
        word.parts.append(Literal("$", quoted))
        return at + 1
    word.parts.append(Parameter(match.group(), quoted))
    return match.end()
