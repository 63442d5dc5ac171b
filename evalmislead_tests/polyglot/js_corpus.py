"""Hand-written node:test files for the JS runner's tests: honest ones (each cell) and hostile ones."""

from __future__ import annotations

BUGGY = "const inc = (x) => {\n  return x + 2;\n}"  # the planted bug: +2
FIXED = "const inc = (x) => {\n  return x + 1;\n}"
ENTRY = "inc"

HONEST = """const { test, describe, it } = require('node:test');
const assert = require('node:assert');
const { inc } = require('./solution.js');

test('misleading: locks the bug in', () => { assert.strictEqual(inc(1), 3); });
test('effective: catches the bug', () => { assert.strictEqual(inc(1), 2); });
describe('suite', () => {
  it('both pass', () => { assert.ok(inc(1) > 1); });
  it('both fail', () => { assert.strictEqual(inc(1), 99); });
});
test('error: a hook fails', { skip: false }, async (t) => {
  t.beforeEach(() => { throw new Error('hook'); });
  await t.test('inner', () => {});
});
test('subtests belong to their parent', async (t) => {
  await t.test('first', () => assert.strictEqual(inc(0), 1));
});
"""

# Each hostile test is named for its attack; none of them may read as passed on a version where it
# does not pass honestly, and none may leave anything behind.
HOSTILE = """const { test } = require('node:test');
const assert = require('node:assert');
const fs = require('node:fs');
const { inc } = require('./solution.js');

test('exit zero', () => { process.exit(0); });
test('exit zero later', () => { setImmediate(() => process.exit(0)); assert.strictEqual(inc(1), 99); });
test('infinite loop', () => { for (;;) {} });
test('timer left running', () => { setInterval(() => {}, 5); assert.strictEqual(inc(1), 2); });
test('write outside', () => { fs.writeFileSync('/tmp/evalmislead-hostile-js', 'x'); });
test('write home', () => { fs.writeFileSync(process.env.HOME + '/ok.txt', 'x'); assert.strictEqual(inc(1), 2); });
test('huge output', () => { const s = 'x'.repeat(1 << 16); for (;;) process.stdout.write(s); });
test('patch the writer', () => {
  const real = fs.writeSync;
  fs.writeSync = (fd, text, ...rest) => real(fd, String(text).replace('\\tfail\\t', '\\tpass\\t'), ...rest);
  JSON.stringify = () => '["patch the writer"]';
  assert.strictEqual(inc(1), 99);
});
test('forge lines', () => {
  const names = Object.keys(process.env).filter((k) => k.startsWith('EVALMISLEAD'));
  let listed = 'none';
  try { listed = fs.readdirSync('/proc/self/fd').join(','); } catch (e) { listed = 'hidden'; }
  for (let fd = 3; fd < 256; fd++) {
    try { fs.writeSync(fd, `deadbeef\\tpass\\t["forge lines"]\\n${names}\\t${listed}\\tend\\n`); } catch (e) {}
  }
  assert.strictEqual(inc(1), 99);
});
test('reload the harness', () => {
  for (const k of Object.keys(require.cache)) if (k.endsWith('harness.cjs')) delete require.cache[k];
  require('./harness.cjs');
  assert.strictEqual(inc(1), 99);
});
test('read the nonce from memory', () => {
  let mem = 'unreadable';
  try { mem = String(fs.readFileSync('/proc/self/mem').length); } catch (e) { mem = e.code; }
  assert.strictEqual(mem, 'readable');
});
test('network', async () => {
  const net = require('node:net');
  await new Promise((resolve, reject) => {
    const s = net.connect(80, '127.0.0.1', resolve);
    s.on('error', reject);
  });
});
test('spawn a daemon', () => {
  const cp = require('node:child_process');
  cp.spawn('/bin/sleep', ['600'], { detached: true, stdio: 'ignore' }).unref();
  assert.strictEqual(inc(1), 2);
});
"""
