// The page end to end in headless chromium (WebGPU on SwiftShader), checked against the native CLI:
//  - tiny trains 30 steps in the page, stopped after a few steps and resumed; its per-step losses equal the
//    native WebGPU backend's (same data, seed) within 1e-4 relative, and the native CPU backend's within the
//    tolerance of the suite's device-vs-CPU training test (1e-4 + 1e-4·|loss|);
//  - the downloaded checkpoint evaluates with the native `edgetrain eval` to the page's final validation loss;
//  - Generate writes text; the GGUF export is a GGUF file the native CLI reads;
//  - the checkpoint kept in IndexedDB survives a reload and downloads the same bytes, and a tab closed during
//    a save leaves a whole checkpoint there;
//  - the messages for no WebGPU, an out-of-memory device and a lost device;
//  - a screenshot of the page after training (ARTIFACTS/web_page.png).
//   node tests/web/page_test.mjs --site build-web/site --cli build/edgetrain --artifacts build/web-artifacts
import { execFile, execFileSync } from 'node:child_process';
import { promisify } from 'node:util';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { parseArgs, serve, launch, openPage, check } from './browser.mjs';

const args = parseArgs(process.argv.slice(2));
const STEPS = 30;
const tmp = fs.mkdtempSync(path.join(os.tmpdir(), 'edgetrain-web-'));
const corpus = path.join(args.site, 'kjv-excerpt.txt');
fs.mkdirSync(args.artifacts, { recursive: true });

const phase = (page, phases, timeout = 900_000) =>
  page.waitForFunction((p) => p.includes(document.body.dataset.phase), phases, { timeout, polling: 200 });
const metrics = (page) => page.evaluate(() => window.edgetrain.metrics);
const cli = (...a) => execFileSync(args.cli, a, { encoding: 'utf8', stdio: ['ignore', 'pipe', 'pipe'] });

// The same run natively, in the background while the page trains (SwiftShader's steps are mostly waits, so
// the two overlap well): resolves with its metrics.jsonl, parsed.
async function nativeRun(backend) {
  const out = path.join(tmp, 'native-' + backend);
  await promisify(execFile)(args.cli, ['train', '--preset', 'tiny', '--corpus', corpus, '--seed', '1', '--out', out,
    '--steps', String(STEPS), '--backend', backend, '--no-progress', '--sample-tokens', '0', '--checkpoint-every', '50',
    '--log-every', '10']);
  return fs.readFileSync(path.join(out, 'metrics.jsonl'), 'utf8').split('\n').filter(Boolean).map((l) => JSON.parse(l));
}

function compare(page, native, what, within) {
  const p = page.filter((m) => 'loss' in m), n = native.filter((m) => 'loss' in m);
  check(p.length === STEPS && n.length === STEPS, `${what}: ${STEPS} per-step losses on both sides (page ${p.length}, native ${n.length})`);
  let worst = 0;
  for (let i = 0; i < STEPS; ++i) {
    if (p[i].step !== n[i].step) throw new Error(`${what}: step ${p[i].step} vs ${n[i].step}`);
    const d = Math.abs(p[i].loss - n[i].loss);
    if (!within(d, n[i].loss)) throw new Error(`${what}: step ${p[i].step}: page loss ${p[i].loss}, native ${n[i].loss}`);
    worst = Math.max(worst, d / Math.abs(n[i].loss));
  }
  console.log(`  largest relative difference: ${worst.toExponential(2)}`);
}

