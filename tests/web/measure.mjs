// Measures training speed in the page (not a test: docs/WEB.md records its figures). Headless chromium
// trains a preset on the bundled corpus for a number of steps and prints the adapter, the trainer's own
// tokens/s (metrics.jsonl: the window average at the last step), the command's wall time, and how much of it
// the wasm stack spent suspended waiting for the GPU (webgpu.js's wait statistics).
//   node tests/web/measure.mjs --site build-web/site [--preset mini] [--steps 30] [--backend webgpu]
import { parseArgs, serve, launch, openPage } from './browser.mjs';

const args = parseArgs(process.argv.slice(2));
const preset = args.preset || 'mini', steps = Number(args.steps || 30), backend = args.backend || 'webgpu';
const server = await serve(args.site);
const browser = await launch();
try {
  const page = await openPage(browser.context, server.url);
  await page.waitForFunction(() => ['ready', 'error'].includes(document.body.dataset.phase), null, { timeout: 120_000 });
  console.log(await page.textContent('#device'));
  await page.selectOption('#preset', preset);
  await page.fill('#steps', String(steps));
  await page.selectOption('#backend', backend);
  const t0 = Date.now();
  await page.click('#train');
  await page.waitForFunction(() => ['done', 'error', 'stopped'].includes(document.body.dataset.phase), null,
    { timeout: 3_600_000, polling: 500 });
  const seconds = (Date.now() - t0) / 1000;
  const phase = await page.evaluate(() => document.body.dataset.phase);
  if (phase !== 'done') throw new Error(`the run ended in phase ${phase}: ${await page.textContent('#message')}`);
  const m = (await page.evaluate(() => window.edgetrain.metrics)).filter((x) => x.tokens_per_s);
  const last = m[m.length - 1];
  const perStep = (await page.textContent('#log')).match(/(\d+) tokens per step/);
  const w = await page.evaluate(() => window.edgetrain.trainer.M.etWaitStats);
  console.log(`${preset} on ${backend}, ${steps} steps: ${last.tokens_per_s.toFixed(0)} tokens/s at step ${last.step} ` +
    `(trainer's window average); ${seconds.toFixed(1)} s wall for the command including start-up and evaluations; ` +
    `${perStep ? perStep[1] : '?'} tokens per step`);
  console.log(`GPU waits: ${w.waits}, of which ${w.sleeps} suspended the wasm stack (Asyncify) for ${(w.sleepMs / 1000).toFixed(1)} s ` +
    `in all (${(100 * w.sleepMs / 1000 / seconds).toFixed(0)}% of the wall time)`);
} finally {
  await browser.close();
  server.close();
}
