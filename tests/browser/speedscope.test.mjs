// SPDX-License-Identifier: MIT
// dlflame's speedscope file in the real speedscope: the npm package's bundled
// app (dist/release), served from 127.0.0.1, in Debian's chromium driven by
// playwright-core. The file is checked against the package's own
// file-format-schema.json first; then, read from the page: the file's name,
// the thread list (speedscope's profile selector), the profile shown first,
// and the hottest function of its sandwich view.
//
// Environment: DLFLAME, MKPROFILE, OUTDIR (screenshot speedscope-browser.png
// goes there), CHROMIUM (default /usr/bin/chromium). Exit 0 pass, 1 fail;
// scripts/setup.sh installs chromium and runs npm ci here, so a missing
// prerequisite fails the test with what to run.
import { execFileSync } from 'node:child_process';
import fs from 'node:fs';
import http from 'node:http';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

const here = path.dirname(fileURLToPath(import.meta.url));
const release = path.join(here, 'node_modules', 'speedscope', 'dist', 'release');
const chromiumPath = process.env.CHROMIUM || '/usr/bin/chromium';

function fail(msg) {
  console.log('FAIL: ' + msg);
  process.exit(1);
}

let chromium;
try {
  ({ chromium } = await import('playwright-core'));
} catch (e) {
  fail('playwright-core is not installed: run scripts/setup.sh (npm ci in tests/browser)');
}
if (!fs.existsSync(path.join(release, 'index.html')))
  fail(`no ${release}/index.html: run scripts/setup.sh (npm ci in tests/browser)`);
if (!fs.existsSync(chromiumPath))
  fail(`no ${chromiumPath}: run scripts/setup.sh (apt-get install chromium)`);

const dlflame = process.env.DLFLAME;
const mkprofile = process.env.MKPROFILE;
const outdir = process.env.OUTDIR || '.';
const tmp = fs.mkdtempSync(path.join(os.tmpdir(), 'dlflame-speedscope-'));
const failures = [];

function check(ok, what) {
  if (!ok) {
    failures.push(what);
    console.log('FAIL: ' + what);
  } else {
    console.log('ok: ' + what);
  }
}

// The parts of JSON Schema draft-07 that file-format-schema.json uses.
function validate(schema, root, v, where, errors) {
  if (schema.$ref) {
    const name = schema.$ref.replace('#/definitions/', '');
    return validate(root.definitions[name], root, v, where, errors);
  }
  if (schema.anyOf) {
    const ok = schema.anyOf.some((s) => {
      const e = [];
      validate(s, root, v, where, e);
      return e.length === 0;
    });
    if (!ok)
      errors.push(`${where}: matches none of anyOf`);
    return;
  }
  const type = Array.isArray(v) ? 'array' : v === null ? 'null' : typeof v;
  if (schema.type && schema.type !== type)
    errors.push(`${where}: ${type}, want ${schema.type}`);
  if ('const' in schema && v !== schema.const)
    errors.push(`${where}: ${JSON.stringify(v)}, want ${JSON.stringify(schema.const)}`);
  if (schema.enum && !schema.enum.includes(v))
    errors.push(`${where}: ${JSON.stringify(v)} not in ${schema.enum}`);
  if (type === 'object') {
    for (const k of schema.required || [])
      if (!(k in v))
        errors.push(`${where}: no ${k}`);
    for (const [k, s] of Object.entries(schema.properties || {}))
      if (k in v)
        validate(s, root, v[k], `${where}.${k}`, errors);
  }
  if (type === 'array' && schema.items)
    v.forEach((x, i) => validate(schema.items, root, x, `${where}[${i}]`, errors));
}

// the fixed profile: three threads; the trainer's hottest function is gemm_inner
const data = path.join(tmp, 'fixed.data');
const file = path.join(tmp, 'fixed.speedscope.json');
execFileSync(mkprofile, ['fixed', data]);
execFileSync(dlflame, ['report', '-i', data, '--speedscope', '-o', file], { stdio: 'ignore' });
const doc = JSON.parse(fs.readFileSync(file, 'utf8'));
const schema = JSON.parse(fs.readFileSync(path.join(release, 'file-format-schema.json'), 'utf8'));
const errors = [];
validate({ $ref: schema.$ref || '#/definitions/FileFormat.File' }, schema, doc, 'file', errors);
check(errors.length === 0, 'the file is valid under speedscope\'s own schema: ' + errors.slice(0, 5).join('; '));
check(schema.$ref === undefined || schema.$ref === '#/definitions/FileFormat.File',
  'the schema\'s root is FileFormat.File');

// the app and the file from 127.0.0.1 (speedscope fetches #profileURL=)
const types = { '.html': 'text/html', '.js': 'text/javascript', '.css': 'text/css',
  '.json': 'application/json', '.png': 'image/png', '.wasm': 'application/wasm' };
