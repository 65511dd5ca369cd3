// edgetrain: the command-line tool. One entry point; each subcommand lives in its own file.
#include <cstdio>
#include <exception>
#include <map>

#include "edgetrain/error.h"
#include "tools/commands.h"

int main(int argc, char** argv) {
  CLI::App app{
      "edgetrain: train and fine-tune transformer language models with 4-bit (q4gsw) weights on the GPU\n"
      "you already have (Vulkan, WebGPU) or on the CPU.\n\n"
      "Start with `edgetrain info` to see the backends and devices found on this machine, and\n"
      "`edgetrain selftest` to check every training kernel against the CPU reference on a backend."};
  app.require_subcommand(1);
  app.set_version_flag("--version", "edgetrain 0.1.0");
  std::map<CLI::App*, edgetrain::cli::Runner> runners;
  auto add = [&](edgetrain::cli::Runner r) { runners[app.get_subcommands({}).back()] = std::move(r); };
  add(edgetrain::cli::add_train(app));
  add(edgetrain::cli::add_generate(app));
  add(edgetrain::cli::add_eval(app));
  add(edgetrain::cli::add_chat(app));
  add(edgetrain::cli::add_info(app));
  add(edgetrain::cli::add_selftest(app));
  add(edgetrain::cli::add_bench(app));
  add(edgetrain::cli::add_convert(app));
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return app.exit(e);
  }
  try {
    for (auto& [sub, run] : runners)
      if (sub->parsed()) return run();
  } catch (const edgetrain::Error& e) {
    std::fprintf(stderr, "edgetrain: error: %s\n", e.what());
    return edgetrain::cli::exit_status(e.kind());
  } catch (const std::exception& e) {
    std::fprintf(stderr, "edgetrain: unexpected error: %s\n", e.what());
    return 1;
  }
  return 0;
}
