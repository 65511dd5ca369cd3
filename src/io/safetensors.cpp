// The safetensors reader (every header field validated, overflow-checked, duplicate-free, exact tiling of
// the data buffer) and writer (name-ordered tensors, space-padded 8-byte aligned header, atomic save).
#include "edgetrain/safetensors.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstring>
#include <limits>
#include <set>

#include <nlohmann/json.hpp>

#include "edgetrain/error.h"
#include "edgetrain/half.h"
#include "io/atomic_file.h"

namespace edgetrain::safetensors {

namespace {

using json = nlohmann::json;

// Files at least this large are memory-mapped; smaller ones are read into memory.
constexpr uint64_t kMapThreshold = 1u << 20;
// The deepest nesting a valid header needs is 3 (object, tensor entry, shape); anything deeper is junk.
constexpr int kMaxJsonDepth = 8;

struct DtypeSize {
  const char* name;
  size_t bytes;
};
constexpr DtypeSize kDtypes[] = {{"BOOL", 1}, {"U8", 1},  {"I8", 1},  {"F8_E5M2", 1}, {"F8_E4M3", 1},
                                 {"I16", 2},  {"U16", 2}, {"F16", 2}, {"BF16", 2},    {"I32", 4},
                                 {"U32", 4},  {"F32", 4}, {"F64", 8}, {"I64", 8},     {"U64", 8}};

size_t lookup_dtype(const std::string& d) {
  for (const DtypeSize& e : kDtypes)
    if (d == e.name) return e.bytes;
  return 0;
}

// numel * elem_size as bytes, or false on overflow. A zero dimension makes the tensor empty regardless of
// the others, so [2^62, 2^62, 0] is a valid empty tensor.
bool byte_count(const std::vector<int64_t>& shape, size_t elem_size, uint64_t* out) {
  for (int64_t d : shape)
    if (d == 0) {
      *out = 0;
      return true;
    }
  uint64_t n = elem_size;
  for (int64_t d : shape)
    if (__builtin_mul_overflow(n, static_cast<uint64_t>(d), &n)) return false;
  *out = n;
  return true;
}

std::string shape_str(const std::vector<int64_t>& s) {
  std::string r = "[";
  for (size_t i = 0; i < s.size(); ++i) r += (i ? ", " : "") + std::to_string(s[i]);
  return r + "]";
}

uint64_t read_u64_le(const uint8_t* p) {
  uint64_t v = 0;
  for (int i = 7; i >= 0; --i) v = (v << 8) | p[i];
  return v;
}

// Rejects headers nested deeper than a valid one can be, before the JSON parser sees them.
int json_depth(const uint8_t* p, size_t n) {
  int depth = 0, max_depth = 0;
  bool in_string = false, escaped = false;
  for (size_t i = 0; i < n; ++i) {
    char c = static_cast<char>(p[i]);
    if (in_string) {
      if (escaped) escaped = false;
      else if (c == '\\') escaped = true;
      else if (c == '"') in_string = false;
    } else if (c == '"') {
      in_string = true;
    } else if (c == '{' || c == '[') {
      max_depth = std::max(max_depth, ++depth);
      if (max_depth > kMaxJsonDepth) return max_depth;
    } else if (c == '}' || c == ']') {
      --depth;
    }
  }
  return max_depth;
}

// A non-negative JSON integer as uint64, or false.
bool as_u64(const json& v, uint64_t* out) {
  if (v.is_number_unsigned()) {
    *out = v.get<uint64_t>();
    return true;
  }
  if (v.is_number_integer()) {
    int64_t s = v.get<int64_t>();
    if (s < 0) return false;
    *out = static_cast<uint64_t>(s);
    return true;
  }
  return false;
}

}  // namespace

size_t dtype_bytes(const std::string& dtype) {
  size_t n = lookup_dtype(dtype);
  ET_CHECK(n != 0, "safetensors: unknown dtype '", dtype, "'");
  return n;
}

bool is_known_dtype(const std::string& dtype) { return lookup_dtype(dtype) != 0; }

const char* dtype_string(DType t) {
  switch (t) {
    case DType::f32: return "F32";
    case DType::i32: return "I32";
    case DType::u8: return "U8";
    case DType::u32: return "U32";
    case DType::boolean: return "BOOL";
  }
  fail("safetensors: no safetensors dtype for dtype ", static_cast<int>(t));
}

int64_t TensorInfo::numel() const {
  int64_t n = 1;
  for (int64_t d : shape) {
    if (d == 0) return 0;
  }
  for (int64_t d : shape) n *= d;  // fits: validated against the file's size
  return n;
}

// ---- reading ----

struct Reader::Backing {
  void* map = nullptr;
  size_t map_len = 0;
  std::vector<uint8_t> bytes;
  ~Backing() {
    if (map != nullptr) ::munmap(map, map_len);
  }
};

Reader::Reader(Reader&&) noexcept = default;
Reader& Reader::operator=(Reader&&) noexcept = default;
Reader::~Reader() = default;

Reader Reader::from_memory(const void* data, size_t size, const std::string& source) {
  Reader r;
  r.source_ = source;
  ET_CHECK(data != nullptr || size == 0, "safetensors: '", source, "': null buffer");
  static const uint8_t kEmpty = 0;
  r.parse(data != nullptr ? static_cast<const uint8_t*>(data) : &kEmpty, size);
  return r;
}

Reader Reader::open(const std::string& path) {
  Reader r;
  r.source_ = path;
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) {
    int e = errno;
    fail_kind(ErrorKind::io, "safetensors: cannot open '", path, "': ", std::strerror(e));
  }
  struct FdCloser {
    int fd;
    ~FdCloser() { ::close(fd); }
  } closer{fd};
  struct stat st {};
  if (::fstat(fd, &st) != 0) {
    int e = errno;
    fail_kind(ErrorKind::io, "safetensors: cannot stat '", path, "': ", std::strerror(e));
  }
  ET_CHECK(S_ISREG(st.st_mode), "safetensors: '", path, "' is not a regular file");
  const uint64_t size = static_cast<uint64_t>(st.st_size);
  auto backing = std::make_unique<Backing>();
  const uint8_t* bytes = nullptr;
  if (size >= kMapThreshold) {
    void* m = ::mmap(nullptr, size, PROT_READ, MAP_PRIVATE, fd, 0);
    if (m == MAP_FAILED) {
      int e = errno;
      fail_kind(ErrorKind::io, "safetensors: cannot map '", path, "' (", size, " bytes): ", std::strerror(e));
    }
    backing->map = m;
    backing->map_len = size;
    bytes = static_cast<const uint8_t*>(m);
  } else {
    backing->bytes.resize(size);
    uint64_t done = 0;
    while (done < size) {
      ssize_t n = ::read(fd, backing->bytes.data() + done, size - done);
      if (n < 0 && errno == EINTR) continue;
      if (n < 0) {
        int e = errno;
        fail_kind(ErrorKind::io, "safetensors: reading '", path, "': ", std::strerror(e));
      }
      ET_CHECK_KIND(ErrorKind::io, n > 0, "safetensors: '", path, "' shrank while being read (", done, " of ", size,
                    " bytes)");
      done += static_cast<uint64_t>(n);
    }
    bytes = backing->bytes.data();
  }
  r.backing_ = std::move(backing);
  r.parse(bytes, size);
  return r;
}

