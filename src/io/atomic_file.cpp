// Atomic file replacement: temp file in the target's directory, checked writes, fsync, rename, fsync of
// the directory; every failure before the rename cleans up and leaves the previous file untouched.
#include "io/atomic_file.h"

#include <dirent.h>
#include <fcntl.h>
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <exception>

#include "edgetrain/error.h"

namespace edgetrain {

namespace {

std::string parent_dir(const std::string& path) {
  size_t slash = path.find_last_of('/');
  if (slash == std::string::npos) return ".";
  if (slash == 0) return "/";
  return path.substr(0, slash);
}

std::string errno_text(int e) { return cat(std::strerror(e), " (errno ", e, ")"); }

// kind: io, or the kind of the writer's own Error (a tensor that could not be read from its device).
[[noreturn]] void fail_intact(const std::string& path, const std::string& what, ErrorKind kind = ErrorKind::io) {
  fail_kind(kind, "atomic write of '", path, "' failed: ", what, "; the previous file (if any) is intact");
}

}  // namespace

std::string atomic_temp_path(const std::string& path) { return cat(path, ".tmp.", static_cast<long>(::getpid())); }

std::vector<std::string> remove_stale_atomic_temps(const std::string& path) {
  std::vector<std::string> removed;
  const size_t slash = path.find_last_of('/');
  const std::string dir = parent_dir(path);
  const std::string prefix = (slash == std::string::npos ? path : path.substr(slash + 1)) + ".tmp.";
  const int saved_errno = errno;
  DIR* d = ::opendir(dir.c_str());
  if (d == nullptr) {
    errno = saved_errno;
    return removed;
  }
  while (const dirent* e = ::readdir(d)) {
    const std::string name = e->d_name;
    if (name.size() <= prefix.size() || name.compare(0, prefix.size(), prefix) != 0) continue;
    const std::string digits = name.substr(prefix.size());
    if (digits.size() > 9 || digits.find_first_not_of("0123456789") != std::string::npos) continue;
    const long pid = std::stol(digits);
    if (pid <= 0 || pid == static_cast<long>(::getpid())) continue;
    // Alive (kill succeeds) or alive under another user (EPERM): its writer may still be writing it.
    if (::kill(static_cast<pid_t>(pid), 0) == 0 || errno != ESRCH) continue;
    const std::string full = slash == std::string::npos ? name : path.substr(0, slash + 1) + name;
    struct stat st {};
    if (::lstat(full.c_str(), &st) == 0 && S_ISREG(st.st_mode) && ::unlink(full.c_str()) == 0) removed.push_back(full);
  }
  ::closedir(d);
  errno = saved_errno;
  return removed;
}

void fwrite_checked(std::FILE* f, const void* data, size_t n, const std::string& path) {
  if (n == 0) return;
  errno = 0;
  size_t done = std::fwrite(data, 1, n, f);
  if (done != n) {
    int e = errno != 0 ? errno : EIO;
    fail_kind(ErrorKind::io, "writing '", path, "': wrote ", done, " of ", n, " bytes: ", errno_text(e));
  }
}

void write_file_atomic(const std::string& path, const std::function<void(std::FILE*)>& writer) {
  ET_CHECK(!path.empty(), "atomic write: empty path");
  ET_CHECK(path.back() != '/', "atomic write of '", path, "': the path names a directory");
  const std::string tmp = atomic_temp_path(path);
  const std::string dir = parent_dir(path);
  remove_stale_atomic_temps(path);  // leftovers of writers killed mid write

  // O_TRUNC, not O_EXCL: a temp file with our pid can only be a leftover of a crashed earlier process.
  int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0666);
  if (fd < 0) {
    int e = errno;
    fail_intact(path, cat("cannot create temp file '", tmp, "' in directory '", dir, "': ", errno_text(e)));
  }
  std::FILE* f = ::fdopen(fd, "wb");
  if (f == nullptr) {
    int e = errno;
    ::close(fd);
    ::unlink(tmp.c_str());
    fail_intact(path, cat("fdopen of '", tmp, "': ", errno_text(e)));
  }

  // Closes (if still open) and removes the temp file, then throws.
  auto abandon = [&](const std::string& what, ErrorKind kind = ErrorKind::io) {
    if (f != nullptr) std::fclose(f);
    f = nullptr;
    ::unlink(tmp.c_str());
    fail_intact(path, what, kind);
  };

  try {
    writer(f);
  } catch (const Error& e) {
    abandon(cat("while writing '", tmp, "': ", e.what()), e.kind());
  } catch (const std::exception& e) {
    abandon(cat("while writing '", tmp, "': ", e.what()));
  } catch (...) {
    if (f != nullptr) std::fclose(f);
    ::unlink(tmp.c_str());
    throw;
  }
  if (std::ferror(f)) abandon(cat("a write to '", tmp, "' failed"));
  errno = 0;
  if (std::fflush(f) != 0) {
    int e = errno;
    abandon(cat("flushing '", tmp, "': ", errno_text(e)));
  }
  if (::fsync(::fileno(f)) != 0) {
    int e = errno;
    abandon(cat("fsync of '", tmp, "': ", errno_text(e)));
  }
  errno = 0;
  int rc = std::fclose(f);
  f = nullptr;
  if (rc != 0) {
    int e = errno;
    ::unlink(tmp.c_str());
    fail_intact(path, cat("closing '", tmp, "': ", errno_text(e)));
  }
  if (::rename(tmp.c_str(), path.c_str()) != 0) {
    int e = errno;
    ::unlink(tmp.c_str());
    fail_intact(path, cat("renaming '", tmp, "' over it: ", errno_text(e)));
  }

  // The rename is done: make it durable. A failure here no longer leaves the old file in place.
  int dfd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (dfd < 0) {
    int e = errno;
    fail_kind(ErrorKind::io, "atomic write of '", path, "': the new file is in place but its directory '", dir,
              "' could not be opened for fsync: ", errno_text(e));
  }
  if (::fsync(dfd) != 0) {
    int e = errno;
    ::close(dfd);
    // Some file systems cannot fsync a directory; that is not a failure of the write.
    if (e != EINVAL && e != ENOTSUP)
      fail_kind(ErrorKind::io, "atomic write of '", path, "': the new file is in place but fsync of directory '", dir,
                "' failed: ", errno_text(e));
    return;
  }
  ::close(dfd);
}

}  // namespace edgetrain
