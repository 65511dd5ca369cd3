// Where the profilers (src/cpu/profile.cpp, src/vulkan/profile.cpp) put their reports: "-" is stderr,
// anything else a file replaced through a temp file and a rename, so a reader never sees half a report.
// Never throws (reports are written from destructors); a file that cannot be written gets a line on stderr.
#pragma once

#include <string>

namespace edgetrain {

void write_report_file(const std::string& path, const std::string& text, const char* who);

}  // namespace edgetrain
