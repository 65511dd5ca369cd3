// The trainer in the page: one instance of the wasm build (build-web/edgetrain.js), whose `main` is the
// native CLI's. Each command (train, generate, eval, convert) is one call of main with its arguments; its
// files live in the module's in-memory file system (/data for corpora, /runs for run folders).
// One command at a time: the module has one wasm stack, suspended (Asyncify) while the GPU works.

export class Trainer {
  constructor(module, sink) {
    this.M = module;
    this.sink = sink;      // {out(line), err(line)}: where the running command's lines go
    this.busy = false;
    this.dead = null;      // set when the module aborted: it cannot run again until the page reloads
  }

  // factory: the module's MODULARIZE factory (createEdgetrain: the CLI; createEdgetrainOpTests: the op tests).
  static async load(sink, hooks = {}, factory = globalThis.createEdgetrain) {
    const t = new Trainer(null, sink);
    t.M = await factory({
      print: (line) => t.sink.out(line),
      printErr: (line) => t.sink.err(line),
      onAbort: (what) => { t.dead = String(what); },
      ...hooks,
    });
    for (const dir of ['/data', '/runs']) t.M.FS.mkdir(dir);
    return t;
  }

  get fs() { return this.M.FS; }

  exists(path) {
    try { this.M.FS.stat(path); return true; } catch { return false; }
  }

  read(path, encoding) { return this.M.FS.readFile(path, encoding ? { encoding } : undefined); }

  // Runs `edgetrain ARGS...`; resolves with main's exit status (0 ok, 1 bad input, 3 device, 143 stopped...).
  async run(args) {
    if (this.dead) throw new Error(`the trainer stopped working (${this.dead}); reload the page`);
    if (this.busy) throw new Error('another command is running');
    const M = this.M, argv = ['edgetrain', ...args];
    const ptrs = argv.map((s) => {
      const n = M.lengthBytesUTF8(s) + 1, p = M._malloc(n);
      M.stringToUTF8(s, p, n);
      return p;
    });
    const arr = M._malloc(4 * (ptrs.length + 1));
    ptrs.forEach((p, i) => M.setValue(arr + 4 * i, p, 'i32'));
    M.setValue(arr + 4 * ptrs.length, 0, 'i32');
    this.busy = true;
    try {
      return await M.ccall('main', 'number', ['number', 'number'], [argv.length, arr], { async: true });
    } catch (e) {
      this.dead = this.dead || String(e && e.message || e);
      throw e;
    } finally {
      this.busy = false;
      if (!this.dead) {
        ptrs.forEach((p) => M._free(p));
        M._free(arr);
      }
    }
  }

  // The Stop button: the CLI's own stop request (finishes the step, writes the checkpoint, exits 143).
  stop() { this.M._et_request_stop(); }
}
