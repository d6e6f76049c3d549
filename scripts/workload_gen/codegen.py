"""Procedural Python source in a project's vocabulary: functions, methods and their docstrings.

Every choice is drawn from the session's seeded RNG, in a fixed order, so a seed gives the same code byte
for byte. ``modules.ModuleGen`` builds whole modules and test files from these pieces.
"""

from __future__ import annotations

import random
from dataclasses import dataclass, field

from workload_gen.data import VOCAB, Project, toml
from workload_gen.names import article, camel, gerund, plural, singular

VERBS: tuple[str, ...] = tuple(VOCAB["verbs"])
ATTRS: tuple[str, ...] = tuple(VOCAB["attrs"])
WORDS: tuple[str, ...] = tuple(VOCAB["words"])
TEXT = toml("codegen.toml")  # the prose of generated docstrings and module headers


def _return_kind(returns: str) -> str:
    """The key of codegen.toml's docstring summaries for a return annotation."""
    if returns in ("None", "bool", "int", "str"):
        return returns.lower()
    for prefix, kind in (("list", "list"), ("dict", "dict"), ("Iterator", "iterator")):
        if returns.startswith(prefix):
            return kind
    return "optional" if returns.endswith("| None") else "object"


@dataclass(frozen=True)
class FuncDef:
    """A generated function, remembered so tests can call it with plausible arguments."""

    name: str
    params: list[tuple[str, str]]
    rtype: str


@dataclass
class ClassDef:
    name: str
    noun: str
    methods: list[FuncDef]


@dataclass
class Env:
    """Names a function body may use, so generated statements refer to things that exist."""

    params: list[tuple[str, str]]  # (name, category: str|int|list|obj|dict|bool|opt)
    method: bool
    noun: str  # the class (or module) noun; methods use self._<plural(noun)>
    obj: str  # a class name values of category "obj" belong to
    locals: list[tuple[str, str]] = field(default_factory=list)

    def names(self, category: str) -> list[str]:
        return [n for n, c in self.params + self.locals if c == category]