const server = await serve(args.site);
const browser = await launch();
const native = { webgpu: nativeRun('webgpu'), cpu: nativeRun('cpu') };
for (const p of Object.values(native)) p.catch(() => {});  // awaited below; a failure is reported there
try {
  // ---- train, stop, resume ----
  const page = await openPage(browser.context, server.url);
  await phase(page, ['ready', 'error'], 120_000);
  check(await page.evaluate(() => document.body.dataset.phase) === 'ready', 'the page loaded the trainer');
  const device = await page.textContent('#device');
  console.log(`  ${device}`);
  check(device.startsWith('WebGPU adapter:'), 'the device line names the adapter');
  await page.selectOption('#preset', 'tiny');
  await page.fill('#steps', String(STEPS));
  await page.selectOption('#backend', 'webgpu');
  const t0 = Date.now();
  await page.click('#train');
  await page.waitForFunction(() => (window.edgetrain.metrics.filter((m) => 'loss' in m).pop() || {}).step >= 4,
    null, { timeout: 600_000, polling: 100 });
  await page.click('#stop');
  await phase(page, ['stopped', 'error', 'done']);
  check(await page.evaluate(() => document.body.dataset.phase) === 'stopped', 'Stop ends the run with a checkpoint');
  const stoppedAt = (await metrics(page)).filter((m) => 'loss' in m).pop().step;
  check(stoppedAt < STEPS, `stopped after step ${stoppedAt}`);
  await page.click('#resume');
  await phase(page, ['done', 'error']);
  const seconds = (Date.now() - t0) / 1000;
  check(await page.evaluate(() => document.body.dataset.phase) === 'done',
    `Resume trains to step ${STEPS}: ${await page.textContent('#status')}`);
  const pm = await metrics(page);
  const tps = pm.filter((m) => m.tokens_per_s).pop().tokens_per_s;
  console.log(`  page: ${STEPS} steps of tiny in ${seconds.toFixed(0)} s with the stop and resume (${tps.toFixed(0)} tokens/s)`);
  await page.screenshot({ path: path.join(args.artifacts, 'web_page.png'), fullPage: true });
  console.log(`  screenshot: ${path.join(args.artifacts, 'web_page.png')}`);

  // ---- the same run natively ----
  compare(pm, await native.webgpu, 'page vs native webgpu, within 1e-4 relative', (d, l) => d <= 1e-4 * Math.abs(l));
  compare(pm, await native.cpu, 'page vs native cpu, within 1e-4 + 1e-4·|loss|', (d, l) => d <= 1e-4 + 1e-4 * Math.abs(l));

  // ---- download, then evaluate natively ----
  const finalVal = pm.filter((m) => 'val_loss' in m).pop();
  check(finalVal.step === STEPS, `the page evaluated at step ${STEPS}: ${finalVal.val_loss}`);
  const [dl] = await Promise.all([page.waitForEvent('download'), page.click('#download')]);
  const ckpt = path.join(tmp, 'page.safetensors');
  await dl.saveAs(ckpt);
  const seq = Number((await page.textContent('#log')).match(/(\d+) tokens per step/)[1]) / 16;
  const ev = cli('eval', '--checkpoint', ckpt, '--corpus', corpus, '--batch', '16', '--seq', String(seq), '--batches', '8');
  const evLoss = Number(ev.match(/loss ([0-9.]+) nats/)[1]);
  check(Math.abs(evLoss - finalVal.val_loss) <= 1e-4,
    `native eval of the downloaded checkpoint: ${evLoss} = the page's final validation loss ${finalVal.val_loss.toFixed(4)}`);

  // ---- generate, GGUF ----
  await page.fill('#prompt', 'And God said');
  await page.fill('#gen-tokens', '40');
  await page.click('#generate');
  await phase(page, ['done', 'error']);
  const sample = await page.textContent('#sample');
  check(sample.startsWith('And God said') && sample.length > 'And God said'.length + 20, `Generate: ${JSON.stringify(sample)}`);
  const [gg] = await Promise.all([page.waitForEvent('download'), page.click('#gguf')]);
  const gguf = path.join(tmp, 'page.gguf');
  await gg.saveAs(gguf);
  check(fs.readFileSync(gguf).subarray(0, 4).toString() === 'GGUF', 'the GGUF export starts with GGUF');
  check(/tensors/i.test(cli('info', gguf)), 'the native CLI reads the exported GGUF');

  // ---- the checkpoint kept in IndexedDB outlives the page ----
  await page.reload();
  await phase(page, ['ready', 'error'], 120_000);
  check(await page.isVisible('#saved'), `after a reload: ${await page.textContent('#saved-text')}`);
  const [kept] = await Promise.all([page.waitForEvent('download'), page.click('#saved-download')]);
  const keptPath = path.join(tmp, 'kept.safetensors');
  await kept.saveAs(keptPath);
  check(Buffer.compare(fs.readFileSync(keptPath), fs.readFileSync(ckpt)) === 0, 'the kept checkpoint is the downloaded one');

  // ---- a tab closed mid-save: IndexedDB holds a whole checkpoint, the previous one or the new one ----
  // The page's own save (store.js) of a 256 MiB record, the tab closed right after it started.
  const closing = await openPage(browser.context, server.url);
  await phase(closing, ['ready', 'error'], 120_000);
  await closing.evaluate(async () => {
    const { saveCheckpoint } = await import('./store.js');
    window.pendingSave = saveCheckpoint({ preset: 'tiny', step: 7777, steps: 7777, valLoss: null, savedAt: new Date().toISOString(),
      checkpoint: new Uint8Array(256 << 20).fill(7), corpusName: 'kjv-excerpt.txt', corpus: null, corpusPath: '/data/kjv-excerpt.txt',
      out: '/runs/tiny' });
  });
  await closing.close();
  const after = await page.evaluate(async () => {
    const { loadCheckpoint } = await import('./store.js');
    const r = await loadCheckpoint();
    return { step: r.step, length: r.checkpoint.length, allSevens: r.checkpoint.every((b) => b === 7),
      bytes: r.step === 7777 ? null : Array.from(r.checkpoint) };
  });
  const whole = after.step === 7777 ? after.length === 256 << 20 && after.allSevens
    : Buffer.compare(Buffer.from(after.bytes), fs.readFileSync(ckpt)) === 0;
  check(whole, `tab closed mid-save: IndexedDB keeps a whole checkpoint (${after.step === 7777 ? 'the new one: the save had committed' : 'the previous one: the save was aborted'})`);

  // ---- what can go wrong ----
  await page.evaluate(() => { window.edgetrain.trainer.M.etWebgpuFault = 'oom'; });
  await page.selectOption('#preset', 'tiny');
  await page.fill('#steps', '5');
  await page.click('#train');
  await phase(page, ['error', 'done']);
  check(/ran out of memory/.test(await page.textContent('#message')), `out of memory: ${await page.textContent('#message')}`);

  await page.click('#train');
  await page.waitForFunction(() => (window.edgetrain.metrics.filter((m) => 'loss' in m).pop() || {}).step >= 1,
    null, { timeout: 300_000, polling: 100 });
  await page.evaluate(() => window.edgetrain.trainer.M.etLoseDevice());
  await phase(page, ['error', 'done']);
  check(/device was lost/.test(await page.textContent('#message')), `lost device: ${await page.textContent('#message')}`);

  const bare = await browser.context.newPage();
  await bare.addInitScript(() => { delete Navigator.prototype.gpu; });
  await bare.goto(server.url);
  await phase(bare, ['ready', 'error'], 120_000);
  check(/no WebGPU/.test(await bare.textContent('#message')) && await bare.inputValue('#backend') === 'cpu',
    `no WebGPU: ${await bare.textContent('#message')}`);
} catch (e) {
  // What the page said, for the failure's reader.
  for (const p of browser.context.pages()) {
    console.log(`---- ${p.url()}: message ----\n${await p.textContent('#message').catch(() => '')}`);
    console.log(`---- log (end) ----\n${(await p.textContent('#log').catch(() => '')).slice(-4000)}`);
  }
  throw e;
} finally {
  await browser.close();
  server.close();
  fs.rmSync(tmp, { recursive: true, force: true });
}
console.log('web page test passed');
