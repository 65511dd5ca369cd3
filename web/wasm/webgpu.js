// The browser build's WebGPU binding (an emscripten --js-library): the wgpu* entry points that the native
// backend takes from Dawn (src/webgpu/dawn_loader.h), implemented on navigator.gpu. Handles are small
// integers into WG.objs. Struct fields are read through the offsetof table dawn_browser.cpp exports.
//
// Asynchrony: the backend calls wgpuInstanceWaitAny on every future it makes (adapter and device requests,
// error scopes, buffer mapping, queue completion). That import is in ASYNCIFY_IMPORTS: when the future's
// promise has not settled yet, Asyncify unwinds the wasm stack, the page's event loop runs, and the stack is
// rewound once the promise settles. C callbacks are only ever called from inside a wasm-initiated import in
// the Normal Asyncify state (WaitAny after the rewind, ProcessEvents): never from a promise reaction, where
// the wasm stack may be unwound. Device loss and uncaptured errors are queued and delivered there too.
//
// 64-bit parameters arrive split into (low, high) 32-bit halves (no WASM_BIGINT); a Future is returned as
// its low half with the high half (0) in tempRet0.

mergeInto(LibraryManager.library, {
  $WG__deps: ['malloc', 'free', '$getWasmTableEntry'],
  $WG__postset: 'WG.futures = new Map();',                      // library objects are emitted as source text
  $WG: {
    objs: [null],
    free_ids: [],
    layout: null,
    futures: null,
    next_future: 1,
    pending: [],          // spontaneous callbacks (device lost, uncaptured errors) waiting for delivery
    // Test hooks (the page tests drive them): Module.etWebgpuFault = 'oom' makes the next buffer creation of
    // 1 KiB or more fail as an exhausted device does (an out-of-memory error in its error scope);
    // Module.etLoseDevice() loses the device as a driver reset does.
    injectOom: false,
    simulatedLoss: false,
    // Module.etWaitStats: how often the backend waited, how often that suspended the wasm stack, and the
    // wall time spent suspended (docs/WEB.md uses it to size the cost of Asyncify's suspensions).
    stats: { waits: 0, sleeps: 0, sleepMs: 0 },
    add: function(obj) {
      var id = WG.free_ids.length ? WG.free_ids.pop() : WG.objs.length;
      WG.objs[id] = obj;
      return id;
    },
    get: function(id) { return WG.objs[id]; },
    drop: function(id) {
      if (id && WG.objs[id] !== undefined && WG.objs[id] !== null) {
        WG.objs[id] = null;
        WG.free_ids.push(id);
      }
    },
    L: function(name) {
      if (!WG.layout) WG.layout = JSON.parse(UTF8ToString(Module['_et_wgpu_layout_json']()));
      var e = WG.layout[name];
      if (!e) throw new Error('webgpu.js: no layout entry ' + name);
      return e[0];
    },
    u32: function(p) { return HEAPU32[p >> 2]; },
    u64: function(p) { return HEAPU32[p >> 2] + HEAPU32[(p + 4) >> 2] * 4294967296; },
    f64: function(p) { return HEAPF64[p >> 3]; },
    setU32: function(p, v) { HEAPU32[p >> 2] = v >>> 0; },
    setU64: function(p, v) {
      HEAPU32[p >> 2] = v % 4294967296;
      HEAPU32[(p + 4) >> 2] = Math.floor(v / 4294967296);
    },
    // A StringView at p (wasm32: data pointer, then size_t length; SIZE_MAX means NUL-terminated).
    str: function(p) {
      var data = WG.u32(p + WG.L('StringView.data')), len = WG.u32(p + WG.L('StringView.length'));
      if (!data) return undefined;
      return len === 0xFFFFFFFF ? UTF8ToString(data) : UTF8ToString(data, len);
    },
    // Calls fn(pointer to a temporary StringView holding s).
    withStringView: function(s, fn) {
      s = s || '';
      var n = lengthBytesUTF8(s), svSize = WG.L('StringView');
      var p = _malloc(svSize + n + 1);
      stringToUTF8(s, p + svSize, n + 1);
      WG.setU32(p + WG.L('StringView.data'), p + svSize);
      WG.setU32(p + WG.L('StringView.length'), n);
      try { return fn(p); } finally { _free(p); }
    },
    newString: function(s) {
      s = s || '';
      var n = lengthBytesUTF8(s), p = _malloc(n + 1);
      stringToUTF8(s, p, n + 1);
      return p;
    },
    // The callback-info struct at p: every one with a mode shares RequestAdapterCallbackInfo's layout.
    callbackInfo: function(p) {
      return {
        mode: WG.u32(p + WG.L('RequestAdapterCallbackInfo.mode')),
        fn: WG.u32(p + WG.L('RequestAdapterCallbackInfo.callback')),
        u1: WG.u32(p + WG.L('RequestAdapterCallbackInfo.userdata1')),
        u2: WG.u32(p + WG.L('RequestAdapterCallbackInfo.userdata2')),
      };
    },
    // A future whose promise settles into `deliver(fn, u1, u2)`, run at the next wait on it. The
    // promise must not reject: callers turn failures into a status.
    future: function(infoPtr, promise) {
      var info = WG.callbackInfo(infoPtr);
      var id = WG.next_future++;
      var f = { done: false, deliver: null };
      f.promise = promise.then(function(deliver) {
        f.done = true;
        f.deliver = function() { if (info.fn) deliver(getWasmTableEntry(info.fn), info.u1, info.u2); };
      });
      WG.futures.set(id, f);
      setTempRet0(0);
      return id;
    },
    flushPending: function() {
      while (WG.pending.length) WG.pending.shift()();
    },
    errorType: function(e) {
      if (!e) return 1;                                            // NoError
      if (e.etOutOfMemory || e instanceof GPUOutOfMemoryError) {
        // The backend's message keeps only the text; the page tells the person by the type.
        Module['etLastGpuError'] = { type: 'out-of-memory', message: e.message };
        return 3;
      }
      if (e instanceof GPUValidationError) return 2;
      return 4;                                                    // Internal
    },
    readLimits: function(p, limits) {
      WG.L('StringView');                                          // loads the layout table
      for (var key in WG.layout) {
        if (key.indexOf('Limits.') !== 0) continue;
        var name = key.substring(7), off = WG.layout[key][0], size = WG.layout[key][1];
        var v = limits[name];
        if (size === 8) WG.setU64(p + off, v === undefined ? 18446744073709551615 : v);
        else WG.setU32(p + off, v === undefined ? 0xFFFFFFFF : v);
      }
      return 1;                                                    // Status Success
    },
    label: function(p, field) {
      return p ? WG.str(p + WG.L(field)) : undefined;
    },
  },

  wgpuCreateInstance__deps: ['$WG'],
  wgpuCreateInstance: function(desc) {
    WG.L('StringView');                                            // loads the layout table
    Module['etWaitStats'] = WG.stats;
    Module['etLoseDevice'] = function() {
      WG.simulatedLoss = true;
      Module['etDevice'].destroy();
    };
    return WG.add({ kind: 'instance' });
  },

  wgpuInstanceRequestAdapter__deps: ['$WG'],
  wgpuInstanceRequestAdapter: function(instance, options, info) {
    var opts = {};
    if (options) {
      var pp = WG.u32(options + WG.L('RequestAdapterOptions.powerPreference'));
      if (pp === 1) opts.powerPreference = 'low-power';
      if (pp === 2) opts.powerPreference = 'high-performance';
      if (WG.u32(options + WG.L('RequestAdapterOptions.forceFallbackAdapter'))) opts.forceFallbackAdapter = true;
      if (WG.u32(options + WG.L('RequestAdapterOptions.featureLevel')) === 1) opts.featureLevel = 'compatibility';
    }
    var answer = function(status, handle, message) {
      return function(fn, u1, u2) {
        WG.withStringView(message, function(sv) { fn(status, handle, sv, u1, u2); });
      };
    };
    var p;
    if (typeof navigator === 'undefined' || !navigator.gpu) {
      p = Promise.resolve(answer(3, 0, 'this browser has no WebGPU (navigator.gpu is undefined)'));
    } else {
      p = navigator.gpu.requestAdapter(opts).then(function(a) {
        if (!a) return answer(2, 0, 'navigator.gpu.requestAdapter() gave no adapter');
        return answer(1, WG.add({ kind: 'adapter', obj: a, opts: opts, consumed: false }), '');
      }, function(e) { return answer(3, 0, 'navigator.gpu.requestAdapter() failed: ' + e); });
    }
    return WG.future(info, p);
  },

  wgpuInstanceWaitAny__deps: ['$WG', '$Asyncify'],
  wgpuInstanceWaitAny: function(instance, count, infos, timeoutLo, timeoutHi) {
    var stride = WG.L('FutureWaitInfo'), fo = WG.L('FutureWaitInfo.future'), co = WG.L('FutureWaitInfo.completed');
    var fs = [];
    for (var i = 0; i < count; ++i) {
      var f = WG.futures.get(WG.u32(infos + i * stride + fo));
      if (!f) return 3;                                            // WaitStatus Error: an unknown future
      fs.push(f);
    }
    var anyDone = fs.some(function(f) { return f.done; });
    // On the rewind after a sleep, handleSleep must be reached again (it ends the rewind); nothing may
    // call into wasm before it.
    if (Asyncify.state === Asyncify.State.Rewinding || !anyDone) {
      if (!anyDone && timeoutLo === 0 && timeoutHi === 0) return 2;  // TimedOut
      Asyncify.handleSleep(function(wakeUp) {
        var t0 = performance.now();
        WG.stats.sleeps++;
        Promise.race(fs.map(function(f) { return f.promise; })).then(function() {
          WG.stats.sleepMs += performance.now() - t0;
          wakeUp(0);
        });
      });
      if (Asyncify.state === Asyncify.State.Unwinding) return 0;
    }
    WG.stats.waits++;
    for (var j = 0; j < count; ++j) {
      var id = WG.u32(infos + j * stride + fo), g = WG.futures.get(id);
      if (g && g.done) {
        WG.setU32(infos + j * stride + co, 1);
        WG.futures.delete(id);
        g.deliver();
      }
    }
    WG.flushPending();
    return 1;                                                      // Success
  },

  wgpuInstanceProcessEvents__deps: ['$WG'],
  wgpuInstanceProcessEvents: function(instance) { WG.flushPending(); },

  wgpuInstanceRelease__deps: ['$WG'],
  wgpuInstanceRelease: function(instance) { WG.drop(instance); },

  wgpuAdapterGetInfo__deps: ['$WG'],
  wgpuAdapterGetInfo: function(adapter, p) {
    var a = WG.get(adapter).obj, info = a.info || {};
    var sv = function(field, s) {
      var q = p + WG.L('AdapterInfo.' + field);
      WG.setU32(q + WG.L('StringView.data'), WG.newString(s));
      WG.setU32(q + WG.L('StringView.length'), lengthBytesUTF8(s || ''));
    };
    sv('vendor', info.vendor);
    sv('architecture', info.architecture);
    // Browsers often leave `device` empty (privacy); the description, else vendor + architecture, names it.
    sv('device', info.device || info.description || ((info.vendor || '') + ' ' + (info.architecture || '')).trim());
    sv('description', info.description);
    WG.setU32(p + WG.L('AdapterInfo.backendType'), 0);            // Undefined: the browser does not say
    WG.setU32(p + WG.L('AdapterInfo.adapterType'), info.isFallbackAdapter || a.isFallbackAdapter ? 3 : 4);
    WG.setU32(p + WG.L('AdapterInfo.vendorID'), 0);
    WG.setU32(p + WG.L('AdapterInfo.deviceID'), 0);
    WG.setU32(p + WG.L('AdapterInfo.subgroupMinSize'), info.subgroupMinSize || 0);
    WG.setU32(p + WG.L('AdapterInfo.subgroupMaxSize'), info.subgroupMaxSize || 0);
    return 1;
  },

  wgpuAdapterInfoFreeMembers__deps: ['$WG'],
  wgpuAdapterInfoFreeMembers: function(p) {                       // AdapterInfo by value: a pointer to a copy
    ['vendor', 'architecture', 'device', 'description'].forEach(function(f) {
      _free(WG.u32(p + WG.L('AdapterInfo.' + f) + WG.L('StringView.data')));
    });
  },

  wgpuAdapterGetLimits__deps: ['$WG'],
  wgpuAdapterGetLimits: function(adapter, p) { return WG.readLimits(p, WG.get(adapter).obj.limits); },

  // Never called here (no browser offers Dawn's experimental subgroup matrices), but the table binds it.
  wgpuAdapterPropertiesSubgroupMatrixConfigsFreeMembers: function(p) {},

  // The one feature the backend asks about: ShaderF16 (0xA), 'shader-f16' in the browser.
  wgpuAdapterHasFeature__deps: ['$WG'],
  wgpuAdapterHasFeature: function(adapter, feature) {
    return feature === 0xA && WG.get(adapter).obj.features.has('shader-f16') ? 1 : 0;
  },

  wgpuAdapterRequestDevice__deps: ['$WG'],
  wgpuAdapterRequestDevice: function(adapter, desc, info) {
    var rec = WG.get(adapter), a = rec.obj;
    var required = {};
    var lp = WG.u32(desc + WG.L('DeviceDescriptor.requiredLimits'));
    if (lp) {
      for (var key in WG.layout) {
        if (key.indexOf('Limits.') !== 0) continue;
        var name = key.substring(7), off = WG.layout[key][0], size = WG.layout[key][1];
        if (!(name in a.limits)) continue;                          // a limit this browser does not know
        var v = size === 8 ? WG.u64(lp + off) : WG.u32(lp + off);
        if (size === 8 ? v >= 18446744073709551615 : v === 0xFFFFFFFF) continue;
        required[name] = v;
      }
    }
    var features = [];
    var nf = WG.u32(desc + WG.L('DeviceDescriptor.requiredFeatureCount'));
    var fp = WG.u32(desc + WG.L('DeviceDescriptor.requiredFeatures'));
    for (var i = 0; i < nf; i++) {
      if (WG.u32(fp + 4 * i) === 0xA) features.push('shader-f16');
    }
    var lostInfo = WG.callbackInfo(desc + WG.L('DeviceDescriptor.deviceLostCallbackInfo'));
    var ue = desc + WG.L('DeviceDescriptor.uncapturedErrorCallbackInfo');
    var errFn = WG.u32(ue + WG.L('UncapturedErrorCallbackInfo.callback'));
    var errU1 = WG.u32(ue + WG.L('UncapturedErrorCallbackInfo.userdata1'));
    var errU2 = WG.u32(ue + WG.L('UncapturedErrorCallbackInfo.userdata2'));
    var label = WG.label(desc, 'DeviceDescriptor.label');
    // A browser's adapter makes one device; the backend keeps its adapter for the process (a native adapter
    // makes any number) and the page runs one command after another in it: each device after the first comes
    // from a fresh adapter asked for with the same options.
    var adapterP = rec.consumed ? navigator.gpu.requestAdapter(rec.opts).then(function(fresh) {
      if (!fresh) throw new Error('navigator.gpu.requestAdapter() gave no adapter for a new device');
      rec.obj = fresh;
      return fresh;
    }) : Promise.resolve(a);
    rec.consumed = true;
    var p = adapterP.then(function(ad) { return ad.requestDevice({ label: label, requiredLimits: required, requiredFeatures: features }); }).then(function(device) {
      var handle = WG.add({ kind: 'device', obj: device });
      // The callbacks take `const Device*`: a cell holding the handle, kept for the device's life.
      var cell = _malloc(4);
      WG.setU32(cell, handle);
      device.lost.then(function(why) {
        // Destroyed: the backend's own teardown at the end of a command; anything else is a real loss.
        var reason = why.reason === 'destroyed' && !WG.simulatedLoss ? 2 : 1;
        WG.simulatedLoss = false;
        if (reason !== 2) Module['etDeviceLost'] = why.message || why.reason || 'unknown reason';
        if (!lostInfo.fn) return;
        WG.pending.push(function() {
          WG.withStringView(why.message, function(sv) {
            getWasmTableEntry(lostInfo.fn)(cell, reason, sv, lostInfo.u1, lostInfo.u2);
          });
        });
      });
      device.onuncapturederror = function(ev) {
        if (!errFn) return;
        var e = ev.error;
        WG.pending.push(function() {
          WG.withStringView(e.message, function(sv) { getWasmTableEntry(errFn)(cell, WG.errorType(e), sv, errU1, errU2); });
        });
      };
      Module['etDevice'] = device;                                 // for the page's device line and test hooks
      return function(fn, u1, u2) { WG.withStringView('', function(sv) { fn(1, handle, sv, u1, u2); }); };
    }, function(e) {
      return function(fn, u1, u2) { WG.withStringView(String(e), function(sv) { fn(3, 0, sv, u1, u2); }); };
    });
    return WG.future(info, p);
  },

  wgpuAdapterRelease__deps: ['$WG'],
  wgpuAdapterRelease: function(adapter) { WG.drop(adapter); },

  wgpuDeviceGetQueue__deps: ['$WG'],
  wgpuDeviceGetQueue: function(device) { return WG.add({ kind: 'queue', obj: WG.get(device).obj.queue }); },

  wgpuDeviceGetLimits__deps: ['$WG'],
  wgpuDeviceGetLimits: function(device, p) { return WG.readLimits(p, WG.get(device).obj.limits); },

  wgpuDeviceCreateBuffer__deps: ['$WG'],
  wgpuDeviceCreateBuffer: function(device, desc) {
    var d = WG.get(device).obj;
    var size = WG.u64(desc + WG.L('BufferDescriptor.size'));
    if (Module['etWebgpuFault'] === 'oom' && size >= 1024) {
      Module['etWebgpuFault'] = null;
      WG.injectOom = true;                                         // answered by the next error-scope pop
    }
    var b = d.createBuffer({
      label: WG.label(desc, 'BufferDescriptor.label'),
      usage: WG.u64(desc + WG.L('BufferDescriptor.usage')),
      size: size,
      mappedAtCreation: !!WG.u32(desc + WG.L('BufferDescriptor.mappedAtCreation')),
    });
    return WG.add({ kind: 'buffer', obj: b, mapped: 0 });
  },

  wgpuDeviceCreateShaderModule__deps: ['$WG'],
  wgpuDeviceCreateShaderModule: function(device, desc) {
    var code;
    for (var c = WG.u32(desc + WG.L('LabelDescriptor.nextInChain')); c; c = WG.u32(c + WG.L('ChainedStruct.next')))
      if (WG.u32(c + WG.L('ChainedStruct.sType')) === 2) code = WG.str(c + WG.L('ShaderSourceWGSL.code'));
    var m = WG.get(device).obj.createShaderModule({ label: WG.label(desc, 'LabelDescriptor.label'), code: code || '' });
    return WG.add({ kind: 'shader', obj: m });
  },

  wgpuDeviceCreateBindGroupLayout__deps: ['$WG'],
  wgpuDeviceCreateBindGroupLayout: function(device, desc) {
    var n = WG.u32(desc + WG.L('BindGroupLayoutDescriptor.entryCount'));
    var base = WG.u32(desc + WG.L('BindGroupLayoutDescriptor.entries')), stride = WG.L('BindGroupLayoutEntry');
    var types = { 2: 'uniform', 3: 'storage', 4: 'read-only-storage' };
    var entries = [];
    for (var i = 0; i < n; ++i) {
      var e = base + i * stride, b = e + WG.L('BindGroupLayoutEntry.buffer');
      entries.push({
        binding: WG.u32(e + WG.L('BindGroupLayoutEntry.binding')),
        visibility: WG.u64(e + WG.L('BindGroupLayoutEntry.visibility')),
        buffer: {
          type: types[WG.u32(b + WG.L('BufferBindingLayout.type'))],
          hasDynamicOffset: !!WG.u32(b + WG.L('BufferBindingLayout.hasDynamicOffset')),
          minBindingSize: WG.u64(b + WG.L('BufferBindingLayout.minBindingSize')),
        },
      });
    }
    var l = WG.get(device).obj.createBindGroupLayout({ label: WG.label(desc, 'BindGroupLayoutDescriptor.label'), entries: entries });
    return WG.add({ kind: 'bgl', obj: l });
  },

  wgpuDeviceCreatePipelineLayout__deps: ['$WG'],
  wgpuDeviceCreatePipelineLayout: function(device, desc) {
    var n = WG.u32(desc + WG.L('PipelineLayoutDescriptor.bindGroupLayoutCount'));
    var p = WG.u32(desc + WG.L('PipelineLayoutDescriptor.bindGroupLayouts'));
    var layouts = [];
    for (var i = 0; i < n; ++i) layouts.push(WG.get(WG.u32(p + 4 * i)).obj);
    return WG.add({ kind: 'pl', obj: WG.get(device).obj.createPipelineLayout({ bindGroupLayouts: layouts }) });
  },

  wgpuDeviceCreateComputePipeline__deps: ['$WG'],
  wgpuDeviceCreateComputePipeline: function(device, desc) {
    var cs = desc + WG.L('ComputePipelineDescriptor.compute');
    var constants = {};
    var n = WG.u32(cs + WG.L('ComputeState.constantCount')), base = WG.u32(cs + WG.L('ComputeState.constants'));
    for (var i = 0; i < n; ++i) {
      var e = base + i * WG.L('ConstantEntry');
      constants[WG.str(e + WG.L('ConstantEntry.key'))] = WG.f64(e + WG.L('ConstantEntry.value'));
    }
    var p = WG.get(device).obj.createComputePipeline({
      label: WG.label(desc, 'ComputePipelineDescriptor.label'),
      layout: WG.get(WG.u32(desc + WG.L('ComputePipelineDescriptor.layout'))).obj,
      compute: {
        module: WG.get(WG.u32(cs + WG.L('ComputeState.module'))).obj,
        entryPoint: WG.str(cs + WG.L('ComputeState.entryPoint')),
        constants: constants,
      },
    });
    return WG.add({ kind: 'pipeline', obj: p });
  },

  wgpuDeviceCreateBindGroup__deps: ['$WG'],
  wgpuDeviceCreateBindGroup: function(device, desc) {
    var n = WG.u32(desc + WG.L('BindGroupDescriptor.entryCount'));
    var base = WG.u32(desc + WG.L('BindGroupDescriptor.entries')), stride = WG.L('BindGroupEntry');
    var entries = [];
    for (var i = 0; i < n; ++i) {
      var e = base + i * stride;
      var res = { buffer: WG.get(WG.u32(e + WG.L('BindGroupEntry.buffer'))).obj,
                  offset: WG.u64(e + WG.L('BindGroupEntry.offset')) };
      var size = WG.u64(e + WG.L('BindGroupEntry.size'));
      if (size < 18446744073709551615) res.size = size;            // WGPU_WHOLE_SIZE: the rest of the buffer
      entries.push({ binding: WG.u32(e + WG.L('BindGroupEntry.binding')), resource: res });
    }
    var g = WG.get(device).obj.createBindGroup({
      label: WG.label(desc, 'BindGroupDescriptor.label'),
      layout: WG.get(WG.u32(desc + WG.L('BindGroupDescriptor.layout'))).obj,
      entries: entries,
    });
    return WG.add({ kind: 'bindgroup', obj: g });
  },

  wgpuDeviceCreateCommandEncoder__deps: ['$WG'],
  wgpuDeviceCreateCommandEncoder: function(device, desc) {
    return WG.add({ kind: 'encoder', obj: WG.get(device).obj.createCommandEncoder() });
  },

  wgpuDevicePushErrorScope__deps: ['$WG'],
  wgpuDevicePushErrorScope: function(device, filter) {
    WG.get(device).obj.pushErrorScope({ 1: 'validation', 2: 'out-of-memory', 3: 'internal' }[filter]);
  },

  wgpuDevicePopErrorScope__deps: ['$WG'],
  wgpuDevicePopErrorScope: function(device, info) {
    var inject = WG.injectOom;                                     // the first pop is the out-of-memory scope
    WG.injectOom = false;
    var p = WG.get(device).obj.popErrorScope().then(function(e) {
      if (inject) e = { etOutOfMemory: true, message: 'Out of memory (simulated: Module.etWebgpuFault)' };
      return function(fn, u1, u2) {
        WG.withStringView(e ? e.message : '', function(sv) { fn(1, WG.errorType(e), sv, u1, u2); });
      };
    }, function(e) {
      return function(fn, u1, u2) { WG.withStringView(String(e), function(sv) { fn(2, 1, sv, u1, u2); }); };
    });
    return WG.future(info, p);
  },

  wgpuDeviceDestroy__deps: ['$WG'],
  wgpuDeviceDestroy: function(device) { WG.get(device).obj.destroy(); },

  wgpuDeviceRelease__deps: ['$WG'],
  wgpuDeviceRelease: function(device) { WG.drop(device); },

  wgpuBufferMapAsync__deps: ['$WG'],
  wgpuBufferMapAsync: function(buffer, modeLo, modeHi, offset, size, info) {
    var b = WG.get(buffer).obj;
    var p = b.mapAsync(modeLo /* MapMode.Read = 1, as in the browser */, offset, size).then(function() {
      return function(fn, u1, u2) { WG.withStringView('', function(sv) { fn(1, sv, u1, u2); }); };
    }, function(e) {
      return function(fn, u1, u2) { WG.withStringView('mapAsync failed: ' + e, function(sv) { fn(3, sv, u1, u2); }); };
    });
    return WG.future(info, p);
  },

  wgpuBufferGetConstMappedRange__deps: ['$WG'],
  wgpuBufferGetConstMappedRange: function(buffer, offset, size) {
    var e = WG.get(buffer);
    var bytes = new Uint8Array(e.obj.getMappedRange(offset, size));
    var p = _malloc(Math.max(1, size));
    HEAPU8.set(bytes, p);
    e.mapped = p;
    return p;
  },

  wgpuBufferUnmap__deps: ['$WG'],
  wgpuBufferUnmap: function(buffer) {
    var e = WG.get(buffer);
    e.obj.unmap();
    if (e.mapped) _free(e.mapped);
    e.mapped = 0;
  },

  wgpuBufferDestroy__deps: ['$WG'],
  wgpuBufferDestroy: function(buffer) { WG.get(buffer).obj.destroy(); },

  wgpuBufferRelease__deps: ['$WG'],
  wgpuBufferRelease: function(buffer) { WG.drop(buffer); },

  wgpuQueueSubmit__deps: ['$WG'],
  wgpuQueueSubmit: function(queue, count, buffers) {
    var cbs = [];
    for (var i = 0; i < count; ++i) cbs.push(WG.get(WG.u32(buffers + 4 * i)).obj);
    WG.get(queue).obj.submit(cbs);
  },

  wgpuQueueWriteBuffer__deps: ['$WG'],
  wgpuQueueWriteBuffer: function(queue, buffer, offLo, offHi, data, size) {
    WG.get(queue).obj.writeBuffer(WG.get(buffer).obj, offLo + offHi * 4294967296, HEAPU8, data, size);
  },

  wgpuQueueOnSubmittedWorkDone__deps: ['$WG'],
  wgpuQueueOnSubmittedWorkDone: function(queue, info) {
    var p = WG.get(queue).obj.onSubmittedWorkDone().then(function() {
      return function(fn, u1, u2) { WG.withStringView('', function(sv) { fn(1, sv, u1, u2); }); };
    }, function(e) {
      return function(fn, u1, u2) { WG.withStringView(String(e), function(sv) { fn(3, sv, u1, u2); }); };
    });
    return WG.future(info, p);
  },

  wgpuQueueRelease__deps: ['$WG'],
  wgpuQueueRelease: function(queue) { WG.drop(queue); },

  wgpuCommandEncoderBeginComputePass__deps: ['$WG'],
  wgpuCommandEncoderBeginComputePass: function(encoder, desc) {
    return WG.add({ kind: 'pass', obj: WG.get(encoder).obj.beginComputePass() });
  },

  wgpuCommandEncoderCopyBufferToBuffer__deps: ['$WG'],
  wgpuCommandEncoderCopyBufferToBuffer: function(encoder, src, soLo, soHi, dst, doLo, doHi, szLo, szHi) {
    WG.get(encoder).obj.copyBufferToBuffer(WG.get(src).obj, soLo + soHi * 4294967296, WG.get(dst).obj,
                                           doLo + doHi * 4294967296, szLo + szHi * 4294967296);
  },

  wgpuCommandEncoderFinish__deps: ['$WG'],
  wgpuCommandEncoderFinish: function(encoder, desc) {
    return WG.add({ kind: 'commands', obj: WG.get(encoder).obj.finish() });
  },

  wgpuCommandEncoderRelease__deps: ['$WG'],
  wgpuCommandEncoderRelease: function(encoder) { WG.drop(encoder); },

  wgpuCommandBufferRelease__deps: ['$WG'],
  wgpuCommandBufferRelease: function(cb) { WG.drop(cb); },

  wgpuComputePassEncoderSetPipeline__deps: ['$WG'],
  wgpuComputePassEncoderSetPipeline: function(pass, pipeline) { WG.get(pass).obj.setPipeline(WG.get(pipeline).obj); },

  wgpuComputePassEncoderSetBindGroup__deps: ['$WG'],
  wgpuComputePassEncoderSetBindGroup: function(pass, index, group, count, offsets) {
    var dyn = [];
    for (var i = 0; i < count; ++i) dyn.push(WG.u32(offsets + 4 * i));
    WG.get(pass).obj.setBindGroup(index, group ? WG.get(group).obj : null, dyn);
  },

  wgpuComputePassEncoderDispatchWorkgroups__deps: ['$WG'],
  wgpuComputePassEncoderDispatchWorkgroups: function(pass, x, y, z) { WG.get(pass).obj.dispatchWorkgroups(x, y, z); },

  wgpuComputePassEncoderEnd__deps: ['$WG'],
  wgpuComputePassEncoderEnd: function(pass) { WG.get(pass).obj.end(); },

  wgpuComputePassEncoderRelease__deps: ['$WG'],
  wgpuComputePassEncoderRelease: function(pass) { WG.drop(pass); },

  wgpuShaderModuleRelease__deps: ['$WG'],
  wgpuShaderModuleRelease: function(m) { WG.drop(m); },

  wgpuBindGroupLayoutRelease__deps: ['$WG'],
  wgpuBindGroupLayoutRelease: function(l) { WG.drop(l); },

  wgpuPipelineLayoutRelease__deps: ['$WG'],
  wgpuPipelineLayoutRelease: function(l) { WG.drop(l); },

  wgpuComputePipelineRelease__deps: ['$WG'],
  wgpuComputePipelineRelease: function(p) { WG.drop(p); },

  wgpuBindGroupRelease__deps: ['$WG'],
  wgpuBindGroupRelease: function(g) { WG.drop(g); },
});
