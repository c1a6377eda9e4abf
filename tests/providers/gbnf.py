"""A reader of GBNF, the grammar language of llama.cpp, as strict as llama.cpp's own parser for what the plan
grammar uses: rules, string literals, character classes (ranges, negation, `\\x` escapes), groups, alternation,
`?`, `*`, `+` and `{m,n}`. It parses a grammar (failing on anything llama.cpp would refuse: an undefined rule, an
unknown escape, a rule name with characters other than letters, digits and `-`), tells whether a text is in its
language, and draws random texts from it, to test what the plan grammar admits without a server."""

from __future__ import annotations

import random
from dataclasses import dataclass
from functools import cache

_ESCAPES = {'n': '\n', 't': '\t', 'r': '\r', '\\': '\\', '"': '"', '[': '[', ']': ']', '-': '-', '^': '^'}


@dataclass(frozen=True)
class Lit:
    text: str


@dataclass(frozen=True)
class Chars:
    ranges: tuple[tuple[str, str], ...]
    negated: bool

    def __contains__(self, char: str) -> bool:
        inside = any(low <= char <= high for low, high in self.ranges)
        return inside != self.negated


@dataclass(frozen=True)
class Ref:
    name: str


@dataclass(frozen=True)
class Seq:
    items: tuple[Node, ...]


@dataclass(frozen=True)
class Alt:
    options: tuple[Node, ...]


@dataclass(frozen=True)
class Rep:
    node: Node
    low: int
    high: int | None


Node = Lit | Chars | Ref | Seq | Alt | Rep


class GrammarError(ValueError):
    pass


class _Parser:
    def __init__(self, text: str) -> None:
        self.text = text
        self.at = 0

    def error(self, why: str) -> GrammarError:
        line = self.text.count('\n', 0, self.at) + 1
        return GrammarError(f'line {line}: {why} at {self.text[self.at:self.at + 40]!r}')

    def space(self, newlines: bool = True) -> None:
        while self.at < len(self.text):
            char = self.text[self.at]
            if char == '#':
                while self.at < len(self.text) and self.text[self.at] != '\n':
                    self.at += 1
            elif char in ' \t' or (newlines and char in '\r\n'):
                self.at += 1
            else:
                break

    def name(self) -> str:
        start = self.at
        while self.at < len(self.text) and (self.text[self.at].isascii() and self.text[self.at].isalnum()
                                            or self.text[self.at] == '-'):
            self.at += 1
        if start == self.at:
            raise self.error('expected a rule name')
        return self.text[start:self.at]

    def char(self) -> str:
        char = self.text[self.at]
        if char != '\\':
            self.at += 1
            return char
        kind = self.text[self.at + 1]
        if kind in 'xuU':
            size = {'x': 2, 'u': 4, 'U': 8}[kind]
            digits = self.text[self.at + 2:self.at + 2 + size]
            if len(digits) != size or any(d not in '0123456789abcdefABCDEF' for d in digits):
                raise self.error('bad hex escape')
            self.at += 2 + size
            return chr(int(digits, 16))
        if kind not in _ESCAPES:
            raise self.error(f'unknown escape \\{kind}')
        self.at += 2
        return _ESCAPES[kind]

    def alternatives(self) -> Node:
        options = [self.sequence()]
        while self.at < len(self.text) and self.text[self.at] == '|':
            self.at += 1
            self.space()
            options.append(self.sequence())
        return options[0] if len(options) == 1 else Alt(tuple(options))

    def sequence(self) -> Node:
        items: list[Node] = []
        while self.at < len(self.text):
            char = self.text[self.at]
            if char == '"':
                self.at += 1
                chars = []
                while self.text[self.at] != '"':
                    if self.text[self.at] == '\n':
                        raise self.error('unterminated literal')
                    chars.append(self.char())
                self.at += 1
                items.append(Lit(''.join(chars)))
            elif char == '[':
                self.at += 1
                negated = self.text[self.at] == '^'
                self.at += negated
                ranges = []
                while self.text[self.at] != ']':
                    low = self.char()
                    high = low
                    if self.text[self.at] == '-' and self.text[self.at + 1] != ']':
                        self.at += 1
                        high = self.char()
                    ranges.append((low, high))
                self.at += 1
                items.append(Chars(tuple(ranges), negated))
            elif char == '(':
                self.at += 1
                self.space()
                inner = self.alternatives()
                if self.text[self.at] != ')':
                    raise self.error('expected )')
                self.at += 1
                items.append(inner)
            elif char.isascii() and (char.isalnum() or char == '-'):
                start = self.at
                name = self.name()
                self.space(newlines=False)
                if self.text.startswith('::=', self.at):  # the next rule begins
                    self.at = start
                    break
                self.at = start + len(name)
                items.append(Ref(name))
            elif char in '?*+{':
                if not items:
                    raise self.error(f'{char} with nothing before it')
                items[-1] = self.repeat(items[-1])
            else:
                break
            self.space()
        return items[0] if len(items) == 1 else Seq(tuple(items))

    def repeat(self, node: Node) -> Node:
        char = self.text[self.at]
        self.at += 1
        if char == '?':
            return Rep(node, 0, 1)
        if char == '*':
            return Rep(node, 0, None)
        if char == '+':
            return Rep(node, 1, None)
        end = self.text.index('}', self.at)
        content = self.text[self.at:end]
        self.at = end + 1
        low_text, comma, high_text = content.partition(',')
        low = int(low_text)
        high = (int(high_text) if high_text.strip() else None) if comma else low
        return Rep(node, low, high)

    def grammar(self) -> dict[str, Node]:
        rules: dict[str, Node] = {}
        self.space()
        while self.at < len(self.text):
            name = self.name()
            self.space(newlines=False)
            if not self.text.startswith('::=', self.at):
                raise self.error('expected ::=')
            self.at += 3
            self.space()
            if name in rules:
                raise self.error(f'rule {name} defined twice')
            rules[name] = self.alternatives()
            self.space()
        return rules


