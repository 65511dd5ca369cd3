// The page's controller: corpus choice, the train/stop/resume/generate/download buttons, the live loss curve
// (read from the run's metrics.jsonl while the trainer runs) and the messages for what can go wrong.
import { Trainer } from './runner.js';
import { saveCheckpoint, loadCheckpoint } from './store.js';
import { drawChart } from './chart.js';

const $ = (id) => document.getElementById(id);
const BUNDLED = { name: 'kjv-excerpt.txt', label: 'the bundled King James Bible excerpt (its first 6,000 verses: Genesis to Joshua 7)' };
const state = {
  trainer: null,
  corpusPath: null, corpusName: null, corpusBytes: null,   // corpusBytes: a dropped file (kept with its checkpoint)
  out: null,            // the current run folder, e.g. /runs/mini
  preset: null,
  running: false, saving: false,
  metrics: [],          // the run's metrics.jsonl, parsed
  savedCkptTime: 0,     // mtime of the checkpoint last copied to IndexedDB
  stdout: [], stderr: [],
  gpu: null,            // {ok, line, why}
};
window.edgetrain = state;  // for the browser tests and the curious

// ---- messages ----
function message(text, kind = 'error') {
  const m = $('message');
  m.textContent = text;
  m.className = 'message' + (kind === 'info' ? ' info' : '');
  m.hidden = !text;
}
function status(text, phase) {
  $('status').textContent = text;
  if (phase) document.body.dataset.phase = phase;
}
function log(line) {
  const l = $('log');
  l.textContent += line + '\n';
  if (l.textContent.length > 200000) l.textContent = l.textContent.slice(-100000);
  l.scrollTop = l.scrollHeight;
}

// ---- the GPU line ----
async function describeGpu() {
  if (!('gpu' in navigator)) {
    return { ok: false, line: 'no WebGPU in this browser',
      why: 'This browser has no WebGPU (navigator.gpu is missing), so training runs on the CPU backend (the reference ' +
        'kernels in WebAssembly: correct but slow). For the GPU use a browser with WebGPU: Chrome or Edge 113+, ' +
        'Firefox 141+ or Safari 26+ (on Linux, Chrome needs --enable-unsafe-webgpu or chrome://flags).' };
  }
  let adapter = null;
  try { adapter = await navigator.gpu.requestAdapter({ powerPreference: 'high-performance' }); } catch (e) { /* below */ }
  if (!adapter) {
    return { ok: false, line: 'WebGPU present, but no GPU adapter',
      why: 'WebGPU is present but the browser gave no GPU adapter (WebGPU disabled, or this GPU or driver is ' +
        'blocklisted: see chrome://gpu or about:support). Training runs on the CPU backend (slow) instead.' };
  }
  const i = adapter.info || {};
  const name = [i.vendor, i.architecture, i.device, i.description].filter(Boolean).join(' · ') || 'unnamed adapter';
  const mib = (adapter.limits.maxBufferSize / 1048576).toFixed(0);
  return { ok: true, line: `WebGPU adapter: ${name}${i.isFallbackAdapter ? ' (software fallback adapter)' : ''}; ` +
      `max buffer ${mib} MiB, ${adapter.limits.maxComputeInvocationsPerWorkgroup} invocations per workgroup` };
}

// ---- corpus ----
async function useBundled() {
  const r = await fetch(BUNDLED.name);
  if (!r.ok) throw new Error(`could not load ${BUNDLED.name} (HTTP ${r.status})`);
  const bytes = new Uint8Array(await r.arrayBuffer());
  state.trainer.fs.writeFile('/data/' + BUNDLED.name, bytes);
  setCorpus('/data/' + BUNDLED.name, BUNDLED.name, null, `corpus: ${BUNDLED.label}, ${(bytes.length / 1024).toFixed(0)} KiB`);
}
function setCorpus(path, name, bytes, text) {
  Object.assign(state, { corpusPath: path, corpusName: name, corpusBytes: bytes });
  $('corpus').textContent = text;
  $('use-kjv').hidden = !bytes;
}
async function useFile(file) {
  if (!file) return;
  if (state.running) return message('Stop the training before changing the corpus.');
  const bytes = new Uint8Array(await file.arrayBuffer());
  if (bytes.length < 1024) return message(`${file.name} has ${bytes.length} bytes: too small to train on (at least a few KiB of text).`);
  const safe = file.name.replace(/[^A-Za-z0-9._-]/g, '_').slice(0, 80) || 'corpus.txt';
  state.trainer.fs.writeFile('/data/' + safe, bytes);
  setCorpus('/data/' + safe, safe, bytes, `corpus: ${file.name}, ${(bytes.length / 1024).toFixed(0)} KiB (your file, byte-level tokens)`);
  message('');
}

