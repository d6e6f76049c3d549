"""Whole modules and pytest files of a made-up library, from the pieces ``codegen.CodeGen`` draws."""

from __future__ import annotations

from workload_gen.codegen import TEXT, VERBS, WORDS, ClassDef, CodeGen, FuncDef
from workload_gen.data import VOCAB
from workload_gen.names import camel, from_import, import_block, plural

ATTR_TYPES: dict[str, tuple[str, str]] = {k: tuple(v) for k, v in VOCAB["attr_types"].items()}  # type: ignore[misc]
CLASS_SUFFIXES: tuple[str, ...] = tuple(VOCAB["class_suffixes"])
QUALIFIERS: tuple[str, ...] = tuple(VOCAB["qualifiers"])


class ModuleGen(CodeGen):
    """Generates modules and test files that read like a small, well-kept Python library."""

    def klass(self, noun: str, name: str) -> list[str]:
        """A stateful class with a lock and a few methods: the bulk of a typical library module."""
        rng = self.rng
        store = plural(noun)
        self.needs["import threading"] = None
        self.classes.append(ClassDef(name, noun, []))
        lines = [
            f"class {name}:",
            f'    """{rng.choice(("Keeps", "Tracks", "Owns", "Caches"))} {store} by key; safe to share between '
            'threads."""',
            "",
            f'    def __init__(self, {noun}_prefix: str = "", *, limit: int = {rng.choice((64, 128, 256, 1024))}) '
            "-> None:",
            f"        self.{noun}_prefix = {noun}_prefix",
            f"        self._{store}: dict[str, {camel(noun)}] = {{}}",
            "        self._limit = limit",
            "        self._lock = threading.RLock()",
            "        self._version = 0",
            "        self._dirty = False",
            "        self._stats: collections.Counter[str] = collections.Counter()",
            "",
            "    def __len__(self) -> int:",
            f"        return len(self._{store})",
            "",
            "    def __repr__(self) -> str:",
            f'        return f"{name}(prefix={{self.{noun}_prefix!r}}, size={{len(self)}}, limit={{self._limit}})"',
        ]
        self.needs["import collections"] = None
        names: list[str] = []
        for _ in range(rng.randint(3, 7)):
            verb = rng.choice(VERBS)
            target = rng.choice((noun, self.noun(), plural(noun)))
            mname = ("_" if rng.random() < 0.25 else "") + f"{verb}_{target}"
            if mname in names:
                continue
            names.append(mname)
            lines.append("")
            if rng.random() < 0.12 and f"{noun}_count" not in names:
                names.append(f"{noun}_count")
                lines.append("    @property")
                lines += self.count_property(f"{noun}_count", noun)
                continue
            lines += self.function(mname, method=True, noun=noun, indent="    ")
        return lines

    def count_property(self, name: str, noun: str) -> list[str]:
        """A cheap read-only property, the kind real classes grow over time."""
        return [
            f"    def {name}(self) -> int:",
            f'        """Number of {plural(noun)} currently held (cheap; no copy)."""',
            f"        return len(self._{plural(noun)})",
        ]

    def dataclass_block(self, noun: str) -> list[str]:
        """A small record type; gives dumps the mix of data and behaviour real modules have."""
        rng = self.rng
        self.needs["from dataclasses import dataclass, field"] = None
        lines = [
            f"@dataclass({rng.choice(('frozen=True', 'slots=True', 'frozen=True, slots=True'))})",
            f"class {camel(noun)}:",
            f'    """One {noun.replace("_", " ")} as stored in the {self.noun()} table."""',
            "",
            "    name: str",
        ]
        attrs = rng.sample(sorted(ATTR_TYPES), k=rng.randint(2, 5))
        for attr in attrs:
            ann, default = ATTR_TYPES[attr]
            lines.append(f"    {attr}: {ann} = {default}")
        lines.append("    enabled: bool = True")
        ident = next((a for a in attrs if a in ("kind", "label", "status", "offset", "priority")), "enabled")
        lines += [
            "",
            "    def identity(self) -> str:",
            f'        """Key used for de-duplication and as the {self.noun()} index key."""',
            f'        return f"{{self.name}}:{{self.{ident}}}"',
        ]
        if rng.random() < 0.5:
            lines += [
                "",
                "    def to_dict(self) -> dict[str, object]:",
                '        """Plain-data form for JSON export; drops fields that still have their default."""',
                '        data: dict[str, object] = {"name": self.name}',
            ]
            for attr in attrs[:3]:
                default = ATTR_TYPES[attr][1]
                if default == "None":
                    test = f"self.{attr} is not None"
                elif default in ("()", "field(default_factory=dict)"):
                    test = f"self.{attr}"
                else:
                    test = f"self.{attr} != {default}"
                lines += [f"        if {test}:", f'            data["{attr}"] = self.{attr}']
            lines.append("        return data")
        return lines

    def module(
        self,
        mod: str,
        target_lines: int,
        injected: list[str],
        local_imports: list[str],
        extra_imports: tuple[str, ...] = (),
    ) -> str:
        """A whole module of roughly ``target_lines`` lines, with ``injected`` blocks placed among the rest."""
        rng = self.rng
        self.needs = {"import logging": None}
        self.funcs, self.classes = [], []
        main_noun = self.noun()
        items: list[list[str]] = []
        consts = [
            f"DEFAULT_{main_noun.upper()}_LIMIT = {rng.choice((32, 100, 128, 500))}",
            f"MAX_{main_noun.upper()}_COUNT = {rng.choice((1_000, 4096, 10_000))}",
            f"MAX_{self.noun().upper()}_SIZE = {rng.choice((64, 255, 1024))}",
            f"_{plural(main_noun).upper()}: dict[str, {camel(main_noun)}] = {{}}",
        ]
        if rng.random() < 0.5:
            self.needs["import re"] = None
            consts.append(f'_{self.noun().upper()}_PATTERN = re.compile(r"^[a-z][a-z0-9_.-]*$")')
        items.append(consts)
        items.append(self.dataclass_block(main_noun))
        size = sum(len(i) + 2 for i in items)
        used = {camel(main_noun)}
        while size < target_lines:
            roll, noun = rng.random(), self.noun()
            if roll < 0.1 and camel(noun) not in used:
                used.add(camel(noun))
                block = self.dataclass_block(noun)
            elif roll < 0.5:
                name = camel(noun) + rng.choice(CLASS_SUFFIXES)
                if name in used:
                    continue
                used.add(name)
                block = self.klass(noun, name)
            else:
                name = f"{rng.choice(VERBS)}_{rng.choice((noun, plural(noun)))}"
                if name in used:
                    continue
                used.add(name)
                block = self.function(name, method=False, noun=self.noun())
            items.append(block)
            size += len(block) + 2
        for block in injected:
            items.insert(rng.randint(2, max(2, len(items) - 1)), block.rstrip("\n").split("\n"))
        head = [f'"""{camel(mod)} support for {self.p.name}: {self.module_blurb(mod)}', ""]
        head += [self.module_para(mod), '"""', "", "from __future__ import annotations", ""]
        head += [*import_block([*self.needs, *extra_imports]), ""]
        head += [*sorted(local_imports), "", "logger = logging.getLogger(__name__)"]
        body = "\n\n\n".join("\n".join(item) for item in items)
        text = "\n".join(head) + "\n\n\n" + body + "\n"
        return text.replace("\n\n\n\n", "\n\n\n")

    def module_blurb(self, mod: str) -> str:
        draws = {f"nouns_{i}": plural(self.noun()) for i in (1, 2, 3)}
        words = draws | {"main_nouns": plural(self.p.nouns[0]), "mod": mod}
        return self.rng.choice([t.format_map(words) for t in TEXT["module"]["blurb"]])

    def module_para(self, mod: str) -> str:
        words = {"noun_1": self.noun(), "noun_2": self.noun(), "mod": mod, "name": self.p.name}
        return self.rng.choice([t.format_map(words) for t in TEXT["module"]["paragraph"]])

    def arg(self, category: str) -> str:
        """A test-side literal for a parameter of ``category``, so generated tests call with plausible values."""
        rng = self.rng
        word = rng.choice(WORDS)
        if category == "list":
            other = rng.choice(WORDS)
            return rng.choice((f'[make_item("{word}"), make_item("{other}", enabled=False)]', "[]",
                               f'[make_item("{word}")]'))  # fmt: skip
        if category == "obj":
            return f'make_item("{word}")'
        if category == "dict":
            return f'{{"{word}": make_item("{word}")}}'
        if category == "int":
            return str(rng.choice((0, 1, 3, 10, 64)))
        return f'"{word}"'

    def test_body(self, call: str, rtype: str) -> list[str]:
        """Act-and-assert lines whose assertion matches the return type of the call."""
        rng = self.rng
        if rng.random() < 0.2:
            return [f'with pytest.raises({self.p.errors[0]}, match="{rng.choice(("empty", "invalid", "unknown"))}"):',
                    f"    {call}"]  # fmt: skip
        lines = [f"result = {call}"]
        if rtype.startswith(("list", "Iterator")):
            names = rng.sample(WORDS, k=rng.randint(0, 2))
            lines.append(f"assert [item.name for item in result] == {names!r}".replace("'", '"'))
        elif rtype.startswith("dict"):
            lines.append(f"assert sorted(result) == {sorted(rng.sample(WORDS, k=2))!r}".replace("'", '"'))
        elif rtype == "bool":
            lines.append(f"assert result is {rng.choice(('True', 'False'))}")
        elif rtype == "int":
            lines.append(f"assert result == {rng.choice((0, 1, 2, 3))}")
        elif rtype == "str":
            lines.append(f'assert result == "{rng.choice(WORDS)}"')
        elif rtype.endswith("| None"):
            lines.append("assert result is None")
        elif rtype == "None":
            lines = [call]
        else:
            lines.append(f'assert result.name == "{rng.choice(WORDS)}"')
        return lines

    def test_module(
        self,
        mod: str,
        funcs: list[FuncDef],
        classes: list[ClassDef],
        extra_imports: tuple[str, ...],
        also_import: list[str],
    ) -> tuple[str, list[str]]:
        """A pytest module exercising ``funcs`` and ``classes``; returns the text and its test ids."""
        rng = self.rng
        pkg = self.p.name
        imported = sorted({f.name for f in funcs} | {c.name for c in classes} | set(also_import))
        lines = [f'"""Tests for {pkg}.{mod}."""', "", "from __future__ import annotations", ""]
        lines += [*import_block(["from types import SimpleNamespace", *extra_imports]), ""]
        lines += ["import pytest", ""]
        local = {f"{pkg}.errors": from_import(f"{pkg}.errors", [self.p.errors[0]])}
        if imported:
            local[f"{pkg}.{mod}"] = from_import(f"{pkg}.{mod}", imported)
        for module in sorted(local):
            lines += local[module]
        lines += ["", "", "def make_item(name, **fields):",
                  '    """Duck-typed stand-in for the model objects; only the attributes the code reads."""',
                  '    fields.setdefault("enabled", True)', '    fields.setdefault("key", name)',
                  "    return SimpleNamespace(name=name, **fields)"]  # fmt: skip
        ids: list[str] = []
        for func in funcs:
            for _ in range(rng.randint(3, 7)):
                tname = f"test_{func.name.lstrip('_')}_{rng.choice(QUALIFIERS)}"
                if any(i == tname or i.startswith(tname + "[") for i in ids):
                    continue
                lines += ["", ""]
                args = [self.arg(c) for _, c in func.params]
                if rng.random() < 0.3 and func.params and func.params[0][1] == "str":
                    cases = rng.sample(WORDS, k=rng.randint(2, 4))
                    lines.append(f'@pytest.mark.parametrize("raw", {cases!r})'.replace("'", '"'))
                    lines.append(f"def {tname}(raw):")
                    call = f"{func.name}({', '.join(['raw', *args[1:]])})"
                    lines += ["    " + x for x in self.test_body(call, func.rtype)]
                    ids += [f"{tname}[{c}]" for c in cases]
                    continue
                lines.append(f"def {tname}():")
                lines += ["    " + x for x in self.test_body(f"{func.name}({', '.join(args)})", func.rtype)]
                ids.append(tname)
        for cls in classes:
            var = cls.noun
            snake = "".join("_" + c.lower() if c.isupper() else c for c in cls.name).lstrip("_")
            for method in cls.methods[: rng.randint(2, 5)]:
                tname = f"test_{snake}_{method.name}_{rng.choice(QUALIFIERS)}"
                if tname in ids:
                    continue
                lines += ["", "", f"def {tname}():", f"    {var} = {cls.name}(limit={rng.choice((2, 4, 16))})"]
                call = f"{var}.{method.name}({', '.join(self.arg(c) for _, c in method.params)})"
                lines += ["    " + x for x in self.test_body(call, method.rtype)]
                ids.append(tname)
            lines += ["", "", f"def test_{snake}_repr_mentions_limit():", f"    {var} = {cls.name}(limit=7)",
                      f'    assert "limit=7" in repr({var})']  # fmt: skip
            ids.append(f"test_{snake}_repr_mentions_limit")
        return "\n".join(lines) + "\n", ids
