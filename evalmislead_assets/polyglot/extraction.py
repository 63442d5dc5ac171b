"""Answer text -> a JavaScript or Java test file, and a record of what was normalised (as for Python).

Fences are found by the Python extraction's ``code_blocks`` (nested markdown fences, unclosed fences);
the blocks in the language (or unlabelled) that declare tests are kept, else all of them. Then:

- JavaScript: a re-declared entry point (``function f(``, ``const f = ...``) is removed, so the tests
  exercise the code under test; ``require``/``import`` of a local module becomes ``./solution.js``; a missing
  import of the entry point, of ``node:test`` or of ``node:assert`` is added.
- Java: ``package`` lines are dropped; a re-declared ``class Solution`` is removed; test methods without a
  class get one (``SolutionTest``); the JUnit 5 imports the file uses are added.

Every change is a note in ``Extraction.notes`` (``removed_local_def:f``, ``import:./sum->./solution.js``, ...).
"""

from __future__ import annotations

import re

from evalmislead_assets.execution.extraction import Extraction, code_blocks, strip_reasoning

JS_LANGS = {"javascript", "js", "node", "nodejs", "mjs", "cjs", "jsx", ""}
JAVA_LANGS = {"java", ""}
_JS_TESTS = re.compile(r"\b(test|it|describe)\s*\(")
_JAVA_TESTS = re.compile(r"@(Test|ParameterizedTest|RepeatedTest)\b")
_NODE_BUILTINS = {"assert", "assert/strict", "test", "fs", "path", "util", "os", "events", "child_process",
                  "crypto", "buffer", "stream", "timers", "worker_threads", "vm"}
_JS_MODULE = re.compile(r"""(\brequire\s*\(\s*|\bfrom\s+|\bimport\s+)(['"])([^'"]+)\2""")


def _blocks(answer: str, langs: set[str], tests: re.Pattern[str]) -> tuple[str, str]:
    text = strip_reasoning(answer or "")
    blocks = [b for b in code_blocks(text) if b.lang.lower() in langs and b.text.strip()]
    if not blocks:
        return (text.strip(), "no_fence") if tests.search(text) else ("", "none")
    with_tests = [b for b in blocks if tests.search(b.text)] or blocks
    kinds = sorted({b.lang or "plain" for b in with_tests})
    how = "fence:" + ",".join(kinds) + (f" x{len(with_tests)}" if len(with_tests) > 1 else "")
    return "\n\n".join(b.text.rstrip() for b in with_tests) + "\n", how


def _match_brace(src: str, open_at: int) -> int:
    """Index just past the brace closing the one at ``open_at`` (strings, template literals and comments skipped);
    len(src) when unbalanced."""
    depth, i, n = 0, open_at, len(src)
    while i < n:
        c = src[i]
        if c in "'\"`":
            j = i + 1
            while j < n and src[j] != c:
                j += 2 if src[j] == "\\" else 1
            i = j + 1
            continue
        if src.startswith("//", i):
            i = src.find("\n", i) if src.find("\n", i) >= 0 else n
            continue
        if src.startswith("/*", i):
            end = src.find("*/", i + 2)
            i = n if end < 0 else end + 2
            continue
        if c == "{":
            depth += 1
        elif c == "}":
            depth -= 1
            if depth == 0:
                return i + 1
        i += 1
    return n


def _remove_definition(src: str, start: re.Pattern[str]) -> tuple[str, bool]:
    """Drop the first definition matched by ``start`` through its closing brace (and a trailing ``;``)."""
    m = start.search(src)
    if not m:
        return src, False
    brace = src.find("{", m.end() - 1)
    if brace < 0:
        return src, False
    end = _match_brace(src, brace)
    end += len(re.match(r"\s*;?", src[end:]).group(0))  # type: ignore[union-attr]
    return src[:m.start()] + src[end:], True


_JS_IMPORT_LINE = re.compile(r"^(?:(?:const|let|var)\s+[^=;\n]+=\s*require\s*\([^)\n]*\)|import\s[^;\n]*)[ \t]*;?[ \t]*$",
                             re.M)


def _drop_repeated_imports(src: str, notes: list[str]) -> str:
    """A top-level ``require`` or ``import`` line repeated word for word, later copies dropped. An answer that
    puts each test in a fence of its own repeats its head in every fence, and declaring the same names again
    is a SyntaxError that would make the whole file zero tests. Only unindented lines: a ``require`` inside a
    test's own function is that function's."""
    seen: set[str] = set()
    dropped = 0

    def one(m: re.Match[str]) -> str:
        nonlocal dropped
        key = " ".join(m.group(0).split()).rstrip(";")
        if key in seen:
            dropped += 1
            return ""
        seen.add(key)
        return m.group(0)

    src = _JS_IMPORT_LINE.sub(one, src)
    if dropped:
        notes.append(f"removed_repeated_import x{dropped}")
    return src