// ---- progress: metrics.jsonl of the running command ----
function readMetrics() {
  const path = state.out + '/metrics.jsonl';
  if (!state.out || !state.trainer.exists(path)) return;
  const lines = state.trainer.read(path, 'utf8').split('\n').filter(Boolean);
  state.metrics = lines.map((l) => { try { return JSON.parse(l); } catch { return null; } }).filter(Boolean);
  const train = state.metrics.filter((m) => 'loss' in m).map((m) => [m.step, m.loss]);
  const val = state.metrics.filter((m) => 'val_loss' in m).map((m) => [m.step, m.val_loss]);
  drawChart($('chart'), train, val);
  const last = state.metrics[state.metrics.length - 1];
  if (last) $('stat-step').textContent = String(last.step);
  if (train.length) $('stat-loss').textContent = train[train.length - 1][1].toFixed(3);
  if (val.length) $('stat-val').textContent = val[val.length - 1][1].toFixed(3);
  const tps = [...state.metrics].reverse().find((m) => m.tokens_per_s);
  if (tps) $('stat-tps').textContent = Math.round(tps.tokens_per_s).toLocaleString('en');
}

// A checkpoint newer than the one in IndexedDB is copied there (the trainer writes it atomically, by rename,
// so the file at this path is always whole).
async function keepCheckpoint() {
  const path = state.out && state.out + '/checkpoint.safetensors';
  if (!path || !state.trainer.exists(path) || state.saving) return;
  const mtime = state.trainer.fs.stat(path).mtime.getTime();
  if (mtime === state.savedCkptTime) return;
  state.saving = true;
  try {
    const val = [...state.metrics].reverse().find((m) => 'val_loss' in m);
    const last = [...state.metrics].reverse().find((m) => 'loss' in m);
    await saveCheckpoint({
      preset: state.preset, step: last ? last.step : 0, steps: Number($('steps').value),
      valLoss: val ? val.val_loss : null, savedAt: new Date().toISOString(),
      checkpoint: state.trainer.read(path), corpusName: state.corpusName, corpus: state.corpusBytes,
      corpusPath: state.corpusPath, out: state.out,
    });
    state.savedCkptTime = mtime;
    await showSaved();
  } catch (e) {
    log(`(the checkpoint could not be kept in this browser's storage: ${e.message || e})`);
  } finally {
    state.saving = false;
  }
}

async function showSaved() {
  let r = null;
  try { r = await loadCheckpoint(); } catch { /* storage unavailable (private window): nothing kept */ }
  $('saved').hidden = !r;
  if (!r) return null;
  $('saved-text').textContent = `Kept in this browser: the ${r.preset} checkpoint of step ${r.step}` +
    (r.valLoss != null ? ` (validation loss ${r.valLoss.toFixed(4)})` : '') +
    `, saved ${new Date(r.savedAt).toLocaleString()} on ${r.corpusName}.`;
  return r;
}

// ---- commands ----
function setBusy(busy) {
  state.running = busy;
  const have = state.out && state.trainer.exists(state.out + '/checkpoint.safetensors');
  $('train').disabled = busy;
  $('stop').disabled = !busy;
  $('resume').disabled = busy || !have;
  for (const id of ['generate', 'download', 'gguf']) $(id).disabled = busy || !have;
  $('saved-restore').disabled = busy;
}

