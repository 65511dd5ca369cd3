// Shared by the page tests: a static file server on loopback for the built site, and Debian's chromium,
// headless, driven by playwright-core (pinned in web/test/package-lock.json; scripts/setup.sh installs both,
// playwright-core into $EDGETRAIN_DEPS/webtest).
import fs from 'node:fs';
import http from 'node:http';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../..');
const DEPS = process.env.EDGETRAIN_DEPS || path.join(ROOT, '.deps');

// --enable-unsafe-webgpu: Chromium on Linux gives WebGPU only with it; headless it then offers SwiftShader
// (the fallback adapter). The rest keeps a closed network quiet: no background connections, no updates.
export const CHROMIUM_ARGS = ['--no-sandbox', '--enable-unsafe-webgpu', '--disable-background-networking',
  '--disable-component-update', '--disable-sync', '--no-first-run', '--disable-quic',
  '--disable-background-timer-throttling', '--disable-renderer-backgrounding'];

const TYPES = { '.html': 'text/html', '.js': 'text/javascript', '.css': 'text/css', '.wasm': 'application/wasm',
  '.txt': 'text/plain' };

export function parseArgs(argv) {
  const a = {};
  for (let i = 0; i < argv.length; i += 2) a[argv[i].replace(/^--/, '')] = argv[i + 1];
  return a;
}

export async function serve(site) {
  if (!fs.existsSync(path.join(site, 'index.html'))) throw new Error(`${site} has no index.html: run scripts/build-web.sh`);
  const server = http.createServer((req, res) => {
    const url = decodeURIComponent(req.url.split('?')[0]);
    const file = path.join(site, url === '/' ? 'index.html' : url);
    if (!file.startsWith(site)) { res.writeHead(403); res.end(); return; }
    fs.readFile(file, (err, data) => {
      if (err) { res.writeHead(404); res.end(); return; }
      res.writeHead(200, { 'content-type': TYPES[path.extname(file)] || 'application/octet-stream' });
      res.end(data);
    });
  });
  await new Promise((resolve) => server.listen(0, '127.0.0.1', resolve));
  return { url: `http://127.0.0.1:${server.address().port}/`, close: () => server.close() };
}

export async function launch() {
  const pw = path.join(DEPS, 'webtest/node_modules/playwright-core/index.mjs');
  if (!fs.existsSync(pw)) throw new Error(`${pw} is missing: run scripts/setup.sh`);
  const executablePath = process.env.EDGETRAIN_CHROMIUM || '/usr/bin/chromium';
  if (!fs.existsSync(executablePath)) throw new Error(`${executablePath} is missing: run scripts/setup.sh (Debian's chromium)`);
  const { chromium } = await import(pw);
  const profile = fs.mkdtempSync(path.join(os.tmpdir(), 'edgetrain-chromium-'));
  const context = await chromium.launchPersistentContext(profile, {
    executablePath, headless: true, acceptDownloads: true,
    args: CHROMIUM_ARGS, viewport: { width: 1280, height: 900 },
  });
  return {
    context,
    close: async () => { await context.close(); fs.rmSync(profile, { recursive: true, force: true }); },
  };
}

// A page with its console and errors echoed (prefixed), so a failing test shows what the page said.
export async function openPage(context, url, { echo = true } = {}) {
  const page = await context.newPage();
  page.on('pageerror', (e) => console.log(`[page error] ${e.message}`));
  if (echo) page.on('console', (m) => { if (m.type() === 'error') console.log(`[page console] ${m.text()}`); });
  await page.goto(url);
  return page;
}

export function check(cond, what) {
  if (!cond) throw new Error(what);
  console.log(`ok: ${what}`);
}
