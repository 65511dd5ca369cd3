// Token streams over a corpus without copying it: the byte tokenizer reads the memory-mapped text
// directly; other tokenizers encode the text once into a token cache file, which is then memory-mapped.
#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>

#include "edgetrain/tokenizer.h"
#include "edgetrain/trainer.h"

namespace edgetrain {
namespace {

// A read-only memory map of a whole file.
class Mapped {
 public:
  explicit Mapped(const std::string& path) : path_(path) {
    int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
    ET_CHECK_KIND(ErrorKind::io, fd >= 0, "cannot open '", path, "': ", std::strerror(errno));
    struct stat st {};
    if (::fstat(fd, &st) != 0) {
      ::close(fd);
      fail_kind(ErrorKind::io, "cannot stat '", path, "': ", std::strerror(errno));
    }
    size_ = static_cast<size_t>(st.st_size);
    if (size_ > 0) {
      data_ = ::mmap(nullptr, size_, PROT_READ, MAP_PRIVATE, fd, 0);
      if (data_ == MAP_FAILED) {
        ::close(fd);
        fail_kind(ErrorKind::io, "cannot memory-map '", path, "': ", std::strerror(errno));
      }
    }
    ::close(fd);
  }
  ~Mapped() {
    if (data_ && data_ != MAP_FAILED) ::munmap(data_, size_);
  }
  const unsigned char* bytes() const { return static_cast<const unsigned char*>(data_); }
  size_t size() const { return size_; }

 private:
  std::string path_;
  void* data_ = nullptr;
  size_t size_ = 0;
};

class ByteStream : public TokenStream {
 public:
  explicit ByteStream(const std::string& path) : map_(path) {}
  int64_t size() const override { return static_cast<int64_t>(map_.size()); }
  int32_t at(int64_t i) const override { return map_.bytes()[i]; }

 private:
  Mapped map_;
};

class CachedStream : public TokenStream {
 public:
  explicit CachedStream(const std::string& path) : map_(path) {
    ET_CHECK_KIND(ErrorKind::io, map_.size() % 4 == 0, "token cache '", path,
                  "' is corrupt (size not a multiple of 4); delete it");
  }
  int64_t size() const override { return static_cast<int64_t>(map_.size() / 4); }
  int32_t at(int64_t i) const override {
    int32_t v;
    std::memcpy(&v, map_.bytes() + 4 * i, 4);
    return v;
  }

 private:
  Mapped map_;
};

// Encodes the corpus in chunks cut where every tokenizer's pre-tokenization cuts anyway (is_chunk_boundary),
// so the result equals encoding the whole text at once (later chunks with encode_continuation: no second
// SentencePiece space prefix).
void build_cache(const std::string& corpus, const Tokenizer& tok, const std::string& out) {
  Mapped text(corpus);
  std::string tmp = out + ".tmp." + std::to_string(::getpid());
  std::FILE* f = std::fopen(tmp.c_str(), "wb");
  ET_CHECK_KIND(ErrorKind::io, f, "cannot create token cache '", tmp, "': ", std::strerror(errno));
  const char* p = reinterpret_cast<const char*>(text.bytes());
  size_t n = text.size(), pos = 0;
  bool ok = true;
  while (pos < n && ok) {
    size_t end = std::min(n, pos + (1u << 20));
    while (end < n && !is_chunk_boundary(std::string_view(p, n), end)) ++end;
    const std::string_view chunk(p + pos, end - pos);
    std::vector<int32_t> ids = pos == 0 ? tok.encode(chunk) : tok.encode_continuation(chunk);
    ok = std::fwrite(ids.data(), 4, ids.size(), f) == ids.size();
    pos = end;
  }
  ok = std::fflush(f) == 0 && ok;
  ok = ::fsync(fileno(f)) == 0 && ok;
  ok = std::fclose(f) == 0 && ok;
  if (!ok || std::rename(tmp.c_str(), out.c_str()) != 0) {
    std::remove(tmp.c_str());
    fail_kind(ErrorKind::io, "cannot write token cache '", out, "': ", std::strerror(errno));
  }
}

}  // namespace

std::unique_ptr<TokenStream> TokenStream::open(const std::string& corpus, const Tokenizer& tok, const std::string& cache_dir) {
  ET_CHECK(std::filesystem::is_regular_file(corpus), "corpus '", corpus, "' does not exist or is not a file");
  if (tok.name() == "bytes") return std::make_unique<ByteStream>(corpus);
  auto size = std::filesystem::file_size(corpus);
  auto mtime = std::filesystem::last_write_time(corpus).time_since_epoch().count();
  std::filesystem::create_directories(cache_dir);
  // ".t2": the second tokenization of the same tokenizer names (pre-tokenizers chosen by tokenizer.ggml.pre,
  // chunks cut only at is_chunk_boundary): a cache an older version wrote is not reused.
  std::string cache = cache_dir + "/" + std::filesystem::path(corpus).filename().string() + "." + tok.name() + "." +
                      std::to_string(size) + "-" + std::to_string(static_cast<long long>(mtime)) + ".t2.tokens";
  if (!std::filesystem::exists(cache)) build_cache(corpus, tok, cache);
  return std::make_unique<CachedStream>(cache);
}

}  // namespace edgetrain