// What a failed command means for the person at the page.
function explain(code) {
  const err = state.stderr.join('\n');
  const M = state.trainer.M;
  if (M.etDeviceLost) {
    const why = M.etDeviceLost;
    M.etDeviceLost = null;
    return `The GPU device was lost (${why}): the driver was reset, the GPU was removed or the browser reclaimed it. ` +
      'What was trained up to the last checkpoint is kept; press Resume to continue on a new device.';
  }
  if (M.etLastGpuError && M.etLastGpuError.type === 'out-of-memory') {
    const m = M.etLastGpuError.message;
    M.etLastGpuError = null;
    return `The GPU ran out of memory for this model (${m}). Choose a smaller preset, or close other tabs that use the GPU.`;
  }
  const line = err.split('\n').reverse().find((l) => l.startsWith('edgetrain: error:')) || err.split('\n').pop() || '';
  return `The command failed (exit status ${code}): ${line.replace('edgetrain: error: ', '')}`;
}

async function command(args, what) {
  state.stdout = []; state.stderr = [];
  log('$ edgetrain ' + args.map((a) => (/\s/.test(a) ? JSON.stringify(a) : a)).join(' '));
  setBusy(true);
  status(what, 'running');
  try {
    const code = await state.trainer.run(args);
    return code;
  } catch (e) {
    message(`The trainer stopped working: ${e.message || e}. Reload the page; the last kept checkpoint stays in this browser.`);
    status('failed', 'error');
    throw e;
  } finally {
    setBusy(false);
  }
}

function trainArgs(resume) {
  const common = ['--out', state.out, '--steps', String($('steps').value), '--backend', $('backend').value,
    '--no-progress', '--sample-tokens', '0', '--checkpoint-every', '50', '--log-every', '10'];
  if (resume) return ['train', '--resume', ...common];
  return ['train', '--preset', state.preset, '--corpus', state.corpusPath, '--seed', String($('seed').value), ...common];
}

function removeTree(path) {
  const FS = state.trainer.fs;
  if (!state.trainer.exists(path)) return;
  for (const name of FS.readdir(path)) {
    if (name === '.' || name === '..') continue;
    const p = path + '/' + name;
    if (FS.isDir(FS.stat(p).mode)) removeTree(p); else FS.unlink(p);
  }
  FS.rmdir(path);
}

async function train(resume) {
  message('');
  if (!resume) {
    state.preset = $('preset').value;
    state.out = '/runs/' + state.preset;
    removeTree(state.out);
    drawChart($('chart'), [], []);
    for (const id of ['stat-step', 'stat-loss', 'stat-val', 'stat-tps']) $(id).textContent = '–';
  }
  state.metrics = [];
  const poll = setInterval(() => { readMetrics(); keepCheckpoint(); }, 400);
  let code;
  try {
    code = await command(trainArgs(resume), resume ? 'resuming…' : `training ${state.preset}…`);
  } finally {
    clearInterval(poll);
  }
  readMetrics();
  while (state.saving) await new Promise((r) => setTimeout(r, 50));
  await keepCheckpoint();
  setBusy(false);
  const last = [...state.metrics].reverse().find((m) => 'loss' in m);
  const val = [...state.metrics].reverse().find((m) => 'val_loss' in m);
  if (code === 0) {
    status(`done: ${last ? last.step : 0} steps, final validation loss ${val ? val.val_loss.toFixed(4) : '?'}`, 'done');
  } else if (code === 143) {
    status(`stopped after step ${last ? last.step : 0}; the checkpoint holds it: Resume continues exactly`, 'stopped');
  } else {
    message(explain(code));
    status('training failed', 'error');
  }
}

async function generate() {
  message('');
  const code = await command(['generate', '--checkpoint', state.out + '/checkpoint.safetensors', '--prompt', $('prompt').value,
    '--max-tokens', String($('gen-tokens').value), '--temperature', String($('temperature').value),
    '--seed', String($('seed').value), '--backend', $('backend').value], 'generating…');
  if (code !== 0) { message(explain(code)); status('generation failed', 'error'); return; }
  $('sample').hidden = false;
  $('sample').textContent = state.stdout.join('\n');
  status('generated', 'done');
}

function download(bytes, name, type) {
  const url = URL.createObjectURL(new Blob([bytes], { type }));
  const a = document.createElement('a');
  a.href = url; a.download = name;
  document.body.appendChild(a); a.click(); a.remove();
  setTimeout(() => URL.revokeObjectURL(url), 10000);
}

