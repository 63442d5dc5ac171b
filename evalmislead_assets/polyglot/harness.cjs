// The JavaScript harness: preloaded (--require) before any test code, and the same module instance is the
// node:test reporter (--test-reporter), so the run's nonce never leaves this closure.
//
// At preload it reads the nonce from the nonce pipe and closes it, removes the descriptor numbers from the
// environment, and keeps its own references to the functions it writes with (a test that patches
// fs.writeSync or JSON.stringify later does not reach them). As reporter it writes one line per event of
// interest to the result pipe: `<nonce>\tcollected\t<path>` for each test the run's pattern filtered out
// (collection), `<nonce>\tpass|fail\t<path>[\t<detail>]` for each test that ran, `<nonce>\tend` when the
// root plan arrives (every test has finished). A path is the JSON array of names from the top-level test
// down. A test that ends the process (process.exit) leaves no line: no positive evidence, no pass.
'use strict';
const fs = require('node:fs');

const writeSync = fs.writeSync;
const closeSync = fs.closeSync;
const readSync = fs.readSync;
const stringify = JSON.stringify;
const BufferAlloc = Buffer.alloc;
const FILTERED = 'test name does not match pattern';

const resultFd = Number(process.env.EVALMISLEAD_RESULT_FD);
const nonceFd = Number(process.env.EVALMISLEAD_NONCE_FD);
delete process.env.EVALMISLEAD_RESULT_FD;
delete process.env.EVALMISLEAD_NONCE_FD;
let nonce = '';
if (Number.isInteger(nonceFd) && nonceFd > 2) {
  const buf = BufferAlloc(64);
  const n = readSync(nonceFd, buf, 0, 64, null);
  nonce = buf.toString('utf8', 0, n).trim();
  closeSync(nonceFd);
}

function emit(parts) {
  if (!nonce || !Number.isInteger(resultFd)) return;
  writeSync(resultFd, `${nonce}\t${parts.join('\t')}\n`);
}

function detailOf(data) {
  const err = data && data.details && data.details.error;
  if (!err) return stringify('failed');
  const cause = err.cause !== undefined ? err.cause : err;
  let kind = 'failed';
  if (err.failureType === 'hookFailure' || err.failureType === 'cancelledByParent') kind = 'error';
  let text;
  try {
    text = `${cause && cause.name ? cause.name : 'Error'}: ${cause && cause.message !== undefined ? cause.message : cause}`;
  } catch (e) {
    text = 'unprintable error';
  }
  return `${kind}\t${stringify(String(text).slice(0, 600))}`;
}

module.exports = async function* harnessReporter(source) {
  const stack = [];
  for await (const event of source) {
    const data = event.data || {};
    if (event.type === 'test:start') {
      stack.length = data.nesting;
      stack.push(data.name);
    } else if (event.type === 'test:pass' || event.type === 'test:fail') {
      const path = stack.slice(0, data.nesting).concat([data.name]);
      const id = stringify(path);
      if (data.skip === FILTERED) emit(['collected', id]);
      else if (event.type === 'test:pass' && (data.skip !== undefined || data.todo !== undefined)) emit(['skip', id]);
      else if (event.type === 'test:pass') emit(['pass', id]);
      else emit(['fail', id, detailOf(data)]);
    } else if (event.type === 'test:plan' && data.nesting === 0 && data.file === undefined) {
      emit(['end']);
    }
  }
};
