"""JS and Java test files out of model answers: fences, imports, wrappers, package lines, re-declarations."""

from __future__ import annotations

from evalmislead_assets.polyglot.extraction import extract_java, extract_js, java_class_name
from evalmislead_assets.polyglot.js_runner import js_test_file_name

JS_ANSWER = """Sure, here are the tests.

```javascript
const { sumIt } = require('../src/sumIt');
const assert = require('assert');

function sumIt(a, b) {
  if (a) { return a + b; }
  return b;
}

describe('sumIt', () => {
  it('adds', () => { assert.strictEqual(sumIt(1, 2), 3); });
});
```
That covers it.
"""


def test_js_fence_redeclaration_and_require_are_normalised() -> None:
    e = extract_js(JS_ANSWER, "sumIt")
    assert e.how == "fence:javascript"
    assert "function sumIt" not in e.source and "return a + b" not in e.source
    assert "require('./solution.js')" in e.source and "../src/sumIt" not in e.source
    assert "require('node:test')" in e.source  # describe/it were used without importing them
    assert "require('assert')" in e.source and "node:assert" not in e.source  # already imported
    assert e.notes == ["removed_local_def:sumIt", "import:../src/sumIt->./solution.js", "import:added node:test"]
    assert js_test_file_name(e.source) == "solution.test.cjs"


def test_js_es_module_answer_keeps_its_syntax() -> None:
    answer = ("```js\nimport { test } from 'node:test';\nimport assert from 'node:assert/strict';\n"
              "import { sumIt } from './sumIt.js';\n\ntest('adds', () => assert.equal(sumIt(1, 2), 3));\n```")
    e = extract_js(answer, "sumIt")
    assert "from './solution.js'" in e.source and e.notes == ["import:./sumIt.js->./solution.js"]
    assert js_test_file_name(e.source) == "solution.test.mjs"


def test_js_without_fence_and_without_imports_gets_them() -> None:
    e = extract_js("test('adds', () => { assert.strictEqual(sumIt(1, 2), 3); });", "sumIt")
    assert e.how == "no_fence"
    assert e.source.splitlines()[:3] == ["const { sumIt } = require('./solution.js');",
                                         "const { test, describe, it } = require('node:test');",
                                         "const assert = require('node:assert');"]


def test_js_arrow_redeclaration_removed_and_prose_only_is_none() -> None:
    answer = "```javascript\nconst sumIt = (a, b) => {\n  return a + b;\n};\ntest('t', () => sumIt(1, 1));\n```"
    e = extract_js(answer, "sumIt")
    assert "return a + b" not in e.source and "removed_local_def:sumIt" in e.notes
    assert extract_js("I cannot write tests for this.", "sumIt").how == "none"


def test_js_picks_the_block_with_tests() -> None:
    answer = "```js\nconst sumIt = (a, b) => { return a + b; };\n```\n\n```js\ntest('t', () => {});\n```"
    e = extract_js(answer, "sumIt")
    assert "return a + b" not in e.source and "test('t'" in e.source


JAVA_ANSWER = """```java
package com.example;

import org.junit.jupiter.api.Test;
import static org.junit.jupiter.api.Assertions.assertTrue;

class Solution {
    public boolean f(int x) { return x > 0; }
}

public class SolutionTest {
    @Test
    void positive() { assertTrue(new Solution().f(1)); }
}
```"""


def test_java_package_and_redeclared_class_removed_imports_added() -> None:
    e = extract_java(JAVA_ANSWER)
    assert e.how == "fence:java"
    assert "package" not in e.source and "return x > 0" not in e.source
    assert "import org.junit.jupiter.api.Test;" in e.source and "import java.util.*;" in e.source
    assert e.notes == ["removed_package", "removed_local_def:Solution", "import:added junit"]
    assert java_class_name(e.source) == "SolutionTest"


def test_java_methods_without_class_get_a_wrapper() -> None:
    answer = ("```java\n@Test\nvoid one() { assertEquals(1, new Solution().f(1)); }\n\n"
              "@ParameterizedTest\n@ValueSource(ints = {1, 2})\nvoid many(int x) { assertTrue(x > 0); }\n```")
    e = extract_java(answer)
    assert "added_class:SolutionTest" in e.notes
    assert e.source.index("import org.junit.jupiter.params.ParameterizedTest;") < e.source.index("public class")
    assert java_class_name(e.source) == "SolutionTest"
    assert e.source.rstrip().endswith("}")


def test_java_class_repeated_in_every_fence_becomes_one_class() -> None:
    """The 1.5B wrote each test in a fence of its own, each a whole `public class SolutionTest` (3 of 10 Java
    answers of the screening): javac refused the duplicate class and the answer counted zero tests."""
    fence = ("## Test {n}\n\n```java\nimport static org.junit.jupiter.api.Assertions.assertEquals;\n\n"
             "public class SolutionTest {{\n    @org.junit.jupiter.api.Test\n    public void test{n}() {{\n"
             "        assertEquals({n}, new Solution().f(\"{{}}\"));\n    }}\n}}\n```\n")
    e = extract_java("".join(fence.format(n=n) for n in (1, 2, 3)))
    assert e.how == "fence:java x3" and "merged_class:SolutionTest x3" in e.notes
    assert e.source.count("class SolutionTest") == 1
    assert [ln.strip() for ln in e.source.splitlines() if "public void" in ln] == [
        "public void test1() {", "public void test2() {", "public void test3() {"]
    assert e.source.count("{") == e.source.count("}") and e.source.rstrip().endswith("}")
    # other classes stay as they are; a truncated file (unbalanced braces) is left alone
    two = ("```java\nclass Helper { int x() { return 1; } }\npublic class SolutionTest { @Test void a() {} }\n```\n"
           "```java\npublic class SolutionTest { @Test void b() {} }\n```\n")
    merged = extract_java(two)
    assert merged.source.count("class Helper") == 1 and merged.source.count("class SolutionTest") == 1
    assert "void a()" in merged.source and "void b()" in merged.source
    cut = extract_java("```java\npublic class SolutionTest { @Test void a() {} }\npublic class SolutionTest { @Test "
                       "void b() {\n```")
    assert not any(n.startswith("merged_class") for n in cut.notes)


def test_js_head_repeated_in_every_fence_is_declared_once() -> None:
    """Each fence repeating `const { f } = require(...)` declared f again: a SyntaxError, zero tests."""
    fence = ("```javascript\nconst {{ f }} = require('./f');\nconst assert = require('assert');\n"
             "test('t{n}', () => {{\n  const {{ f }} = require('./f');\n  assert.strictEqual(f({n}), {n});\n}});\n```\n")
    e = extract_js("".join(fence.format(n=n) for n in (1, 2, 3)), "f")
    assert "removed_repeated_import x4" in e.notes  # f and assert of fences 2 and 3
    top = [ln for ln in e.source.splitlines() if ln.startswith(("const", "import"))]
    assert top == ["const { test, describe, it } = require('node:test');", "const { f } = require('./solution.js');",
                   "const assert = require('assert');"]
    assert e.source.count("  const { f } = require('./solution.js');") == 3  # inside each test: its own scope
    assert [ln for ln in e.source.splitlines() if ln.startswith("test(")] == ["test('t1', () => {", "test('t2', () => {",
                                                                             "test('t3', () => {"]