class CodeGen:
    """Generates modules and test files that read like a small, well-kept Python library."""

    def __init__(self, rng: random.Random, project: Project) -> None:
        self.rng = rng
        self.p = project
        self.needs: dict[str, None] = {}  # import lines needed by the module being generated
        self.funcs: list[FuncDef] = []  # public module-level functions of the module being generated
        self.classes: list[ClassDef] = []

    # ---- small pieces -------------------------------------------------------------------------------
    def noun(self) -> str:
        return self.rng.choice(self.p.nouns)

    def error(self) -> str:
        return self.p.errors[0] if self.rng.random() < 0.7 else self.p.errors[-1]

    def literal(self, category: str) -> str:
        rng = self.rng
        if category == "int":
            return str(rng.choice((0, 1, 2, 3, 8, 16, 30, 64, 100, 256, 1024)))
        if category == "bool":
            return rng.choice(("True", "False"))
        if category == "list":
            return f'["{rng.choice(WORDS)}", "{rng.choice(WORDS)}"]'
        if category == "dict":
            return f'{{"{rng.choice(ATTRS)}": "{rng.choice(WORDS)}"}}'
        return f'"{rng.choice(WORDS)}"'

    def param(self, used: set[str]) -> tuple[str, str, str]:
        """(name, annotation, category) for a new parameter."""
        rng = self.rng
        for _ in range(20):
            noun = self.noun()
            kind = rng.choice(("obj", "str", "str", "int", "list", "list", "dict"))
            if kind == "obj":
                name, ann = noun, camel(noun)
            elif kind == "str":
                suffix = rng.choice(("name", "key", "id", "path", "label"))
                name, ann = f"{noun}_{suffix}", "str"
            elif kind == "int":
                suffix = rng.choice(("count", "limit", "size", "index"))
                name, ann = f"{noun}_{suffix}", "int"
            elif kind == "list":
                name, ann = plural(noun), f"Iterable[{camel(noun)}]"
                self.needs["from collections.abc import Iterable"] = None
            else:
                name, ann = f"{noun}_map", f"Mapping[str, {camel(noun)}]"
                self.needs["from collections.abc import Mapping"] = None
            if name not in used:
                used.add(name)
                return name, ann, kind
        used.add("value")
        return "value", "object", "obj"

    def docstring(self, name: str, params: list[tuple[str, str]], returns: str, indent: str) -> list[str]:
        rng = self.rng
        verb, _, rest = name.lstrip("_").partition("_")
        one = singular(rest.replace("_", " ") or self.noun())
        many = plural(one)
        first = f"``{params[0][0]}``" if params else f"the {many}"
        words = {"verb": verb, "Verb": verb.capitalize(), "Gerund": gerund(verb).capitalize(), "first": first}
        words |= {"one": one, "many": many, "a": article(one), "error": self.p.errors[0]}
        options = [t.format_map(words) for t in TEXT["docstring"]["summary"][_return_kind(returns)]]
        options.append(TEXT["docstring"]["summary"]["helper"].format_map(words))
        summary = rng.choice(options)
        lines = [f'{indent}"""{summary}']
        roll = rng.random()
        if roll < 0.35 and params:
            lines.append("")
            nouns = {"noun_1": self.noun(), "noun_2": self.noun()}
            why = rng.choice([t.format_map(words | nouns) for t in TEXT["docstring"]["why"]])
            lines.append(f"{indent}{why}")
        if 0.35 <= roll < 0.6 and params:
            lines += ["", f"{indent}Args:"]
            for pname, _ in params[:3]:
                arg = TEXT["docstring"]["arg"].format(name=pname, words=pname.replace("_", " "), verb=verb)
                lines.append(f"{indent}    {arg}")
            if returns != "None":
                how = TEXT["docstring"]["returns_how"]
                what = many if returns.startswith(("list", "dict", "Iterator")) else one
                lines += [
                    "",
                    f"{indent}Returns:",
                    f"{indent}    " + TEXT["docstring"]["returns"].format(what=what, how=rng.choice(how)),
                ]
        if len(lines) == 1:
            lines[0] += '"""'
        else:
            lines.append(f'{indent}"""')
        return lines

    # ---- statements -----------------------------------------------------------------------------------
    def blocks(self, env: Env) -> list[str]:
        """A few statements that use the parameters; the shape of ordinary library code."""
        rng = self.rng
        out: list[str] = []
        choices = ["validate", "loop", "log", "normalize", "default", "compute", "dictcomp", "isinstance"]
        if env.method:
            choices += ["lookup", "lock", "lock", "counter"]
        for kind in rng.sample(choices, k=min(len(choices), rng.randint(1, 3))):
            out += self.block(kind, env)
        return out

    def block(self, kind: str, env: Env) -> list[str]:
        rng = self.rng
        strs, ints, lists = env.names("str"), env.names("int"), env.names("list")
        noun = env.noun
        store = f"self._{plural(noun)}"
        if kind == "validate" and (strs or ints):
            if strs and (not ints or rng.random() < 0.5):
                p = rng.choice(strs)
                msg = rng.choice((f'"{p} must not be empty"', f'f"invalid {noun}: {{{p}!r}}"'))
                return [f"if not {p}:", f"    raise {self.error()}({msg})"]
            p = rng.choice(ints)
            return [f"if {p} < 0:", f'    raise {self.error()}(f"{p} must be >= 0, got {{{p}}}")']
        if kind == "loop" and lists:
            src = rng.choice(lists)
            item, acc = noun if noun != src else "item", f"{rng.choice(('selected', 'kept', 'pending', 'ready'))}"
            attr = rng.choice(ATTRS)
            cond = rng.choice((f"{item}.{attr} is None", f"not {item}.enabled", f"{item}.{attr} in seen"))
            lines = [f"{acc} = []"]
            if "seen" in cond:
                lines = ["seen: set[str] = set()", *lines]
            lines += [f"for {item} in {src}:", f"    if {cond}:", "        continue"]
            if "seen" in cond:
                lines.append(f"    seen.add({item}.{attr})")
            lines.append(f"    {acc}.append({item})")
            env.locals.append((acc, "list"))
            return lines
        if kind == "log":
            self.needs["import logging"] = None
            args = [n for n, _ in env.params + env.locals][:2]
            if not args:
                return [f'logger.debug("{gerund(rng.choice(VERBS))} {plural(noun)}")']
            fmt = " ".join(f"{a}=%r" for a in args)
            return [f'logger.debug("{gerund(rng.choice(VERBS))} {noun}: {fmt}", {", ".join(args)})']
        if kind == "normalize" and strs:
            p = rng.choice(strs)
            expr = rng.choice((f'{p}.strip().lower().replace("-", "_")', f"{p}.strip()", f'{p}.rstrip("/")'))
            return [f"{p} = {expr}"]
        if kind == "default":
            opts = [n for n, c in env.params if c == "opt"]
            if opts:
                p = opts[0]
                dflt = f"self.{p}" if env.method else f"DEFAULT_{p.upper()}"
                return [f"if {p} is None:", f"    {p} = {dflt}"]
            return []
        if kind == "compute" and ints:
            p = rng.choice(ints)
            v = rng.choice(("bounded", "effective", "capped"))
            env.locals.append((v, "int"))
            limit = "self._limit" if env.method else f"MAX_{noun.upper()}_{rng.choice(('COUNT', 'SIZE'))}"
            return [f"{v} = max(0, min({p}, {limit}))"]
        if kind == "dictcomp" and lists:
            src = rng.choice(lists)
            attr = rng.choice(ATTRS)
            v = f"by_{attr}"
            env.locals.append((v, "dict"))
            return [f"{v} = {{item.{attr}: item for item in {src}}}"]
        if kind == "isinstance" and lists:
            p = rng.choice(lists)
            return [f"if isinstance({p}, str):", f"    {p} = [{p}]"]
        if kind == "lookup" and strs:
            p = rng.choice(strs)
            v = f"existing_{noun}" if rng.random() < 0.5 else "current"
            env.locals.append((v, "obj"))
            return [
                "try:",
                f"    {v} = {store}[{p}]",
                "except KeyError:",
                f'    raise {self.error()}(f"unknown {noun}: {{{p}!r}}") from None',
            ]
        if kind == "lock" and (strs or env.names("obj")):
            key = rng.choice(strs) if strs else f"{rng.choice(env.names('obj'))}.name"
            value = rng.choice([n for n, _ in env.params])
            return ["with self._lock:", f"    {store}[{key}] = {value}", "    self._version += 1"]
        if kind == "counter":
            return [f'self._stats["{rng.choice(VERBS)}"] += 1']
        return []

    def returns(self, env: Env, rtype: str) -> list[str]:
        rng = self.rng
        noun, store = env.noun, f"self._{plural(env.noun)}" if env.method else f"_{plural(env.noun).upper()}"
        strs, lists, dicts = env.names("str"), env.names("list"), env.names("dict")
        objs = env.names("obj")
        if rtype == "None":
            return [] if rng.random() < 0.5 else ["self._dirty = True"] if env.method else []
        if rtype == "bool":
            if strs:
                return [f"return {rng.choice(strs)} in {store}"]
            if objs:
                o = rng.choice(objs)
                return [f"return {o}.{rng.choice(ATTRS)} is not None and {o}.enabled"]
            return [f"return bool({store})"]
        if rtype == "int":
            if lists:
                return [f"return sum(1 for item in {rng.choice(lists)} if item.enabled)"]
            return [f"return len({store})"]
        if rtype == "str":
            if strs:
                a = rng.choice(strs)
                return [
                    rng.choice(
                        (
                            f'return f"{{{a}}}:{{self.{noun}_prefix}}"' if env.method else f"return {a}",
                            f'return "/".join(part for part in {a}.split("/") if part)',
                        )
                    )
                ]
            return [f'return f"<{camel(noun)} {{len({store})}} items>"']
        if rtype.startswith("list"):
            if lists:
                src = rng.choice(lists)
                return [
                    rng.choice(
                        (f"return sorted({src}, key=lambda item: item.{rng.choice(ATTRS)})", f"return list({src})")
                    )
                ]
            return [f"return list({store}.values())"]
        if rtype.startswith("dict"):
            if dicts:
                return [f"return {rng.choice(dicts)}"]
            return [f"return dict({store})"]
        if rtype.endswith("| None"):
            key = rng.choice(strs) if strs else "key"
            if key == "key" and not strs:
                return [f"return next(iter({store}.values()), None)"]
            return [f"return {store}.get({key})"]
        if rtype.startswith("Iterator"):
            src = rng.choice(lists) if lists else f"{store}.values()"
            return [f"for item in {src}:", f"    if item.{rng.choice(ATTRS)}:", "        yield item"]
        args = ", ".join(f"{a}={n}" for a, (n, _) in zip(ATTRS, env.params, strict=False))
        return [f"return {rtype}({args})"]

    def function(self, name: str, *, method: bool, noun: str, indent: str = "") -> list[str]:
        """One function (or method) with signature, docstring and body."""
        rng = self.rng
        used: set[str] = set()
        params: list[tuple[str, str, str]] = [self.param(used) for _ in range(rng.randint(1, 3))]
        kw: list[str] = []
        opt_name = None
        if rng.random() < 0.45:
            kw.append(f"strict: bool = {rng.choice(('False', 'True'))}")
        if rng.random() < 0.3:
            opt_name = f"{noun}_limit"
            if opt_name not in used:
                kw.append(f"{opt_name}: int | None = None")
            else:
                opt_name = None
        obj = camel(noun)
        rtype = rng.choice(
            ("None", "bool", "int", "str", f"list[{obj}]", f"dict[str, {obj}]", f"{obj} | None", obj,
             f"Iterator[{obj}]")
        )  # fmt: skip
        if rtype.startswith("Iterator"):
            self.needs["from collections.abc import Iterator"] = None
        plist = (["self"] if method else []) + [f"{n}: {a}" for n, a, _ in params]
        if kw:
            plist += ["*", *kw]
        sig = f"{indent}def {name}({', '.join(plist)}) -> {rtype}:"
        if len(sig) > 108:
            sig_lines = [f"{indent}def {name}("] + [f"{indent}    {p}," for p in plist] + [f"{indent}) -> {rtype}:"]
        else:
            sig_lines = [sig]
        env = Env([(n, c) for n, _, c in params], method, noun, obj)
        if opt_name:
            env.params.append((opt_name, "opt"))
        body = self.blocks(env) + self.returns(env, rtype)
        if not body:
            body = ["pass"] if rng.random() < 0.2 else [f"self._{plural(noun)}.clear()" if method else "return None"]
        inner = indent + "    "
        doc = self.docstring(name, [(n, a) for n, a, _ in params], rtype, inner)
        if not name.startswith("_"):
            record = FuncDef(name, [(n, c) for n, _, c in params], rtype)
            if method:
                self.classes[-1].methods.append(record)
            else:
                self.funcs.append(record)
        return sig_lines + doc + [inner + line if line else "" for line in body]
