// SPDX-License-Identifier: MIT
// The first view of a real flame graph: examples/cnn_train.py recorded (the
// machine's python3-torch), its Python graph drawn, opened in Debian's
// chromium. import torch's dlopen stacks make the graph several windows
// tall; the training step must be in view without scrolling.
//
// Environment: DLFLAME, EXAMPLES, OUTDIR (the screenshot goes there),
// CHROMIUM (default /usr/bin/chromium). Exit 0 pass, 1 fail, 77 skip (no
// browser or no playwright-core: run scripts/setup.sh).
import { execFileSync } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';

const chromiumPath = process.env.CHROMIUM || '/usr/bin/chromium';
let chromium;
try {
  ({ chromium } = await import('playwright-core'));
} catch (e) {
  console.log('SKIP: playwright-core is not installed (scripts/setup.sh runs npm ci in tests/browser)');
  process.exit(77);
}
if (!fs.existsSync(chromiumPath)) {
  console.log(`SKIP: no ${chromiumPath} (apt-get install chromium)`);
  process.exit(77);
}

const dlflame = process.env.DLFLAME;
const outdir = process.env.OUTDIR || '.';
const tmp = fs.mkdtempSync(path.join(os.tmpdir(), 'dlflame-cnn-'));
const failures = [];

function check(ok, what) {
  console.log((ok ? 'ok: ' : 'FAIL: ') + what);
  if (!ok) {
    failures.push(what);
  }
}

// a few steps: the import is what makes the graph tall
const data = path.join(tmp, 'cnn.data');
const svg = path.join(tmp, 'cnn.svg');
execFileSync(dlflame, ['record', '-o', data, '--', '/usr/bin/python3',
  path.join(process.env.EXAMPLES, 'cnn_train.py'), '5', '--threads', '1'], { stdio: 'ignore' });
execFileSync(dlflame, ['report', '-i', data, '--python', '--svg', '-o', svg], { stdio: 'ignore' });

const browser = await chromium.launchPersistentContext(path.join(tmp, 'profile'), {
  executablePath: chromiumPath,
  headless: true,
  viewport: { width: 1220, height: 700 },
  args: ['--no-sandbox', '--disable-gpu', '--disable-background-networking',
    '--disable-component-update', '--disable-sync', '--no-first-run'],
});
try {
  const page = browser.pages()[0] || await browser.newPage();
  const errors = [];
  page.on('pageerror', (e) => errors.push(e.message));
  await page.goto('file://' + svg);
  const view = await page.evaluate(() => {
    const out = { height: document.documentElement.scrollHeight, window: window.innerHeight };
    for (const g of document.getElementById('frames').children) {
      if (g.firstChild.textContent.startsWith('train_step (cnn_train.py) (')) {
        const b = g.children[1].getBoundingClientRect();
        out.step = { top: b.top, bottom: b.bottom, width: b.width };
      }
    }
    return out;
  });
  console.log(`graph ${view.height} px tall, window ${view.window} px, train_step at ` +
    JSON.stringify(view.step));
  check(view.height > view.window, 'the graph is taller than the window');
  check(view.step && view.step.width > 0 && view.step.top >= 0 && view.step.bottom <= view.window,
    'train_step is in the first view');
  check(errors.length === 0, 'no script errors: ' + errors.join('; '));
  await page.screenshot({ path: path.join(outdir, 'flame-browser-cnn.png') });
} finally {
  await browser.close();
  fs.rmSync(tmp, { recursive: true, force: true });
}
if (failures.length) {
  process.exit(1);
}
console.log('all checks passed');
