// llama.cpp (through the pinned node-llama-cpp 3.21.1 CPU build under .deps/llamacpp) as the reference
// consumer of edgetrain's GGUF exports: loads a GGUF file on the CPU, tokenizes a prompt or takes token ids,
// evaluates them in one batch and prints ONE JSON object with, for every position, llama.cpp's
// next-token log-probabilities over the whole vocabulary, and a greedy (argmax) continuation. Or, with
// --texts, only llama.cpp's tokenization of many texts (the model's vocabulary is loaded, not its weights).
//
// Why log-probabilities and not raw logits: node-llama-cpp 3.21.1 never hands the logits buffer to
// JavaScript. Its addon reads llama_get_logits_ith() only inside sampleToken(), which returns the sampler
// chain's candidates as softmax probabilities. With temperature 0 the chain is llama.cpp's greedy sampler
// alone, which selects the argmax and leaves the logits untouched, so the probabilities are
// softmax(raw logits) over all vocab entries, and log(p) = logit - logsumexp(logits): the logits up to one
// constant per position. Consumers compare log_softmax of their own logits against these.
//
// Usage:
//   node tests/llamacpp/llama_ref.mjs --model FILE.gguf (--prompt TEXT | --tokens 1,2,3)
//        [--generate N] [--threads T] [--kv-type f32|f16] [--lora ADAPTER.gguf [--lora-scale S]] [--deps DIR]
//   node tests/llamacpp/llama_ref.mjs --model FILE.gguf --texts TEXTS.json [--deps DIR]
//   node tests/llamacpp/llama_ref.mjs --check [--deps DIR]   (loads the CPU binary, prints its llama.cpp release)
// --texts: a JSON array of strings; prints {"reference", "model", "tokens": [ids of each text]}, each text
// tokenized as llama_tokenize does with add_special and parse_special false (no BOS, control tokens not
// matched in the text).
// --deps: the folder scripts/setup.sh installed node-llama-cpp into (default: $EDGETRAIN_DEPS/llamacpp when
// EDGETRAIN_DEPS is set, else <repo>/.deps/llamacpp). --kv-type: llama.cpp's KV cache type (default f32, so
// an F32 model is computed in fp32 throughout; llama.cpp's own default is f16). --lora: a LoRA adapter GGUF
// applied to the model's context (llama.cpp's --lora; scale S, default 1, multiplies its alpha / rank).
// Nothing is downloaded or
// built at run time: a missing or unusable prebuilt binary is an error.
// Exit status: 0 with the JSON on stdout; 2 for bad arguments; 3 when the install is missing; 1 otherwise.
import { existsSync, readFileSync } from "node:fs";
import path from "node:path";
import { fileURLToPath, pathToFileURL } from "node:url";

const PINNED = "3.21.1";

// A problem with the input (not with how the script was called): one line, exit status 2.
function fail(msg) {
  process.stderr.write(`llama_ref: ${msg}\n`);
  process.exit(2);
}

function usage(msg) {
  process.stderr.write(`llama_ref: ${msg}\n` +
    "usage: node llama_ref.mjs --model FILE.gguf (--prompt TEXT | --tokens 1,2,3) [--generate N] " +
    "[--threads T] [--kv-type f32|f16] [--lora ADAPTER.gguf [--lora-scale S]] [--deps DIR]\n" +
    "       node llama_ref.mjs --model FILE.gguf --texts TEXTS.json [--deps DIR]\n" +
    "       node llama_ref.mjs --check [--deps DIR]\n");
  process.exit(2);
}

function parseArgs(argv) {
  const a = { generate: 0, threads: 1, kvType: "f32" };
  for (let i = 0; i < argv.length; ++i) {
    const flag = argv[i];
    const value = () => {
      if (i + 1 >= argv.length) usage(`${flag} needs a value`);
      return argv[++i];
    };
    const count = (name, min) => {
      const s = value();
      if (!/^\d+$/.test(s) || Number(s) < min) usage(`${name} must be an integer >= ${min}, got '${s}'`);
      return Number(s);
    };
    switch (flag) {
      case "--model": a.model = value(); break;
      case "--prompt": a.prompt = value(); break;
      case "--tokens": {
        const s = value();
        if (!/^\d+(,\d+)*$/.test(s)) usage(`--tokens must be comma-separated token ids, got '${s}'`);
        a.tokens = s.split(",").map(Number);
        break;
      }
      case "--generate": a.generate = count("--generate", 0); break;
      case "--threads": a.threads = count("--threads", 1); break;
      case "--kv-type": {
        a.kvType = value();
        if (a.kvType !== "f32" && a.kvType !== "f16") usage(`--kv-type must be f32 or f16, got '${a.kvType}'`);
        break;
      }
      case "--lora": a.lora = value(); break;
      case "--lora-scale": {
        const s = value();
        a.loraScale = Number(s);
        if (s.trim() === "" || !Number.isFinite(a.loraScale)) usage(`--lora-scale must be a number, got '${s}'`);
        break;
      }
      case "--deps": a.deps = value(); break;
      case "--texts": a.texts = value(); break;
      case "--check": a.check = true; break;
      default: usage(`unknown argument '${flag}'`);
    }
  }
  if (a.check) return a;
  if (!a.model) usage("--model is required");
  if (a.loraScale !== undefined && a.lora === undefined) usage("--lora-scale needs --lora");
  if (a.texts !== undefined) {
    if (a.prompt !== undefined || a.tokens !== undefined) usage("--texts does not go with --prompt or --tokens");
    return a;
  }
  if ((a.prompt === undefined) === (a.tokens === undefined)) usage("give exactly one of --prompt and --tokens");
  if (a.prompt === "") usage("--prompt is empty");
  return a;
}