def _js_normalise(src: str, entry: str, notes: list[str]) -> str:
    esm = bool(re.search(r"^\s*(import\s+[\w{*'\"]|export\s)", src, re.M))
    for pattern in (rf"^[ \t]*(export\s+)?(async\s+)?function\s*\*?\s*{re.escape(entry)}\s*\(",
                    rf"^[ \t]*(export\s+)?(const|let|var)\s+{re.escape(entry)}\s*=[^;{{]*?\{{"):
        src, removed = _remove_definition(src, re.compile(pattern, re.M))
        if removed:
            notes.append(f"removed_local_def:{entry}")

    def local(m: re.Match[str]) -> str:
        name = m.group(3)
        bare = name.removeprefix("node:")
        if name.startswith("node:") or bare in _NODE_BUILTINS or not (name.startswith(".") or name == entry
                                                                      or name == "solution"):
            return m.group(0)
        if name != "./solution.js":
            notes.append(f"import:{name}->./solution.js")
        return f"{m.group(1)}{m.group(2)}./solution.js{m.group(2)}"

    src = _drop_repeated_imports(_JS_MODULE.sub(local, src), notes)
    head = []
    declared = re.search(rf"\b(const|let|var|function|import)\b[^;\n]*\b{re.escape(entry)}\b", src)
    if re.search(rf"\b{re.escape(entry)}\b", src) and not declared:
        head.append(f"import {{ {entry} }} from './solution.js';" if esm
                    else f"const {{ {entry} }} = require('./solution.js');")
        notes.append(f"import:added {entry}")
    if _JS_TESTS.search(src) and not re.search(r"""['"](node:)?test['"]""", src):
        head.append("import { test, describe, it } from 'node:test';" if esm
                    else "const { test, describe, it } = require('node:test');")
        notes.append("import:added node:test")
    if re.search(r"\bassert\b", src) and not re.search(r"""\bassert\b[^;\n]*['"](node:)?assert(/strict)?['"]""", src):
        head.append("import assert from 'node:assert';" if esm else "const assert = require('node:assert');")
        notes.append("import:added node:assert")
    return "\n".join(head) + ("\n" if head else "") + src


def extract_js(answer: str | None, entry_point: str) -> Extraction:
    src, how = _blocks(answer or "", JS_LANGS, _JS_TESTS)
    if not src:
        return Extraction("", how)
    notes: list[str] = []
    return Extraction(_js_normalise(src, entry_point, notes), how, notes)


JUNIT_IMPORTS = ("import org.junit.jupiter.api.*;", "import static org.junit.jupiter.api.Assertions.*;")
PARAMS_IMPORTS = ("import org.junit.jupiter.params.ParameterizedTest;", "import org.junit.jupiter.params.provider.*;")


def java_class_name(src: str) -> str | None:
    m = re.search(r"^\s*public\s+(final\s+)?class\s+(\w+)", src, re.M) or re.search(r"^\s*class\s+(\w*Test\w*)", src, re.M)
    return m.group(m.lastindex or 1) if m else None


_JAVA_CLASS = re.compile(r"^[ \t]*(?:(?:public|final|abstract|static)\s+)*class\s+(\w+)\b[^{;]*\{", re.M)


def _merge_repeated_classes(src: str, notes: list[str]) -> str:
    """One class out of a top-level class declared again and again. An answer that puts each test in a fence
    of its own often repeats ``public class SolutionTest { ... }`` in every fence (the 1.5B did in 3 of 10 Java
    answers of the screening), which javac refuses as a duplicate class; the later declarations' members go
    into the first one, in their order (``merged_class:SolutionTest x6``). A file whose braces do not balance
    (a truncated answer) is left as it is."""
    spans: list[tuple[str, int, int, int]] = []  # name, start, opening brace, just past the closing brace
    pos = 0
    while (m := _JAVA_CLASS.search(src, pos)) is not None:
        end = _match_brace(src, m.end() - 1)
        if src[end - 1:end] != "}":
            return src
        spans.append((m.group(1), m.start(), m.end() - 1, end))
        pos = end  # top-level declarations only: a nested class stays inside its own
    names = [name for name, *_ in spans]
    repeated = {name for name in names if names.count(name) > 1}
    if not repeated:
        return src
    members = {name: [src[o + 1:e - 1].strip("\n") for n, _, o, e in spans if n == name][1:] for name in repeated}
    out, last, seen = [], 0, set()
    for name, start, _, end in spans:
        if name not in repeated:
            continue
        if name in seen:  # a later declaration: dropped (its members went into the first)
            out.append(src[last:start])
        else:
            seen.add(name)
            out += [src[last:end - 1].rstrip() + "\n\n", "\n\n".join(members[name]), "\n}"]
        last = end
    out.append(src[last:])
    notes += [f"merged_class:{name} x{names.count(name)}" for name in sorted(repeated)]
    return re.sub(r"\n{3,}", "\n\n", "".join(out))


def extract_java(answer: str | None, solution_class: str = "Solution") -> Extraction:
    src, how = _blocks(answer or "", JAVA_LANGS, _JAVA_TESTS)
    if not src:
        return Extraction("", how)
    notes: list[str] = []
    if re.search(r"^\s*package\s+[\w.]+\s*;", src, re.M):
        src = re.sub(r"^\s*package\s+[\w.]+\s*;[ \t]*\n?", "", src, flags=re.M)
        notes.append("removed_package")
    src, removed = _remove_definition(src, re.compile(
        rf"^[ \t]*(public\s+|final\s+)*class\s+{solution_class}\b[^{{]*\{{", re.M))
    if removed:
        notes.append(f"removed_local_def:{solution_class}")
    imports = [ln for ln in src.splitlines() if re.match(r"\s*import\s", ln)]
    body = "\n".join(ln for ln in src.splitlines() if not re.match(r"\s*import\s", ln))
    body = _merge_repeated_classes(body, notes)
    if not re.search(r"\bclass\s+\w+", body):
        body = f"public class SolutionTest {{\n{body}\n}}\n"
        notes.append("added_class:SolutionTest")
    want = list(JUNIT_IMPORTS) + (list(PARAMS_IMPORTS) if "@ParameterizedTest" in body else []) + ["import java.util.*;"]
    added = [w for w in want if w not in {i.strip() for i in imports}]
    if added:
        notes.append("import:added junit")
    return Extraction("\n".join(dict.fromkeys([*imports, *added])) + "\n\n" + body.strip() + "\n", how, notes)