class Grammar:
    def __init__(self, text: str) -> None:
        self.rules = _Parser(text).grammar()
        if 'root' not in self.rules:
            raise GrammarError('no root rule')
        for node in self.rules.values():
            self._check(node)

    def _check(self, node: Node) -> None:
        if isinstance(node, Ref):
            if node.name not in self.rules:
                raise GrammarError(f'undefined rule {node.name}')
        elif isinstance(node, Seq):
            for item in node.items:
                self._check(item)
        elif isinstance(node, Alt):
            for option in node.options:
                self._check(option)
        elif isinstance(node, Rep):
            self._check(node.node)

    def matches(self, text: str) -> bool:
        """Whether `text`, whole, is in the grammar's language."""
        rules = self.rules

        @cache
        def ends(node: Node, start: int) -> frozenset[int]:
            if isinstance(node, Lit):
                return frozenset({start + len(node.text)}) if text.startswith(node.text, start) else frozenset()
            if isinstance(node, Chars):
                return frozenset({start + 1}) if start < len(text) and text[start] in node else frozenset()
            if isinstance(node, Ref):
                return ends(rules[node.name], start)
            if isinstance(node, Seq):
                at = frozenset({start})
                for item in node.items:
                    at = frozenset().union(*(ends(item, position) for position in at))
                    if not at:
                        break
                return at
            if isinstance(node, Alt):
                return frozenset().union(*(ends(option, start) for option in node.options))
            found = {start} if node.low == 0 else set()
            at = frozenset({start})
            count = 0
            while at and (node.high is None or count < node.high):
                at = frozenset().union(*(ends(node.node, position) for position in at)) - {start}
                count += 1
                if count >= node.low:
                    found |= at
                if node.high is None and count > len(text):
                    break
            return frozenset(found)

        return len(text) in ends(rules['root'], 0)

    def sample(self, rng: random.Random, max_repeat: int = 3) -> str:
        """A random text of the grammar's language: alternatives chosen evenly, repetitions up to `max_repeat`
        beyond their least."""
        out: list[str] = []

        def walk(node: Node, depth: int) -> None:
            if depth > 200:
                raise GrammarError('sampling went 200 rules deep: a recursive grammar')
            if isinstance(node, Lit):
                out.append(node.text)
            elif isinstance(node, Chars):
                if node.negated:
                    choices = [c for c in 'abcxyzABC019 _.-:/' if c in node]
                else:
                    choices = [c for low, high in node.ranges for c in map(chr, range(ord(low), ord(high) + 1))]
                out.append(rng.choice(choices))
            elif isinstance(node, Ref):
                walk(self.rules[node.name], depth + 1)
            elif isinstance(node, Seq):
                for item in node.items:
                    walk(item, depth)
            elif isinstance(node, Alt):
                walk(rng.choice(node.options), depth)
            else:
                high = node.low + max_repeat if node.high is None else min(node.high, node.low + max_repeat)
                for _ in range(rng.randint(node.low, high)):
                    walk(node.node, depth + 1)

        walk(self.rules['root'], 0)
        return ''.join(out)
