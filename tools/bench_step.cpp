// `edgetrain bench --step`: times whole training steps of a preset (or Llama-3.2-1B's shape) on a backend,
// accumulation and update apart, with the staging's share, next to the peer's step where it has one.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <new>
#include <string>
#include <vector>

#include "edgetrain/model.h"
#include "tools/bench.h"
#include "tools/bench_cases.h"
#include "train/data_parallel.h"

namespace edgetrain::cli::bench {
namespace {

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

}  // namespace

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
      const auto s0 = Clock::now();
      training::stage_gradients(model, [](float*, size_t) {});
      staging.push_back(seconds_since(s0));
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

}  // namespace edgetrain::cli::bench