function stepOfRun() {
  const last = [...state.metrics].reverse().find((m) => 'loss' in m);
  return last ? last.step : 0;
}

async function exportGguf() {
  message('');
  const out = state.out + '/model-q4_0.gguf';
  const code = await command(['convert', state.out + '/checkpoint.safetensors', out, '--to', 'gguf-q4_0'], 'exporting GGUF…');
  if (code !== 0) { message(explain(code)); status('export failed', 'error'); return; }
  download(state.trainer.read(out), `edgetrain-${state.preset}-step${stepOfRun()}-q4_0.gguf`, 'application/octet-stream');
  status('GGUF exported (Q4_0: the 4-bit codes bit for bit; llama.cpp reads it)', 'done');
}

async function restoreSaved() {
  const r = await loadCheckpoint();
  if (!r) return;
  if (r.corpus) state.trainer.fs.writeFile(r.corpusPath, r.corpus);
  else await useBundled();
  if (r.corpus) setCorpus(r.corpusPath, r.corpusName, r.corpus, `corpus: ${r.corpusName} (kept with the checkpoint)`);
  state.preset = r.preset;
  state.out = r.out;
  $('preset').value = r.preset;
  removeTree(state.out);
  state.trainer.fs.mkdirTree(state.out);
  state.trainer.fs.writeFile(state.out + '/checkpoint.safetensors', r.checkpoint);
  state.savedCkptTime = state.trainer.fs.stat(state.out + '/checkpoint.safetensors').mtime.getTime();
  if (Number($('steps').value) <= r.step) $('steps').value = String(r.step + 100);
  setBusy(false);
  status(`restored the ${r.preset} checkpoint of step ${r.step}: Resume continues it, Generate uses it`, 'done');
}

// ---- start ----
async function main() {
  document.body.dataset.phase = 'loading';
  state.gpu = await describeGpu();
  $('device').textContent = state.gpu.line;
  if (!state.gpu.ok) {
    message(state.gpu.why, 'info');
    $('backend').value = 'cpu';
  }
  state.trainer = await Trainer.load({
    out: (l) => { state.stdout.push(l); log(l); },
    err: (l) => { state.stderr.push(l); log(l); },
  });
  await useBundled();
  await showSaved();
  $('train').onclick = () => train(false);
  $('resume').onclick = () => train(true);
  $('stop').onclick = () => { state.trainer.stop(); status('stopping after this step (the checkpoint is written)…'); };
  $('generate').onclick = generate;
  $('download').onclick = () => download(state.trainer.read(state.out + '/checkpoint.safetensors'),
    `edgetrain-${state.preset}-step${stepOfRun()}.safetensors`, 'application/octet-stream');
  $('gguf').onclick = exportGguf;
  $('saved-download').onclick = async () => {
    const r = await loadCheckpoint();
    if (r) download(r.checkpoint, `edgetrain-${r.preset}-step${r.step}.safetensors`, 'application/octet-stream');
  };
  $('saved-restore').onclick = restoreSaved;
  $('use-kjv').onclick = useBundled;
  $('file').onchange = (e) => useFile(e.target.files[0]);
  const drop = $('drop');
  drop.ondragover = (e) => { e.preventDefault(); drop.classList.add('over'); };
  drop.ondragleave = () => drop.classList.remove('over');
  drop.ondrop = (e) => { e.preventDefault(); drop.classList.remove('over'); useFile(e.dataTransfer.files[0]); };
  window.addEventListener('beforeunload', (e) => {
    // Closing mid-training or mid-save: the browser asks first; what IndexedDB holds stays whole either way.
    if (state.running || state.saving) { e.preventDefault(); e.returnValue = ''; }
  });
  drawChart($('chart'), [], []);
  if ('serviceWorker' in navigator) navigator.serviceWorker.register('sw.js').catch(() => { /* offline reloads only */ });
  setBusy(false);
  status('ready: choose a preset and press Train', 'ready');
}

main().catch((e) => {
  message(`The page could not start: ${e.message || e}`);
  status('failed to start', 'error');
});
