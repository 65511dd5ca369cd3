// Crash-safe file replacement for checkpoints and exports: the new contents go to a temp file next to
// the target, are fsync'ed, renamed over the target and the directory is fsync'ed, so a reader sees
// either the old file or the complete new one — never a torn write.
#pragma once

#include <cstddef>
#include <cstdio>
#include <functional>
#include <string>
#include <vector>

namespace edgetrain {

// Writes `path` atomically: `writer` fills the stream of `path.tmp.<pid>` (same directory). Any failure
// — the writer throwing, a short write (ENOSPC, EFBIG...), fflush/fsync/fclose/rename failing — removes
// the temp file and throws Error naming the path and strerror, stating that the previous file is intact.
// A failure to sync the directory after the rename throws too, but then the new file is in place.
void write_file_atomic(const std::string& path, const std::function<void(std::FILE*)>& writer);

// fwrite that throws Error (naming `path` and strerror) unless all n bytes were written.
void fwrite_checked(std::FILE* f, const void* data, size_t n, const std::string& path);

// The temp name write_file_atomic uses for `path` in this process (for tests and cleanup tools).
std::string atomic_temp_path(const std::string& path);

// Removes the temp files that writers killed mid write (SIGKILL, power loss) left next to `path`: exactly
// `<path>.tmp.<pid>` where <pid> is not this process and no process with that pid exists (another live
// writer's temp file is left alone). Returns the paths removed. write_file_atomic calls it before each
// write; the trainer also calls it at the start of a run. Never throws.
std::vector<std::string> remove_stale_atomic_temps(const std::string& path);

}  // namespace edgetrain
