// `edgetrain bench`: times single ops (the cases of bench_cases.cpp, each recorded once into a program and
// replayed) and whole training steps (bench_step.cpp) on a backend, prints a table with GFLOP/s or GB/s,
// optionally next to a PyTorch peer's figures (bench/peer_torch.py writes them under the same case ids), and
// writes every number to JSON.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <functional>
#include <memory>
#include <new>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "edgetrain/backends.h"
#include "tools/bench.h"
#include "tools/bench_cases.h"
#include "tools/commands.h"

namespace edgetrain::cli {
namespace {

using namespace bench;

std::vector<std::string> split_commas(const std::string& s) {
  std::vector<std::string> out;
  std::stringstream ss(s);
  for (std::string t; std::getline(ss, t, ',');)
    if (!t.empty()) out.push_back(t);
  return out;
}

struct Result {
  std::string status = "ok", reason;
  int copies = 1;
  Stats per_call;       // seconds per op invocation (replay of `copies` calls / copies)
  Stats device;         // the same by the device's timestamps (n = 0 where the backend cannot tell)
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
  std::vector<double> dev;
  auto t = time_replays(*prog, f.warmup, f.reps, f.case_seconds, &dev);
  for (double& x : t) x /= copies;
  for (double& x : dev) x /= copies;
  res.per_call = stats(t);
  if (!dev.empty()) res.device = stats(dev);
  res.value = c.work / res.per_call.median / 1e9;
  res.best_value = c.work / res.per_call.min / 1e9;
  return res;
}

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
  std::vector<std::pair<std::string, Result>> slow_waits;  // wall median > 1.1x the device's
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
      if (r.device.n) e["device_median_ms"] = r.device.median * 1e3, e["device_min_ms"] = r.device.min * 1e3;
      if (r.device.n && r.per_call.median > 1.1 * r.device.median) slow_waits.push_back({id, r});
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
  // Replays whose wall time the device's own time does not account for: the submission or the wait, not
  // the kernels (device time from timestamps at each replay's start and end, where the backend has them).
  for (const auto& [id, r] : slow_waits)
    std::printf("%s: median %.4f ms per invocation by the wall clock, %.4f ms (min %.4f) on the device: the "
                "rest is submission and waiting\n",
                id.c_str(), r.per_call.median * 1e3, r.device.median * 1e3, r.device.min * 1e3);
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
  bool hardware_gpu = false;  // the 2 s ramp after an idle gap (time_replays) is for real GPUs' clocks only
  for (const DeviceInfo& d : list_devices())
    hardware_gpu |= d.backend == b->name() && d.name == b->device_name() && is_real_gpu(d);
  set_ramp_after_idle(hardware_gpu);
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
