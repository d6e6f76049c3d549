"""English and Python-identifier helpers of the source generator: plurals, CamelCase, isort-style imports."""

from __future__ import annotations

from workload_gen.data import VOCAB

GERUNDS: dict[str, str] = VOCAB["gerunds"]


def import_block(lines: list[str]) -> list[str]:
    """isort-style stdlib imports: plain imports first, then one merged ``from`` line per module."""
    plain = sorted({line for line in lines if line.startswith("import ")})
    names: dict[str, set[str]] = {}
    for line in lines:
        if line.startswith("from "):
            module, _, what = line[5:].partition(" import ")
            names.setdefault(module, set()).update(n.strip() for n in what.split(","))
    froms = [
        f"from {m} import {', '.join(sorted(names[m], key=lambda n: (not n.isupper(), n)))}" for m in sorted(names)
    ]
    return plain + froms


def from_import(module: str, names: list[str], width: int = 100) -> list[str]:
    """``from module import a, b`` wrapped the way ruff/black format long import lines."""
    line = f"from {module} import {', '.join(names)}"
    if len(line) <= width:
        return [line]
    return [f"from {module} import (", *[f"    {n}," for n in names], ")"]


def camel(name: str) -> str:
    """snake_case noun to CamelCase class-name fragment."""
    return "".join(part.capitalize() for part in name.split("_"))


def plural(noun: str) -> str:
    """Good-enough English plural for identifiers."""
    if noun.endswith(("s", "x", "ch", "sh")):
        return noun + "es"
    if noun.endswith("y") and noun[-2:-1] not in "aeiou":
        return noun[:-1] + "ies"
    return noun + "s"


def singular(noun: str) -> str:
    """Inverse of :func:`plural` for the identifiers this generator makes."""
    if noun.endswith("ies"):
        return noun[:-3] + "y"
    if noun.endswith(("sses", "xes", "ches", "shes")):
        return noun[:-2]
    if noun.endswith("s") and not noun.endswith("ss"):
        return noun[:-1]
    return noun


def article(word: str) -> str:
    return "an" if word[:1] in "aeiou" else "a"


def gerund(verb: str) -> str:
    """English -ing form of a verb from VERBS."""
    if verb in GERUNDS:
        return GERUNDS[verb]
    if verb.endswith("e"):
        return verb[:-1] + "ing"
    return verb + "ing"
