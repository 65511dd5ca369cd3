// The edgetrain CLI's subcommands: each adds itself to the app and runs when chosen.
#pragma once

#include <CLI/CLI.hpp>
#include <functional>

#include "edgetrain/error.h"

namespace edgetrain::cli {

// The exit status says what kind of error ended the run, so a script can tell bad input from a device or
// file-system failure without reading the message (README, "What happens when things go wrong"). CLI11's
// own parse errors keep its codes (100 and up).
inline int exit_status(ErrorKind k) {
  switch (k) {
    case ErrorKind::misuse: return 1;
    case ErrorKind::unsupported: return 2;
    case ErrorKind::device: return 3;
    case ErrorKind::io: return 4;
    case ErrorKind::numeric: return 5;
  }
  return 1;
}

// Registers a subcommand; returns the callback to run when it was chosen.
using Runner = std::function<int()>;
Runner add_info(CLI::App& app);
Runner add_selftest(CLI::App& app);
Runner add_train(CLI::App& app);
Runner add_generate(CLI::App& app);
Runner add_eval(CLI::App& app);
Runner add_bench(CLI::App& app);
Runner add_convert(CLI::App& app);

}  // namespace edgetrain::cli