template <typename... Args>
[[noreturn]] static void bad_file(const std::string& source, const Args&... args) {
  fail("safetensors: '", source, "': ", args...);
}

// A file that ends before its own header says it does was cut short (an interrupted copy or write): io.
template <typename... Args>
[[noreturn]] static void cut_short(const std::string& source, const Args&... args) {
  fail_kind(ErrorKind::io, "safetensors: '", source, "': ", args...);
}

void Reader::parse(const uint8_t* bytes, uint64_t size) {
  const std::string& src = source_;
  if (size < 8) cut_short(src, "file of ", size, " bytes is too short for the 8-byte header length");
  const uint64_t n = read_u64_le(bytes);
  if (n > kMaxHeaderBytes) bad_file(src, "header length ", n, " exceeds the limit of ", kMaxHeaderBytes, " bytes");
  if (n > size - 8) cut_short(src, "header length ", n, " exceeds the file size ", size, " minus 8 (truncated file?)");
  const uint8_t* header = bytes + 8;
  if (n == 0 || header[0] != '{') bad_file(src, "header does not start with '{'");
  if (json_depth(header, static_cast<size_t>(n)) > kMaxJsonDepth)
    bad_file(src, "header JSON is nested deeper than ", kMaxJsonDepth, " levels");

  // Parse, noting the first duplicate key of any object (the parser itself would keep the last one).
  std::vector<std::set<std::string>> keys;
  std::string duplicate;
  bool have_duplicate = false;
  json::parser_callback_t cb = [&](int, json::parse_event_t ev, json& parsed) {
    if (ev == json::parse_event_t::object_start) {
      keys.emplace_back();
    } else if (ev == json::parse_event_t::object_end) {
      if (!keys.empty()) keys.pop_back();
    } else if (ev == json::parse_event_t::key && !keys.empty() && parsed.is_string()) {
      const std::string& k = parsed.get_ref<const std::string&>();
      if (!keys.back().insert(k).second && !have_duplicate) {
        have_duplicate = true;
        duplicate = k;
      }
    }
    return true;
  };
  json j;
  try {
    j = json::parse(header, header + n, cb, /*allow_exceptions=*/true);
  } catch (const json::exception& e) {
    bad_file(src, "header is not valid JSON: ", e.what());
  }
  if (have_duplicate) bad_file(src, "duplicate key '", duplicate, "' in the header");
  if (!j.is_object()) bad_file(src, "header is not a JSON object");

  data_size_ = size - 8 - n;
  buffer_ = header + n;
  tensors_.clear();
  index_.clear();
  metadata_.clear();

  for (auto it = j.begin(); it != j.end(); ++it) {
    const std::string& name = it.key();
    const json& v = it.value();
    if (name == "__metadata__") {
      if (!v.is_object()) bad_file(src, "__metadata__ is not a JSON object");
      for (auto m = v.begin(); m != v.end(); ++m) {
        if (!m.value().is_string()) bad_file(src, "__metadata__ value of '", m.key(), "' is not a string");
        metadata_[m.key()] = m.value().get<std::string>();
      }
      continue;
    }
    if (name.empty()) bad_file(src, "a tensor has an empty name");
    if (!v.is_object()) bad_file(src, "entry of tensor '", name, "' is not a JSON object");
    for (auto f = v.begin(); f != v.end(); ++f)
      if (f.key() != "dtype" && f.key() != "shape" && f.key() != "data_offsets")
        bad_file(src, "tensor '", name, "' has an unknown field '", f.key(), "'");
    auto dt = v.find("dtype"), sh = v.find("shape"), off = v.find("data_offsets");
    if (dt == v.end() || sh == v.end() || off == v.end())
      bad_file(src, "tensor '", name, "' lacks one of the fields dtype, shape, data_offsets");

    TensorInfo t;
    t.name = name;
    if (!dt->is_string()) bad_file(src, "tensor '", name, "': dtype is not a string");
    t.dtype = dt->get<std::string>();
    const size_t elem = lookup_dtype(t.dtype);
    if (elem == 0) bad_file(src, "tensor '", name, "': unknown dtype '", t.dtype, "'");

    if (!sh->is_array()) bad_file(src, "tensor '", name, "': shape is not an array");
    if (sh->size() > static_cast<size_t>(kMaxFileRank))
      bad_file(src, "tensor '", name, "': rank ", sh->size(), " exceeds the limit of ", kMaxFileRank);
    for (const json& d : *sh) {
      uint64_t u = 0;
      if (!as_u64(d, &u) || u > static_cast<uint64_t>(std::numeric_limits<int64_t>::max()))
        bad_file(src, "tensor '", name, "': shape entry ", d.dump(), " is not a non-negative 64-bit integer");
      t.shape.push_back(static_cast<int64_t>(u));
    }
    uint64_t need = 0;
    if (!byte_count(t.shape, elem, &need))
      bad_file(src, "tensor '", name, "': shape ", shape_str(t.shape), " of ", t.dtype, " overflows 64-bit byte counts");

    if (!off->is_array() || off->size() != 2)
      bad_file(src, "tensor '", name, "': data_offsets is not an array of two integers");
    if (!as_u64((*off)[0], &t.begin) || !as_u64((*off)[1], &t.end))
      bad_file(src, "tensor '", name, "': data_offsets ", off->dump(), " are not non-negative integers");
    if (t.begin > t.end) bad_file(src, "tensor '", name, "': data_offsets [", t.begin, ", ", t.end, "] are reversed");
    if (t.end > data_size_)
      cut_short(src, "tensor '", name, "': data_offsets [", t.begin, ", ", t.end, "] exceed the data buffer of ",
                data_size_, " bytes (truncated file?)");
    if (t.end - t.begin != need)
      bad_file(src, "tensor '", name, "': data_offsets span ", t.end - t.begin, " bytes but ", t.dtype, " ",
               shape_str(t.shape), " needs ", need);
    tensors_.push_back(std::move(t));
  }

  // The tensors must tile the buffer exactly: sorted by offset, each starts where the previous ended.
  std::sort(tensors_.begin(), tensors_.end(), [](const TensorInfo& a, const TensorInfo& b) {
    if (a.begin != b.begin) return a.begin < b.begin;
    if (a.end != b.end) return a.end < b.end;
    return a.name < b.name;
  });
  uint64_t pos = 0;
  for (size_t i = 0; i < tensors_.size(); ++i) {
    const TensorInfo& t = tensors_[i];
    if (t.begin < pos)
      bad_file(src, "tensor '", t.name, "' [", t.begin, ", ", t.end, ") overlaps tensor '", tensors_[i - 1].name, "' [",
               tensors_[i - 1].begin, ", ", tensors_[i - 1].end, ")");
    if (t.begin > pos) bad_file(src, "gap in the data buffer: bytes [", pos, ", ", t.begin, ") before tensor '", t.name, "' belong to no tensor");
    pos = t.end;
  }
  if (pos != data_size_)
    bad_file(src, "the tensors cover ", pos, " bytes but the data buffer holds ", data_size_,
             " (trailing bytes or a wrong header length)");
  for (size_t i = 0; i < tensors_.size(); ++i) index_[tensors_[i].name] = i;
}

