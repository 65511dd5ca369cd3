// The edgetrain CLI's subcommands: each adds itself to the app and runs when chosen.
#pragma once

#include <CLI/CLI.hpp>
#include <functional>

namespace edgetrain::cli {

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
