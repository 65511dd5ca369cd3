// `edgetrain info [FILE]`: a model file's contents; without FILE, the devices and backends found, what auto
// would choose (backend, and precision on each backend), and the op catalogue with the backends that run
// each op.
#include <cstdio>
#include <memory>
#include <string>
#include <vector>

#include "edgetrain/backends.h"
#include "edgetrain/interop.h"
#include "edgetrain/precision.h"
#include "tools/commands.h"

namespace edgetrain::cli {

Runner add_info(CLI::App& app) {
  auto* sub = app.add_subcommand("info", "List backends, devices and the op catalogue (which backend runs which op)");
  auto ops_only = std::make_shared<bool>(false);
  sub->add_flag("--ops", *ops_only, "Print only the op catalogue");
  auto file = std::make_shared<std::string>();
  sub->add_option("FILE", *file, "Describe this model file instead (.gguf, .safetensors, Hugging Face folder)");
  return [ops_only, file] {
    if (!file->empty()) {
      std::printf("%s", describe_model_file(*file).c_str());
      return 0;
    }
    std::vector<DeviceInfo> devices = list_devices();
    if (!*ops_only) {
      std::printf("edgetrain 0.1.0\n\nDevices:\n");
      for (const DeviceInfo& d : devices)
        std::printf("  %-7s %-11s %s%s\n          %s\n", d.backend.c_str(), d.kind.c_str(), d.name.c_str(),
                    d.usable ? "" : "  [unusable]", d.details.c_str());
    }
    // One live backend per usable kind, to ask what it supports.
    std::vector<std::unique_ptr<Backend>> live;
    std::vector<std::string> names;
    for (const char* n : {"cpu", "vulkan", "webgpu"}) {
      bool usable = false;
      for (const DeviceInfo& d : devices) usable |= d.backend == n && d.usable;
      if (!usable) continue;
      try {
        live.push_back(make_backend(n));
        names.push_back(n);
      } catch (const Error& e) {
        std::printf("  (%s could not start: %s)\n", n, e.what());
      }
    }
    if (!*ops_only) {
      try {
        auto b = make_backend("auto");
        std::printf("\nBackend chosen by --backend auto: %s (%s)\n  %s\n", b->name().c_str(), b->device_name().c_str(),
                    auto_choice_reason().c_str());
      } catch (const Error& e) {
        std::printf("\n--backend auto fails here: %s\n", e.what());
      }
      std::printf("\n--precision auto on each backend:\n");
      for (size_t i = 0; i < live.size(); ++i)
        std::printf("  %-7s %s\n", names[i].c_str(), choose_precision("auto", *live[i]).why.c_str());
    }
    std::printf("\nOp catalogue (%zu ops):\n  %-22s %-12s", all_ops().size(), "op", "family");
    for (const std::string& n : names) std::printf(" %-7s", n.c_str());
    std::printf(" summary\n");
    for (const OpInfo& info : all_ops()) {
      std::printf("  %-22s %-12s", info.name, info.family);
      for (auto& b : live) std::printf(" %-7s", b->supports(info.op) ? "yes" : "-");
      std::printf(" %s\n", info.summary);
    }
    return 0;
  };
}

}  // namespace edgetrain::cli