bool Reader::contains(const std::string& name) const { return index_.count(name) != 0; }

const TensorInfo& Reader::info(const std::string& name) const {
  auto it = index_.find(name);
  if (it == index_.end()) bad_file(source_, "no tensor named '", name, "'");
  return tensors_[it->second];
}

const uint8_t* Reader::data(const std::string& name) const { return buffer_ + info(name).begin; }

std::vector<float> Reader::to_f32(const std::string& name) const {
  const TensorInfo& t = info(name);
  if (t.dtype != "F32" && t.dtype != "F16" && t.dtype != "BF16")
    bad_file(source_, "tensor '", name, "' has dtype ", t.dtype, "; only F32, F16 and BF16 convert to f32");
  std::vector<float> out(static_cast<size_t>(t.numel()));
  convert_to_f32(t.dtype, buffer_ + t.begin, out.size(), out.data());
  return out;
}

void convert_to_f32(const std::string& dtype, const uint8_t* src, size_t n, float* dst) {
  if (dtype == "F32") {
    if (n) std::memcpy(dst, src, n * 4);
  } else if (dtype == "F16" || dtype == "BF16") {
    const bool half = dtype == "F16";
    for (size_t i = 0; i < n; ++i) {
      uint16_t v = static_cast<uint16_t>(src[2 * i] | (src[2 * i + 1] << 8));
      dst[i] = half ? f16_to_f32(v) : bf16_to_f32(v);
    }
  } else {
    fail("safetensors: cannot convert dtype ", dtype, " to f32");
  }
}

