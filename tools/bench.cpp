// `edgetrain bench`: times single ops (the cases of bench_cases.cpp, each recorded once into a program and
// replayed) and whole training steps on a backend, prints a table with GFLOP/s or GB/s, optionally next to a PyTorch peer's figures
// (bench/peer_torch.py writes them under the same case ids), and writes every number to JSON.
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <ctime>
#include <fstream>
#include <functional>
#include <memory>
#include <new>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "edgetrain/backends.h"
#include "edgetrain/graph.h"
#include "edgetrain/model.h"
#include "tools/bench_cases.h"
#include "train/data_parallel.h"
#include "tools/commands.h"

namespace edgetrain::cli {
namespace {

using json = nlohmann::ordered_json;
using Clock = std::chrono::steady_clock;

double seconds_since(Clock::time_point t0) { return std::chrono::duration<double>(Clock::now() - t0).count(); }

std::vector<std::string> split_commas(const std::string& s) {
  std::vector<std::string> out;
  std::stringstream ss(s);
  for (std::string t; std::getline(ss, t, ',');)
    if (!t.empty()) out.push_back(t);
  return out;
}

// ---- timing ----

// CPU time of the whole process (every thread): on a shared machine it moves much less than wall-clock time.
double process_cpu_seconds() {
  timespec ts{};
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
  return static_cast<double>(ts.tv_sec) + 1e-9 * static_cast<double>(ts.tv_nsec);
}

struct Stats {
  double median = 0, min = 0;
  int n = 0;
};
Stats stats(std::vector<double> v) {
  Stats s;
  if (v.empty()) return s;
  std::sort(v.begin(), v.end());
  s.n = static_cast<int>(v.size());
  s.min = v.front();
  s.median = v.size() % 2 ? v[v.size() / 2] : 0.5 * (v[v.size() / 2 - 1] + v[v.size() / 2]);
  return s;
}

struct Flags {
  std::string backend = "auto", device, size, ops, json_file, peer_file, step, mode = "qat", precision = "fp32";
  int reps = 20, warmup = 3, copies = 0, max_copies = 50, threads = 0;
  double target_ms = 25, case_seconds = 20, step_seconds = 120;
  int64_t batch = 16, seq = 0, steps = 20, group_size = 32, vocab = 0;
  bool list = false, checkpoint_activations = false;
};

// Times `reps` replays of prog (after `warmup`), stopping early once `budget` seconds are spent (at least
// one timed replay). Returns seconds per replay.
std::vector<double> time_replays(Program& prog, int warmup, int reps, double budget) {
  auto start = Clock::now();
  for (int i = 0; i < warmup && (i == 0 || seconds_since(start) < budget / 4); ++i) prog.replay();
  std::vector<double> t;
  start = Clock::now();
  for (int i = 0; i < reps; ++i) {
    if (i >= 1 && seconds_since(start) > budget) break;
    auto t0 = Clock::now();
    prog.replay();
    t.push_back(seconds_since(t0));
  }
  return t;
}

struct Result {
  std::string status = "ok", reason;
  int copies = 1;
  Stats per_call;       // seconds per op invocation (replay of `copies` calls / copies)
  double single = 0;    // seconds of one replay of a one-call program (submit overhead included)
  double value = 0, best_value = 0;
};

// A case's id as reported: with fp16 operands the matrix products carry a ":f16" suffix, so their figures
// never pass for the fp32 ones (in --peer files too).
std::string case_id(const Case& c, Precision p) {
  return p == Precision::fp16 && has_f16_flag(c.op) ? c.id() + ":f16" : c.id();
}

Result run_case(Backend& b, const Case& c, const Flags& f, Precision precision) {
  Result res;
  Rng rng(std::hash<std::string>{}(c.id()));
  const bool f16 = precision == Precision::fp16 && has_f16_flag(c.op);
  // A call of the case on fresh random inputs, with the f16 flag under --precision fp16.
  auto make = [&] {
    OpCall call = c.make(b, rng);
    if (f16) set_f16_operands(call);
    return call;
  };
  const OpCall call = make();
  auto one = b.new_program();
  one->record(call);
  one->finalize();
  auto t1 = time_replays(*one, 1, 3, f.case_seconds / 4);
  res.single = stats(t1).min;
  int copies = f.copies > 0 ? f.copies
               : std::clamp(static_cast<int>(std::ceil(f.target_ms * 1e-3 / std::max(res.single, 1e-9))), 1, f.max_copies);
  std::unique_ptr<Program> many;
  Program* prog = one.get();
  if (copies > 1) {
    // A program leaves out a staging whose fp16 operand is still in its scratch (the Vulkan tensor cores'
    // GEMMs, src/vulkan/program.cpp): one call recorded back to back would time its operands' conversion
    // (and a 4-bit weight's dequantization) once for all copies. Two calls with their own inputs, taking
    // turns, overwrite each other's staged operands, so every invocation is timed with its staging.
    const OpCall other = f16 ? make() : call;
    many = b.new_program();
    for (int i = 0; i < copies; ++i) many->record(i % 2 ? other : call);
    many->finalize();
    prog = many.get();
  }
  res.copies = copies;
  auto t = time_replays(*prog, f.warmup, f.reps, f.case_seconds);
  for (double& x : t) x /= copies;
  res.per_call = stats(t);
  res.value = c.work / res.per_call.median / 1e9;
  res.best_value = c.work / res.per_call.min / 1e9;
  return res;
}

// ---- peer figures (bench/peer_torch.py) ----

struct Peer {
  json doc;
  bool loaded = false;
  const json* op(const std::string& id) const {
    if (!loaded || !doc.contains("cases") || !doc["cases"].contains(id)) return nullptr;
    const json& e = doc["cases"][id];
    return e.contains("ms") && e["ms"].is_number() ? &e : nullptr;
  }
  const json* step(const std::string& id) const {
    if (!loaded || !doc.contains("step") || !doc["step"].contains(id)) return nullptr;
    return &doc["step"][id];
  }
};

Peer load_peer(const std::string& file) {
  Peer p;
  if (file.empty()) return p;
  std::ifstream in(file);
  ET_CHECK_KIND(ErrorKind::io, in.good(), "bench: cannot read --peer '", file, "'");
  try {
    p.doc = json::parse(in);
  } catch (const std::exception& e) {
    fail("bench: --peer '", file, "' is not valid JSON: ", e.what());
  }
  p.loaded = true;
  return p;
}

// ---- output ----

struct Report {
  json doc;
  std::string file;
  void save() const {
    if (file.empty()) return;
    std::ofstream out(file + ".tmp");
    out << doc.dump(2) << "\n";
    out.close();
    ET_CHECK_KIND(ErrorKind::io, out.good(), "bench: cannot write '", file, "'");
    std::rename((file + ".tmp").c_str(), file.c_str());
  }
};

void print_list() {
  for (bool small : {false, true}) {
    std::printf("--size %s:\n", small ? "small" : "realistic");
    for (const Case& c : bench_cases(small))
      std::printf("  %-44s %-8s %s\n", c.id().c_str(), c.unit.c_str(), c.model.c_str());
  }
  std::printf("step mode: --step tiny|mini|small|base|llama3.2-1b [--batch B --seq T --steps N --mode qat|qlora|fp32]\n");
}

void run_ops(Backend& b, const Flags& f, bool small, const Peer& peer, Report& rep, Precision precision) {
  auto wanted = split_commas(f.ops);
  std::vector<Case> cases;
  for (Case& c : bench_cases(small)) {
    bool want = wanted.empty() || std::any_of(wanted.begin(), wanted.end(), [&](const std::string& w) {
      return w == c.name() || w == op_name(c.op) || w == c.id() || w == "all";
    });
    if (want) cases.push_back(std::move(c));
  }
  if (cases.empty()) {
    std::printf("no case matches --ops '%s' (see --list)\n", f.ops.c_str());
    return;
  }
  std::printf("\n%-44s %6s %10s %10s %12s %-7s", "case", "copies", "median ms", "min ms", "rate", "unit");
  if (peer.loaded) std::printf(" %10s %12s %8s", "peer ms", "peer rate", "ours/peer");
  std::printf("\n");
  json& out = rep.doc["cases"];
  out = json::array();
  for (const Case& c : cases) {
    const std::string id = case_id(c, precision);
    json e = {{"id", id}, {"op", c.name()}, {"shape", c.shape}, {"unit", c.unit}, {"work", c.work}, {"model", c.model}};
    std::printf("%-44s ", id.c_str());
    std::fflush(stdout);
    std::string skip;
    Result r;
    try {
      if (!b.supports(c.op))
        skip = "the backend does not support " + c.name();
      else
        r = run_case(b, c, f, precision);
    } catch (const Error& err) {
      skip = err.what();
    } catch (const std::bad_alloc&) {
      skip = "out of host memory";
    } catch (const std::exception& err) {
      skip = std::string("unexpected: ") + err.what();
    }
    if (!skip.empty()) {
      std::printf("skipped: %s\n", skip.c_str());
      e["status"] = "skipped";
      e["reason"] = skip;
    } else {
      std::printf("%6d %10.4f %10.4f %12.4g %-7s", r.copies, r.per_call.median * 1e3, r.per_call.min * 1e3, r.value,
                  c.unit.c_str());
      e["status"] = "ok";
      e["copies"] = r.copies;
      e["reps"] = r.per_call.n;
      e["median_ms"] = r.per_call.median * 1e3;
      e["min_ms"] = r.per_call.min * 1e3;
      e["single_replay_ms"] = r.single * 1e3;
      e["value"] = r.value;
      e["best_value"] = r.best_value;
      if (const json* p = peer.op(id)) {
        double pms = (*p)["ms"].get<double>();
        double ratio = pms > 0 ? pms / (r.per_call.median * 1e3) : 0;
        std::printf(" %10.4f %12.4g %7.3gx", pms, c.work / (pms * 1e-3) / 1e9, ratio);
        e["peer"] = *p;
        e["peer_value"] = c.work / (pms * 1e-3) / 1e9;
        e["ratio_ours_over_peer"] = ratio;
      } else if (peer.loaded && peer.doc.contains("cases") && peer.doc["cases"].contains(id)) {
        std::printf(" peer skipped");
        e["peer"] = peer.doc["cases"][id];
      }
      std::printf("\n");
    }
    out.push_back(e);
    rep.save();
    std::fflush(stdout);
  }
  std::printf("\nrate: GFLOP/s or GB/s at the median time of one op invocation; a replay runs `copies` invocations\n"
              "back to back (amortising submit cost) and is divided by copies. Byte/flop models (--list):\n");
  for (const Case& c : cases)
    if (&c == &cases.front() || c.name() != (&c - 1)->name())
      std::printf("  %-22s %s\n", c.name().c_str(), c.model.c_str());
  if (peer.loaded) std::printf("ours/peer = peer median ms / our median ms (> 1: edgetrain is faster)\n");
}

// The model a step benchmark trains: a preset (byte vocabulary), or "llama3.2-1b", random weights of
// Llama-3.2-1B's shape (16 layers, dim 2048, GQA 32/8, ffn 8192, vocabulary 128,256, tied head, rope base
// 500000; its rope-scaling factors change no cost and are left out) with the peer's LoRA: rank 16, alpha
// 32, on all seven projections (bench/peer_torch.py builds the same).
ModelConfig step_config(const std::string& name) {
  if (name != "llama3.2-1b") return ModelConfig::preset(name);
  ModelConfig c;
  c.dim = 2048, c.n_layers = 16, c.n_heads = 32, c.n_kv_heads = 8, c.ffn_dim = 8192, c.vocab = 128256;
  c.max_seq = 1024, c.rope_theta = 500000.0f, c.tied_head = true;
  c.lora_rank = 16, c.lora_alpha = 32.0f, c.lora_targets = "q,k,v,o,gate,up,down";
  return c;
}

void run_step(Backend& b, const Flags& f, const Peer& peer, Report& rep, Precision precision) {
  json e = {{"preset", f.step}, {"mode", f.mode}, {"batch", f.batch}, {"precision", precision_name(precision)},
            {"checkpoint_activations", f.checkpoint_activations}};
  std::string id;
  try {
    ModelConfig cfg = step_config(f.step);
    cfg.mode = mode_from_name(f.mode);
    cfg.group_size = f.group_size;
    if (f.vocab > 0) cfg.vocab = f.vocab;
    int64_t seq = f.seq > 0 ? f.seq : cfg.max_seq;
    cfg.max_seq = std::max(cfg.max_seq, seq);
    cfg.validate();
    id = f.step + ":" + dims({{"B", f.batch}, {"T", seq}, {"V", cfg.vocab}}) +
         (precision == Precision::fp16 ? ":f16" : "");
    e["id"] = id;
    e["seq"] = seq;
    e["config"] = json::parse(cfg.to_json());
    e["parameters"] = cfg.parameter_count();
    std::printf("\ntraining step %s: %s, mode %s, group size %lld, %.2fM parameters, batch %lld x seq %lld\n", id.c_str(),
                f.step.c_str(), f.mode.c_str(), static_cast<long long>(cfg.group_size), cfg.parameter_count() / 1e6,
                static_cast<long long>(f.batch), static_cast<long long>(seq));
    std::fflush(stdout);
    auto t_build = Clock::now();
    Model model(b, cfg);
    model.set_precision(precision);
    model.set_activation_checkpointing(f.checkpoint_activations);
    model.init(1234);
    OptimConfig opt;
    opt.total_steps = f.warmup + f.steps + 1;
    opt.warmup_steps = 2;
    Rng rng(42);
    int64_t n = f.batch * seq;
    std::vector<std::vector<int32_t>> toks(2, std::vector<int32_t>(static_cast<size_t>(n))), labs = toks;
    for (int k = 0; k < 2; ++k)
      for (int64_t i = 0; i < n; ++i) {
        toks[k][i] = static_cast<int32_t>(rng.next() % static_cast<uint64_t>(cfg.vocab));
        labs[k][i] = static_cast<int32_t>(rng.next() % static_cast<uint64_t>(cfg.vocab));
      }
    std::vector<double> total, acc, upd, cpu;
    std::vector<float> losses;
    auto start = Clock::now();
    int warm = std::max(2, f.warmup);  // the first step records the programs
    double first_step = 0;
    for (int64_t s = 1; s <= warm + f.steps; ++s) {
      const double c0 = process_cpu_seconds();
      auto t0 = Clock::now();
      float loss = model.accumulate(toks[s % 2], labs[s % 2], f.batch, seq, n);
      auto t1 = Clock::now();
      model.update(opt, s);
      auto t2 = Clock::now();
      if (s == 1) first_step = std::chrono::duration<double>(t2 - t_build).count();
      if (s > warm) {
        acc.push_back(std::chrono::duration<double>(t1 - t0).count());
        upd.push_back(std::chrono::duration<double>(t2 - t1).count());
        total.push_back(std::chrono::duration<double>(t2 - t0).count());
        cpu.push_back(process_cpu_seconds() - c0);
        losses.push_back(loss);
      }
      if (s >= warm + 1 && seconds_since(start) > f.step_seconds) break;
    }
    Stats st = stats(total), sa = stats(acc), su = stats(upd), sc = stats(cpu);
    double tps = static_cast<double>(n) / st.median;
    std::printf("  setup + first step (recording) %.2f s; %d timed steps after %d warm-up\n", first_step, st.n, warm);
    std::printf("  step median %.2f ms (min %.2f) = accumulate %.2f + update %.2f ms\n", st.median * 1e3, st.min * 1e3,
                sa.median * 1e3, su.median * 1e3);
    std::printf("  process CPU time per step: median %.2f ms (min %.2f), all threads\n", sc.median * 1e3, sc.min * 1e3);
    std::printf("  %.0f tokens/s (best %.0f); loss %.4f -> %.4f (random tokens: ~ln(vocab) = %.2f)\n", tps,
                n / st.min, losses.front(), losses.back(), std::log(static_cast<double>(cfg.vocab)));
    // Peak memory: the tensors alive at once on the backend (model, programs, activations; the estimate
    // train prints before a run is beside it).
    const uint64_t peak = b.tensor_memory().peak;
    const MemoryEstimate est = estimate_training_memory(cfg, f.batch, seq, precision, f.checkpoint_activations,
                                                        target_device(b));
    const uint64_t est_step = est.weights + est.optimizer + est.step;  // bench records no evaluation program
    std::printf("  peak tensor memory %s (estimated before the run: %s)", format_bytes(peak).c_str(),
                format_bytes(est_step).c_str());
    const uint64_t host_peak = &b.host_storage() != &b ? b.host_storage().tensor_memory().peak : 0;
    if (host_peak) std::printf("; frozen fp32 masters in host memory %s", format_bytes(host_peak).c_str());
    std::printf("\n");
    std::printf("  largest tensor a call binds %s (%s)", format_bytes(est.largest_binding).c_str(),
                est.largest_binding_name.c_str());
    if (est.vocab_parts > 1)
      std::printf("; vocabulary in %ld parts: bindings of at most %s", static_cast<long>(est.vocab_parts),
                  format_bytes(b.max_binding_bytes()).c_str());
    std::printf("\n");
    e["vocab_parts"] = est.vocab_parts;
    e["largest_binding_bytes"] = est.largest_binding;
    e["peak_tensor_bytes"] = peak;
    e["host_tensor_bytes"] = host_peak;
    e["estimated_bytes"] = est_step;
    // The host round trip of the gradients that a data-parallel step adds besides the all-reduce
    // (download and upload in sum_gradients' buckets; the values go back unchanged).
    const training::ReduceSize rs = training::reduce_size(model);
    std::vector<double> staging;
    for (int i = 0; i < 3; ++i) {
      const auto s0 = std::chrono::steady_clock::now();
      training::stage_gradients(model, [](float*, size_t) {});
      staging.push_back(std::chrono::duration<double>(std::chrono::steady_clock::now() - s0).count());
    }
    const double stage_s = stats(staging).median;
    std::printf("  gradients' host round trip (data parallel, besides the all-reduce): %.2f ms for %.1f MB down and "
                "up = %.1f GB/s\n", stage_s * 1e3, rs.bytes / 1e6, stage_s > 0 ? 2.0 * rs.bytes / stage_s / 1e9 : 0.0);
    e["grad_bytes"] = rs.bytes;
    e["grad_host_round_trip_ms"] = stage_s * 1e3;
    e["status"] = "ok";
    e["setup_and_first_step_s"] = first_step;
    e["steps_timed"] = st.n;
    e["step_median_ms"] = st.median * 1e3;
    e["step_min_ms"] = st.min * 1e3;
    e["cpu_median_ms"] = sc.median * 1e3;
    e["cpu_min_ms"] = sc.min * 1e3;
    e["accumulate_median_ms"] = sa.median * 1e3;
    e["update_median_ms"] = su.median * 1e3;
    e["tokens_per_s"] = tps;
    e["tokens_per_s_best"] = n / st.min;
    e["loss_first"] = losses.front();
    e["loss_last"] = losses.back();
    if (const json* p = peer.step(id)) {
      e["peer"] = *p;
      for (auto& [variant, v] : p->items()) {
        if (!v.is_object() || !v.contains("tokens_per_s") || !v["tokens_per_s"].is_number()) {
          std::printf("  peer %-14s %s\n", variant.c_str(), v.is_object() && v.contains("skipped") ? v["skipped"].dump().c_str() : "-");
          continue;
        }
        double ptps = v["tokens_per_s"].get<double>();
        std::printf("  peer %-14s %10.0f tokens/s   ours/peer %.2fx\n", variant.c_str(), ptps, ptps > 0 ? tps / ptps : 0.0);
        e["ratio_ours_over_" + variant] = ptps > 0 ? tps / ptps : 0.0;
      }
    } else if (peer.loaded) {
      std::printf("  (the peer file has no step entry '%s')\n", id.c_str());
    }
  } catch (const Error& err) {
    std::printf("  skipped: %s\n", err.what());
    e["status"] = "skipped";
    e["reason"] = err.what();
  } catch (const std::bad_alloc&) {
    std::printf("  skipped: out of host memory\n");
    e["status"] = "skipped";
    e["reason"] = "out of host memory";
  }
  rep.doc["step"] = e;
  rep.save();
  std::fflush(stdout);
}

int run_bench(const Flags& f) {
  if (f.list) {
    print_list();
    return 0;
  }
  ET_CHECK(f.size.empty() || f.size == "small" || f.size == "realistic", "bench: --size must be small or realistic, got '",
           f.size, "'");
  ET_CHECK(f.reps >= 1 && f.warmup >= 0, "bench: --reps must be >= 1 and --warmup >= 0");
  check_precision_flag(f.precision);
  Peer peer = load_peer(f.peer_file);
  BackendOptions bo;
  bo.device = f.device;
  bo.threads = f.threads;
  auto b = make_backend(f.backend, bo);
  bool small = f.size.empty() ? b->name() == "cpu" : f.size == "small";
  Report rep;
  rep.file = f.json_file;
  rep.doc["tool"] = "edgetrain bench";
  rep.doc["version"] = "0.1.0";
#ifdef EDGETRAIN_GIT_DESCRIBE
  rep.doc["git"] = EDGETRAIN_GIT_DESCRIBE;
#endif
  rep.doc["backend"] = b->name();
  rep.doc["device"] = b->device_name();
  if (f.backend == "auto") rep.doc["auto_choice"] = auto_choice_reason();
  rep.doc["host_threads"] = std::thread::hardware_concurrency();
  rep.doc["size"] = small ? "small" : "realistic";
  rep.doc["settings"] = {{"reps", f.reps},           {"warmup", f.warmup},          {"copies", f.copies},
                         {"max_copies", f.max_copies}, {"target_ms", f.target_ms}, {"case_seconds", f.case_seconds}};
  if (peer.loaded && peer.doc.contains("meta")) rep.doc["peer_meta"] = peer.doc["meta"];
  const PrecisionChoice precision = choose_precision(f.precision, *b);
  rep.doc["precision"] = precision_name(precision.precision);
  rep.doc["precision_why"] = precision.why;
  std::printf("edgetrain bench on %s (%s), size %s, reps %d, warmup %d\n", b->name().c_str(), b->device_name().c_str(),
              small ? "small" : "realistic", f.reps, f.warmup);
  std::printf("%s\n", precision.why.c_str());
  if (f.backend == "auto") std::printf("auto: %s\n", auto_choice_reason().c_str());
  if (peer.loaded && peer.doc.contains("meta")) std::printf("peer: %s\n", peer.doc["meta"].dump().c_str());
  rep.save();
  auto t0 = Clock::now();
  bool ops = f.step.empty() || !f.ops.empty();
  if (ops && f.ops != "none") run_ops(*b, f, small, peer, rep, precision.precision);
  if (!f.step.empty()) run_step(*b, f, peer, rep, precision.precision);
  rep.doc["total_seconds"] = seconds_since(t0);
  rep.save();
  std::printf("\ntotal %.1f s%s%s\n", seconds_since(t0), f.json_file.empty() ? "" : "; JSON: ", f.json_file.c_str());
  return 0;
}

}  // namespace

Runner add_bench(CLI::App& app) {
  auto* sub = app.add_subcommand("bench",
      "Benchmark single ops and training steps on a backend. Each op is recorded once into a program that runs\n"
      "it `copies` times back to back, replayed and timed; prints median/min time per invocation and GFLOP/s or\n"
      "GB/s (byte/flop models in --list and docs/BENCHMARKS.md). Examples:\n"
      "  edgetrain bench --backend vulkan --json ours.json --peer peer.json\n"
      "  edgetrain bench --backend cpu --size small --ops mm,linear_q4gsw --reps 5\n"
      "  edgetrain bench --step base --batch 16 --seq 512 --steps 20 --backend vulkan");
  auto f = std::make_shared<Flags>();
  sub->add_option("--backend", f->backend, "auto, cpu, vulkan or webgpu")->capture_default_str();
  sub->add_option("--device", f->device, "Device index or name substring (vulkan/webgpu)");
  sub->add_option("--threads", f->threads, "CPU threads (0 = all cores)")->capture_default_str();
  sub->add_option("--ops", f->ops, "Comma-separated op names or case ids (default all; 'none' with --step)");
  sub->add_option("--size", f->size, "small (CPU-friendly, <= 512) or realistic (default on GPUs)");
  sub->add_option("--reps", f->reps, "Timed replays per case")->capture_default_str();
  sub->add_option("--warmup", f->warmup, "Untimed replays (or steps) first")->capture_default_str();
  sub->add_option("--copies", f->copies, "Op invocations per replay (0 = auto: about --target-ms per replay)")->capture_default_str();
  sub->add_option("--max-copies", f->max_copies, "Upper bound of the automatic copies")->capture_default_str();
  sub->add_option("--target-ms", f->target_ms, "Automatic copies aim at replays this long")->capture_default_str();
  sub->add_option("--case-seconds", f->case_seconds, "Stop timing a case after about this long")->capture_default_str();
  sub->add_option("--json", f->json_file, "Write every number to this JSON file (rewritten after each case)");
  sub->add_option("--peer", f->peer_file, "JSON from bench/peer_torch.py: print its figures and ours/peer");
  sub->add_option("--step", f->step, "Also time training steps of this preset: tiny, mini, small, base, or llama3.2-1b\n"
                  "(random weights of Llama-3.2-1B's shape, qlora rank 16 on all seven projections)");
  sub->add_option("--mode", f->mode, "Step mode: qat, qlora or fp32")->capture_default_str();
  sub->add_option("--precision", f->precision,
                  "fp32, fp16 (the matrix products with fp16 operands: op cases get a :f16 id suffix; steps train\n"
                  "in mixed precision) or auto (fp16 where it is faster)")
      ->capture_default_str();
  sub->add_option("--batch", f->batch, "Step mode: sequences per step")->capture_default_str();
  sub->add_flag("--checkpoint-activations", f->checkpoint_activations,
                "Step mode: recompute each block's activations in the backward (as train --checkpoint-activations)");
  sub->add_option("--seq", f->seq, "Step mode: tokens per sequence (default: the preset's max_seq)");
  sub->add_option("--steps", f->steps, "Step mode: timed steps")->capture_default_str();
  sub->add_option("--group-size", f->group_size, "Step mode: q4gsw group size")->capture_default_str();
  sub->add_option("--vocab", f->vocab, "Step mode: vocabulary size (default: the preset's, 256)");
  sub->add_option("--step-seconds", f->step_seconds, "Step mode: stop timing after about this long")->capture_default_str();
  sub->add_flag("--list", f->list, "Print the benchmark cases and their byte/flop models, then exit");
  return [f] { return run_bench(*f); };
}

}  // namespace edgetrain::cli