// The node-llama-cpp entry point of the pinned install (this script lives outside its node_modules, so
// a bare import would not find it).
function locateInstall(depsArg) {
  const here = path.dirname(fileURLToPath(import.meta.url));
  const dir = depsArg ?? (process.env.EDGETRAIN_DEPS ? path.join(process.env.EDGETRAIN_DEPS, "llamacpp")
                                                      : path.join(here, "..", "..", ".deps", "llamacpp"));
  const pkg = path.join(dir, "node_modules", "node-llama-cpp", "package.json");
  if (!existsSync(pkg)) {
    process.stderr.write(`llama_ref: node-llama-cpp is not installed in ${dir} (run scripts/setup.sh)\n`);
    process.exit(3);
  }
  const version = JSON.parse(readFileSync(pkg, "utf8")).version;
  if (version !== PINNED) {
    process.stderr.write(`llama_ref: ${dir} holds node-llama-cpp ${version}, the pin is ${PINNED} (run scripts/setup.sh)\n`);
    process.exit(3);
  }
  return { dir, version, entry: path.join(dir, "node_modules", "node-llama-cpp", "dist", "index.js") };
}

// Probabilities (a Map token -> p from node-llama-cpp) as a dense array of natural logs; a probability that
// underflowed to 0 in llama.cpp's fp32 softmax becomes null (JSON has no -Infinity).
function logProbs(probabilities, nVocab) {
  const out = new Array(nVocab).fill(null);
  for (const [token, p] of probabilities) out[token] = p > 0 ? Math.log(p) : null;
  return out;
}

// llama.cpp's prebuilt CPU build. No network and no compiler at run time: these make node-llama-cpp fail
// instead of downloading llama.cpp's source or building it when the prebuilt binary cannot be used.
async function loadLlama(install, threads) {
  process.env.NODE_LLAMA_CPP_SKIP_DOWNLOAD = "true";
  process.env.NODE_LLAMA_CPP_GPU = "false";
  const { getLlama, LlamaLogLevel } = await import(pathToFileURL(install.entry).href);
  return getLlama({
    gpu: false, build: "never", usePrebuiltBinaries: true, skipDownload: true, progressLogs: false,
    logLevel: LlamaLogLevel.error, maxThreads: threads,
  });
}

// llama.cpp's ids for each text of the JSON array in args.texts.
async function tokenizeTexts(args) {
  if (!existsSync(args.texts)) fail(`texts file ${args.texts} does not exist`);
  let texts;
  try {
    texts = JSON.parse(readFileSync(args.texts, "utf8"));
  } catch (e) {
    fail(`${args.texts} is not JSON: ${e.message}`);
  }
  if (!Array.isArray(texts) || !texts.every((t) => typeof t === "string")) fail(`${args.texts} is not an array of strings`);
  const install = locateInstall(args.deps);
  const llama = await loadLlama(install, 1);
  const model = await llama.loadModel({ modelPath: path.resolve(args.model), vocabOnly: true, useMmap: false })
    .catch((e) => { throw new Error(`llama.cpp cannot load ${args.model}: ${e.message}`); });
  const out = {
    reference: `llama.cpp ${llama.llamaCppRelease.release} via node-llama-cpp ${install.version}`,
    model: path.resolve(args.model),
    tokens: texts.map((t) => Array.from(model.tokenize(t, false))),
  };
  process.stdout.write(JSON.stringify(out) + "\n");
  await model.dispose();
  await llama.dispose();
}