// ---- writing ----

void Writer::check_entry(const std::string& name, const std::string& dtype, const std::vector<int64_t>& shape,
                         size_t bytes) const {
  ET_CHECK(!name.empty(), "safetensors writer: empty tensor name");
  ET_CHECK(name != "__metadata__", "safetensors writer: '__metadata__' is reserved and cannot name a tensor");
  ET_CHECK(entries_.count(name) == 0, "safetensors writer: duplicate tensor name '", name, "'");
  const size_t elem = lookup_dtype(dtype);
  ET_CHECK(elem != 0, "safetensors writer: tensor '", name, "': unknown dtype '", dtype, "'");
  ET_CHECK(shape.size() <= static_cast<size_t>(kMaxFileRank), "safetensors writer: tensor '", name, "': rank ",
           shape.size(), " exceeds ", kMaxFileRank);
  for (int64_t d : shape)
    ET_CHECK(d >= 0, "safetensors writer: tensor '", name, "': negative dimension in shape ", shape_str(shape));
  uint64_t need = 0;
  ET_CHECK(byte_count(shape, elem, &need), "safetensors writer: tensor '", name, "': shape ", shape_str(shape),
           " overflows");
  ET_CHECK(need == bytes, "safetensors writer: tensor '", name, "': ", dtype, " ", shape_str(shape), " needs ", need,
           " bytes, got ", bytes);
}