const server = http.createServer((req, res) => {
  const url = new URL(req.url, 'http://127.0.0.1');
  const name = url.pathname === '/profile.json' ? file
    : path.join(release, path.normalize(decodeURIComponent(url.pathname)).replace(/^(\.\.[/\\])+/, ''));
  if (!name.startsWith(release) && name !== file) {
    res.writeHead(403);
    res.end();
    return;
  }
  fs.readFile(name, (err, body) => {
    if (err) {
      res.writeHead(404);
      res.end();
      return;
    }
    res.writeHead(200, { 'Content-Type': types[path.extname(name)] || 'application/octet-stream' });
    res.end(body);
  });
});
await new Promise((resolve) => server.listen(0, '127.0.0.1', resolve));
const port = server.address().port;

// a busy machine starves chromium's software WebGL: generous timeouts
const browser = await chromium.launch({
  executablePath: chromiumPath,
  headless: true,
  args: ['--no-sandbox', '--disable-gpu', '--disable-background-networking',
    '--disable-component-update', '--disable-sync', '--no-first-run'],
});
try {
  const page = await browser.newPage({ viewport: { width: 1200, height: 700 } });
  page.setDefaultTimeout(180000);
  const pageErrors = [];
  const dialogs = [];
  page.on('pageerror', (e) => pageErrors.push(e.message));
  page.on('dialog', async (d) => {
    dialogs.push(d.message());
    await d.dismiss();
  });
  await page.goto(`http://127.0.0.1:${port}/index.html#profileURL=/profile.json`,
    { waitUntil: 'commit', timeout: 180000 });
  // loaded: the document is titled after the file's name
  await page.waitForFunction(() => / - speedscope$/.test(document.title), null, { timeout: 180000 });
  check(await page.title() === 'mlp 200 - speedscope',
    'the file\'s name (the recorded command) titles the page: ' + await page.title());
  check(dialogs.length === 0 && pageErrors.length === 0,
    'no alert, no error: ' + JSON.stringify([dialogs, pageErrors]));

  // the profile shown first, and the thread list of the profile selector
  const shown = await page.evaluate(() => [...document.querySelectorAll('span')]
    .map((s) => s.textContent).find((t) => /\(\d+\/\d+\)$/.test(t)));
  check(shown === 'mlp-100/100 (on-CPU) (1/5)', 'the busiest thread is shown first: ' + shown);
  const threads = await page.evaluate(() => [...document.querySelectorAll('tr[title]')]
    .map((tr) => [tr.title, tr.lastElementChild.textContent]));
  check(JSON.stringify(threads) === JSON.stringify([
    ['mlp-100/100 (on-CPU)', '150.00ms'], ['mlp-100/100 (off-CPU)', '25.00ms'],
    ['omp worker-100/101 (on-CPU)', '80.00ms'], ['omp worker-100/101 (off-CPU)', '30.40ms'],
    ['loader-100/102 (off-CPU)', '120.00ms']]), 'the thread list: ' + JSON.stringify(threads));

  // the sandwich view's table: the hottest function by self time
  await page.keyboard.press('3');
  await page.waitForFunction(() => [...document.querySelectorAll('td')]
    .some((td) => td.textContent === 'gemm_inner_[i]' || td.textContent === 'main'), null,
  { timeout: 180000 });
  // the header and the rows are tables of their own; the profile selector's rows have titles
  const [head, body] = await page.evaluate(() => {
    const th = [...document.querySelectorAll('table')].find((t) => /Self/.test(t.textContent));
    return [[...th.querySelectorAll('th')].map((h) => h.textContent.trim()),
      [...document.querySelectorAll('tr:not([title])')]
        .map((tr) => [...tr.querySelectorAll('td')].map((td) => td.textContent.trim()))
        .filter((r) => r.length === 3)];
  });
  const self = head.findIndex((h) => /Self/.test(h));
  const name = head.findIndex((h) => /Name|Symbol/.test(h));
  const ms = (s) => parseFloat(s);
  const hottest = body.slice().sort((a, b) => ms(b[self]) - ms(a[self]))[0];
  check(hottest && hottest[name] === 'gemm_inner_[i]' && /^90\.00ms/.test(hottest[self]),
    'the hottest function of the trainer: ' + JSON.stringify(hottest) + ' of ' + JSON.stringify([head, body]));
  check(body.length > 0 && body[0][name] === 'gemm_inner_[i]', 'it heads the sandwich table (by self)');
  check(body.length === 8, 'the trainer\'s 8 functions: ' + body.length);
  await page.screenshot({ path: path.join(outdir, 'speedscope-browser.png') });
  console.log('screenshot: ' + path.join(outdir, 'speedscope-browser.png'));
} finally {
  await browser.close();
  server.close();
  fs.rmSync(tmp, { recursive: true, force: true });
}
if (failures.length) {
  console.log(`${failures.length} check(s) failed`);
  process.exit(1);
}
console.log('all checks passed');