async function main() {
  const args = parseArgs(process.argv.slice(2));
  if (args.texts !== undefined) {
    if (!existsSync(args.model)) fail(`model file ${args.model} does not exist`);
    return tokenizeTexts(args);
  }
  if (args.check) {
    const install = locateInstall(args.deps);
    const llama = await loadLlama(install, 1);
    process.stdout.write(`llama.cpp ${llama.llamaCppRelease.release} (${llama.buildType}, ${llama.gpu === false ? "CPU" : llama.gpu}) via node-llama-cpp ${install.version}\n`);
    await llama.dispose();
    return;
  }
  if (!existsSync(args.model)) fail(`model file ${args.model} does not exist`);
  if (args.lora !== undefined && !existsSync(args.lora)) fail(`LoRA adapter ${args.lora} does not exist`);
  const install = locateInstall(args.deps);
  const llama = await loadLlama(install, args.threads);
  const model = await llama.loadModel({ modelPath: path.resolve(args.model), gpuLayers: 0, useMmap: false })
    .catch((e) => { throw new Error(`llama.cpp cannot load ${args.model}: ${e.message}`); });
  // The vocabulary as GGUF metadata lists it; llama.cpp's own count is the size of the candidate list
  // its sampler sees (every token), checked below.
  const nVocab = model.fileInfo.metadata?.tokenizer?.ggml?.tokens?.length;
  if (!Number.isInteger(nVocab) || nVocab <= 0) throw new Error(`${args.model} has no tokenizer.ggml.tokens`);

  const promptTokens = args.prompt !== undefined ? model.tokenize(args.prompt, false) : undefined;
  const tokens = promptTokens ?? args.tokens;
  if (tokens.length === 0) fail("the prompt gave no tokens");
  for (const t of tokens) if (t >= nVocab) fail(`token id ${t} is outside the vocabulary of ${nVocab} of ${args.model}`);

  const needed = tokens.length + args.generate;
  // One slot more than is ever evaluated (the last generated token is not): when an evaluation fills the
  // context, node-llama-cpp shifts it first (drops its oldest tokens), so with --generate 0 the last
  // position's log-probabilities would come from a shorter history.
  const context = await model.createContext({
    contextSize: needed + 1, batchSize: needed, sequences: 1, threads: args.threads, flashAttention: false,
    experimentalKvCacheKeyType: args.kvType.toUpperCase(), experimentalKvCacheValueType: args.kvType.toUpperCase(),
    ...(args.lora !== undefined
      ? { lora: { adapters: [{ filePath: path.resolve(args.lora), scale: args.loraScale ?? 1 }] } }
      : {}),
  }).catch((e) => { throw new Error(`llama.cpp cannot create a context${args.lora ? ` with LoRA adapter ${args.lora}` : ""}: ${e.message}`); });
  const sequence = context.getSequence();
  // temperature 0: node-llama-cpp's sampler chain is llama.cpp's greedy sampler only (exact argmax, the
  // lowest id on a tie), so the probabilities are those of the raw logits.
  const greedy = { generateNext: { token: true, probabilities: true, options: { temperature: 0 } } };
  const prediction = (r, position) => {
    const probabilities = r?.next?.probabilities;
    if (!probabilities) throw new Error(`llama.cpp returned no probabilities for position ${position}`);
    if (probabilities.size !== nVocab)
      throw new Error(`llama.cpp gave ${probabilities.size} candidates at position ${position}, the vocabulary has ${nVocab}`);
    return { token: r.next.token, logprobs: logProbs(probabilities, nVocab) };
  };
  const results = await sequence.controlledEvaluate(tokens.map((t) => [t, greedy]));
  const positions = tokens.map((_, i) => prediction(results[i], i));

  // Greedy continuation, one token per decode, each evaluated with the KV cache of what came before.
  const generated = [];
  const generatedLogprobs = [];
  let next = positions[positions.length - 1].token;
  for (let i = 0; i < args.generate; ++i) {
    if (next === null) throw new Error("llama.cpp's greedy sampler picked no token");
    generated.push(next);
    if (i + 1 === args.generate) break;
    const [r] = await sequence.controlledEvaluate([[next, greedy]]);
    const p = prediction(r, tokens.length + i);
    generatedLogprobs.push(p.logprobs);
    next = p.token;
  }

  const out = {
    reference: `llama.cpp ${llama.llamaCppRelease.release} via node-llama-cpp ${install.version} (CPU, ${args.threads} thread(s), KV cache ${args.kvType})`,
    model: path.resolve(args.model),
    ...(args.lora !== undefined ? { lora: path.resolve(args.lora), lora_scale: args.loraScale ?? 1 } : {}),
    n_vocab: nVocab,
    ...(promptTokens !== undefined ? { prompt: args.prompt, prompt_tokens: promptTokens } : {}),
    tokens,
    // logprobs[i][v]: log P(token v follows tokens[0..i]) = logit - logsumexp(logits) at position i.
    logprobs_kind: "log_softmax",
    logprobs: positions.map((p) => p.logprobs),
    argmax: positions.map((p) => p.token),
    generated: {
      tokens: generated,
      text: model.detokenize(generated),
      // logprobs after each generated token but the last (the positions tokens.length .. needed-2)
      logprobs: generatedLogprobs,
    },
  };
  process.stdout.write(JSON.stringify(out) + "\n");
  await context.dispose();
  await model.dispose();
  await llama.dispose();
}

main().catch((e) => {
  process.stderr.write(`llama_ref: ${e instanceof Error ? e.message : e}\n`);
  process.exit(1);
});