void Writer::add(const std::string& name, const std::string& dtype, const std::vector<int64_t>& shape,
                 const void* data, size_t bytes) {
  check_entry(name, dtype, shape, bytes);
  ET_CHECK(data != nullptr || bytes == 0, "safetensors writer: tensor '", name, "': null data");
  Entry e;
  e.dtype = dtype;
  e.shape = shape;
  e.data = static_cast<const uint8_t*>(data);
  e.bytes = bytes;
  entries_.emplace(name, std::move(e));
}

void Writer::add_owned(const std::string& name, const std::string& dtype, const std::vector<int64_t>& shape,
                       std::vector<uint8_t> bytes) {
  check_entry(name, dtype, shape, bytes.size());
  Entry e;
  e.dtype = dtype;
  e.shape = shape;
  e.owned = std::make_shared<std::vector<uint8_t>>(std::move(bytes));
  e.data = e.owned->data();
  e.bytes = e.owned->size();
  entries_.emplace(name, std::move(e));
}

void Writer::add_deferred(const std::string& name, const std::string& dtype, const std::vector<int64_t>& shape,
                          size_t bytes, std::function<void(uint8_t* dst)> fill) {
  check_entry(name, dtype, shape, bytes);
  ET_CHECK(fill != nullptr, "safetensors writer: tensor '", name, "': no fill function");
  Entry e;
  e.dtype = dtype;
  e.shape = shape;
  e.bytes = bytes;
  e.fill = std::move(fill);
  entries_.emplace(name, std::move(e));
}

void Writer::for_each_data(const std::function<void(const uint8_t*, size_t)>& sink) const {
  std::vector<uint8_t> scratch;
  for (const auto& kv : entries_) {
    const Entry& e = kv.second;
    if (!e.fill) {
      sink(e.data, e.bytes);
      continue;
    }
    scratch.assign(e.bytes, 0);
    e.fill(scratch.data());
    sink(scratch.data(), e.bytes);
  }
}

void Writer::set_metadata(const std::string& key, const std::string& value) { metadata_[key] = value; }

std::vector<uint8_t> Writer::header() const {
  json j = json::object();
  if (!metadata_.empty()) j["__metadata__"] = metadata_;
  uint64_t offset = 0;
  for (const auto& [name, e] : entries_) {
    j[name] = {{"dtype", e.dtype}, {"shape", e.shape}, {"data_offsets", {offset, offset + e.bytes}}};
    offset += e.bytes;
  }
  std::string text;
  try {
    text = j.dump();
  } catch (const json::exception& e) {
    fail("safetensors writer: a tensor name or metadata string is not valid UTF-8: ", e.what());
  }
  text.append((8 - text.size() % 8) % 8, ' ');
  ET_CHECK(text.size() <= kMaxHeaderBytes, "safetensors writer: header of ", text.size(), " bytes exceeds the limit of ",
           kMaxHeaderBytes);
  std::vector<uint8_t> out(8 + text.size());
  uint64_t n = text.size();
  for (int i = 0; i < 8; ++i) out[i] = static_cast<uint8_t>(n >> (8 * i));
  std::memcpy(out.data() + 8, text.data(), text.size());
  return out;
}

std::vector<uint8_t> Writer::to_bytes() const {
  std::vector<uint8_t> out = header();
  for_each_data([&](const uint8_t* p, size_t n) { out.insert(out.end(), p, p + n); });
  return out;
}

void Writer::write(std::FILE* f, const std::string& path_for_errors) const {
  std::vector<uint8_t> h = header();
  fwrite_checked(f, h.data(), h.size(), path_for_errors);
  for_each_data([&](const uint8_t* p, size_t n) { fwrite_checked(f, p, n, path_for_errors); });
}

void Writer::save(const std::string& path) const {
  write_file_atomic(path, [&](std::FILE* f) { write(f, path); });
}

}  // namespace edgetrain::safetensors
