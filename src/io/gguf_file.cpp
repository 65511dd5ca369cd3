// GGUF (v2/v3, little-endian) as a container: metadata values, the bounds-checked reader (every count and
// offset checked against the file size before anything is allocated), the writer, and the one test of
// whether a path is a GGUF file. What the tensors' bytes mean is gguf_blocks.cpp's.
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "edgetrain/error.h"
#include "edgetrain/interop.h"
#include "io/atomic_file.h"
#include "io/gguf.h"

namespace edgetrain::gguf {

// ---- values ----

Value Value::str(std::string v) {
  Value x;
  x.type = VType::STRING;
  x.s = std::move(v);
  return x;
}
Value Value::u32(uint32_t v) {
  Value x;
  x.type = VType::U32;
  x.u = v;
  x.i = v;
  return x;
}
Value Value::f32(float v) {
  Value x;
  x.type = VType::F32;
  x.f = v;
  return x;
}
Value Value::boolean(bool v) {
  Value x;
  x.type = VType::BOOL;
  x.u = x.i = v ? 1 : 0;
  return x;
}
Value Value::strings(const std::vector<std::string>& v) {
  Value x;
  x.type = VType::ARRAY;
  x.elem = VType::STRING;
  for (const auto& s : v) x.arr.push_back(str(s));
  return x;
}
Value Value::f32s(const std::vector<float>& v) {
  Value x;
  x.type = VType::ARRAY;
  x.elem = VType::F32;
  for (float f : v) x.arr.push_back(f32(f));
  return x;
}
Value Value::i32s(const std::vector<int32_t>& v) {
  Value x;
  x.type = VType::ARRAY;
  x.elem = VType::I32;
  for (int32_t i : v) {
    Value e;
    e.type = VType::I32;
    e.i = i;
    e.u = static_cast<uint64_t>(i);
    x.arr.push_back(e);
  }
  return x;
}
bool Value::is_int() const {
  return type == VType::U8 || type == VType::I8 || type == VType::U16 || type == VType::I16 || type == VType::U32 ||
         type == VType::I32 || type == VType::U64 || type == VType::I64;
}
std::string Value::describe(size_t max_items) const {
  std::ostringstream os;
  if (type == VType::STRING) {
    os << '"' << (s.size() > 80 ? s.substr(0, 80) + "..." : s) << '"';
  } else if (type == VType::ARRAY) {
    os << "[" << arr.size() << " items: ";
    for (size_t k = 0; k < arr.size() && k < max_items; ++k) os << (k ? ", " : "") << arr[k].describe(2);
    if (arr.size() > max_items) os << ", ...";
    os << "]";
  } else if (type == VType::BOOL) {
    os << (u ? "true" : "false");
  } else if (is_float()) {
    os << f;
  } else if (type == VType::U64 || type == VType::U32 || type == VType::U16 || type == VType::U8) {
    os << u;
  } else {
    os << i;
  }
  return os.str();
}

// ---- reading ----

namespace {

struct Cursor {
  const uint8_t* p;
  uint64_t size, pos = 0;
  const std::string& src;
  uint64_t left() const { return size - pos; }
  void need(uint64_t n, const char* what) {
    ET_CHECK_KIND(ErrorKind::io, n <= left(), "file ", src, ": truncated: ", what, " needs ", n, " bytes at offset ",
                  pos, ", only ", left(), " left");
  }
  template <typename T>
  T get(const char* what) {
    need(sizeof(T), what);
    T v;
    std::memcpy(&v, p + pos, sizeof(T));
    pos += sizeof(T);
    return v;
  }
  std::string str(const char* what) {
    uint64_t n = get<uint64_t>(what);
    need(n, what);  // checked before allocating
    std::string s(reinterpret_cast<const char*>(p + pos), static_cast<size_t>(n));
    pos += n;
    return s;
  }
};

// Fewest bytes one element of a type occupies in the file (to bound array counts before allocating).
uint64_t min_bytes(VType t) {
  switch (t) {
    case VType::U8: case VType::I8: case VType::BOOL: return 1;
    case VType::U16: case VType::I16: return 2;
    case VType::U32: case VType::I32: case VType::F32: return 4;
    case VType::U64: case VType::I64: case VType::F64: case VType::STRING: return 8;
    case VType::ARRAY: return 12;
  }
  return 1;
}

Value read_value(Cursor& c, VType t, int depth) {
  Value v;
  v.type = t;
  switch (t) {
    case VType::U8: v.u = c.get<uint8_t>("u8 value"); v.i = static_cast<int64_t>(v.u); break;
    case VType::I8: v.i = c.get<int8_t>("i8 value"); v.u = static_cast<uint64_t>(v.i); break;
    case VType::U16: v.u = c.get<uint16_t>("u16 value"); v.i = static_cast<int64_t>(v.u); break;
    case VType::I16: v.i = c.get<int16_t>("i16 value"); v.u = static_cast<uint64_t>(v.i); break;
    case VType::U32: v.u = c.get<uint32_t>("u32 value"); v.i = static_cast<int64_t>(v.u); break;
    case VType::I32: v.i = c.get<int32_t>("i32 value"); v.u = static_cast<uint64_t>(v.i); break;
    case VType::U64: v.u = c.get<uint64_t>("u64 value"); v.i = static_cast<int64_t>(v.u); break;
    case VType::I64: v.i = c.get<int64_t>("i64 value"); v.u = static_cast<uint64_t>(v.i); break;
    case VType::F32: v.f = c.get<float>("f32 value"); break;
    case VType::F64: v.f = c.get<double>("f64 value"); break;
    case VType::BOOL: {
      uint8_t b = c.get<uint8_t>("bool value");
      ET_CHECK(b <= 1, "file ", c.src, ": bool value ", int(b), " at offset ", c.pos - 1, " is not 0 or 1");
      v.u = v.i = b;
      break;
    }
    case VType::STRING: v.s = c.str("string value"); break;
    case VType::ARRAY: {
      ET_CHECK(depth < kMaxArrayDepth, "file ", c.src, ": arrays nested deeper than ", kMaxArrayDepth);
      uint32_t et = c.get<uint32_t>("array element type");
      ET_CHECK(et <= static_cast<uint32_t>(VType::F64), "file ", c.src, ": unknown array element type ", et);
      v.elem = static_cast<VType>(et);
      uint64_t n = c.get<uint64_t>("array count");
      ET_CHECK(n <= c.left() / min_bytes(v.elem), "file ", c.src, ": array count ", n, " at offset ", c.pos - 8,
               " exceeds what the remaining ", c.left(), " bytes can hold");
      v.arr.reserve(static_cast<size_t>(n));
      for (uint64_t k = 0; k < n; ++k) v.arr.push_back(read_value(c, v.elem, depth + 1));
      break;
    }
    default: fail("file ", c.src, ": unknown metadata value type ", static_cast<uint32_t>(t));
  }
  return v;
}

}  // namespace

File File::open(const std::string& path) {
  std::ifstream in(path, std::ios::binary | std::ios::ate);
  ET_CHECK_KIND(ErrorKind::io, in, "file ", path, ": cannot open");
  std::streamoff n = in.tellg();
  ET_CHECK_KIND(ErrorKind::io, n >= 0, "file ", path, ": cannot read its size");
  auto buf = std::make_shared<std::vector<uint8_t>>(static_cast<size_t>(n));
  in.seekg(0);
  ET_CHECK_KIND(ErrorKind::io, n == 0 || in.read(reinterpret_cast<char*>(buf->data()), n), "file ", path,
                ": read failed");
  File f;
  f.source_ = path;
  f.owned_ = buf;
  f.parse(buf->data(), buf->size());
  return f;
}

File File::from_memory(const void* data, size_t size, const std::string& source) {
  File f;
  f.source_ = source;
  f.parse(static_cast<const uint8_t*>(data), size);
  return f;
}

void File::parse(const uint8_t* p, uint64_t size) {
  Cursor c{p, size, 0, source_};
  uint32_t magic = c.get<uint32_t>("magic");
  ET_CHECK(magic == kMagic, "file ", source_, ": not a GGUF file (bad magic 0x", std::hex, magic, ")");
  version_ = c.get<uint32_t>("version");
  ET_CHECK(version_ == 2 || version_ == 3, "file ", source_, ": unsupported GGUF version ", version_,
           " (this reader handles 2 and 3)");
  uint64_t n_tensors = c.get<uint64_t>("tensor count");
  uint64_t n_kv = c.get<uint64_t>("metadata count");
  // A tensor info takes at least 8 (name length) + 4 (n_dims) + 4 (type) + 8 (offset) bytes; a kv pair 12.
  ET_CHECK(n_tensors <= c.left() / 24, "file ", source_, ": tensor count ", n_tensors, " is impossible for a file of ",
           size, " bytes");
  ET_CHECK(n_kv <= c.left() / 12, "file ", source_, ": metadata count ", n_kv, " is impossible for a file of ", size,
           " bytes");
  kv_.reserve(static_cast<size_t>(n_kv));
  for (uint64_t k = 0; k < n_kv; ++k) {
    std::string key = c.str("metadata key");
    uint32_t t = c.get<uint32_t>("metadata value type");
    ET_CHECK(t <= static_cast<uint32_t>(VType::F64), "file ", source_, ": key '", key, "' has unknown value type ", t);
    Value v = read_value(c, static_cast<VType>(t), 0);
    ET_CHECK(!kv_index_.count(key), "file ", source_, ": duplicate metadata key '", key, "'");
    kv_index_[key] = kv_.size();
    kv_.emplace_back(std::move(key), std::move(v));
  }
  if (const Value* a = find("general.alignment")) {
    ET_CHECK(a->is_int() && a->u > 0 && a->u <= (1u << 20) && (a->u & (a->u - 1)) == 0, "file ", source_,
             ": general.alignment must be a power of two up to 1 MiB, got ", a->describe());
    alignment_ = a->u;
  }
  tensors_.reserve(static_cast<size_t>(n_tensors));
  for (uint64_t k = 0; k < n_tensors; ++k) {
    TensorInfo t;
    t.name = c.str("tensor name");
    uint32_t nd = c.get<uint32_t>("tensor n_dims");
    ET_CHECK(nd >= 1 && nd <= 4, "file ", source_, ": tensor '", t.name, "' has ", nd, " dims (1..4 allowed)");
    t.numel = 1;
    for (uint32_t d = 0; d < nd; ++d) {
      uint64_t e = c.get<uint64_t>("tensor dim");
      ET_CHECK(e <= (uint64_t{1} << 40) && (e == 0 || t.numel <= (uint64_t{1} << 50) / e), "file ", source_,
               ": tensor '", t.name, "' dims overflow (dim ", d, " = ", e, ")");
      t.numel *= e;
      t.ne.push_back(e);
    }
    t.type = c.get<uint32_t>("tensor type");
    t.offset = c.get<uint64_t>("tensor offset");
    t.nbytes = tensor_bytes(t.type, t.ne, "file " + source_ + ": tensor '" + t.name + "'");
    ET_CHECK(t.offset % alignment_ == 0, "file ", source_, ": tensor '", t.name, "' offset ", t.offset,
             " is not a multiple of the alignment ", alignment_);
    ET_CHECK(!tensor_index_.count(t.name), "file ", source_, ": duplicate tensor '", t.name, "'");
    tensor_index_[t.name] = tensors_.size();
    tensors_.push_back(std::move(t));
  }
  uint64_t start = (c.pos + alignment_ - 1) / alignment_ * alignment_;
  ET_CHECK_KIND(ErrorKind::io, tensors_.empty() || start <= size, "file ", source_,
                ": truncated before the data section");
  uint64_t avail = start <= size ? size - start : 0;
  for (const TensorInfo& t : tensors_)
    ET_CHECK_KIND(ErrorKind::io, t.offset <= avail && t.nbytes <= avail - t.offset, "file ", source_, ": tensor '",
                  t.name, "' (", t.nbytes, " bytes at data offset ", t.offset, ") runs past the end of the file (",
                  avail, " data bytes)");
  data_ = p + (start <= size ? start : size);
}

const Value* File::find(const std::string& key) const {
  auto it = kv_index_.find(key);
  return it == kv_index_.end() ? nullptr : &kv_[it->second].second;
}

std::string File::get_string(const std::string& key) const {
  const Value* v = find(key);
  ET_CHECK(v, "file ", source_, ": missing metadata key '", key, "'");
  ET_CHECK(v->type == VType::STRING, "file ", source_, ": metadata key '", key, "' must be a string");
  return v->s;
}

int64_t File::get_int(const std::string& key) const {
  const Value* v = find(key);
  ET_CHECK(v, "file ", source_, ": missing metadata key '", key, "'");
  ET_CHECK(v->is_int(), "file ", source_, ": metadata key '", key, "' must be an integer");
  ET_CHECK(v->type != VType::U64 || v->u <= (uint64_t{1} << 62), "file ", source_, ": metadata key '", key,
           "' is too large: ", v->u);
  return v->i;
}

double File::get_float(const std::string& key) const {
  const Value* v = find(key);
  ET_CHECK(v, "file ", source_, ": missing metadata key '", key, "'");
  if (v->is_int()) return static_cast<double>(v->i);
  ET_CHECK(v->is_float(), "file ", source_, ": metadata key '", key, "' must be a number");
  return v->f;
}

const TensorInfo* File::tensor(const std::string& name) const {
  auto it = tensor_index_.find(name);
  return it == tensor_index_.end() ? nullptr : &tensors_[it->second];
}

std::vector<float> File::to_f32(const TensorInfo& t) const {
  ET_CHECK(can_decode(t.type), "file ", source_, ": tensor '", t.name, "' is ", type_name(t.type),
           ", which edgetrain does not decode (it decodes ", decodable_types(), ")");
  std::vector<float> out(static_cast<size_t>(t.numel));
  decode_to_f32(t.type, data(t), t.numel, out.data());
  return out;
}

// ---- writing ----

void Writer::add_kv(const std::string& key, Value v) { kv_.emplace_back(key, std::move(v)); }

void Writer::add_tensor(const std::string& name, std::vector<uint64_t> ne, uint32_t type, std::vector<uint8_t> bytes) {
  const uint64_t want = tensor_bytes(type, ne, "gguf writer: tensor '" + name + "'");
  ET_CHECK(bytes.size() == want, "gguf writer: tensor '", name, "' has ", bytes.size(), " bytes, expected ", want);
  tensors_.push_back({name, std::move(ne), type, std::move(bytes)});
}

namespace {
template <typename T>
void put(std::vector<uint8_t>& o, T v) {
  uint8_t b[sizeof(T)];
  std::memcpy(b, &v, sizeof(T));
  o.insert(o.end(), b, b + sizeof(T));
}
void put_str(std::vector<uint8_t>& o, const std::string& s) {
  put<uint64_t>(o, s.size());
  o.insert(o.end(), s.begin(), s.end());
}
void put_value(std::vector<uint8_t>& o, const Value& v) {
  switch (v.type) {
    case VType::U8: put<uint8_t>(o, static_cast<uint8_t>(v.u)); break;
    case VType::I8: put<int8_t>(o, static_cast<int8_t>(v.i)); break;
    case VType::U16: put<uint16_t>(o, static_cast<uint16_t>(v.u)); break;
    case VType::I16: put<int16_t>(o, static_cast<int16_t>(v.i)); break;
    case VType::U32: put<uint32_t>(o, static_cast<uint32_t>(v.u)); break;
    case VType::I32: put<int32_t>(o, static_cast<int32_t>(v.i)); break;
    case VType::U64: put<uint64_t>(o, v.u); break;
    case VType::I64: put<int64_t>(o, v.i); break;
    case VType::F32: put<float>(o, static_cast<float>(v.f)); break;
    case VType::F64: put<double>(o, v.f); break;
    case VType::BOOL: put<uint8_t>(o, v.u ? 1 : 0); break;
    case VType::STRING: put_str(o, v.s); break;
    case VType::ARRAY:
      put<uint32_t>(o, static_cast<uint32_t>(v.elem));
      put<uint64_t>(o, v.arr.size());
      for (const Value& e : v.arr) put_value(o, e);
      break;
  }
}
}  // namespace

std::vector<uint8_t> Writer::to_bytes() const {
  std::vector<uint8_t> o;
  put<uint32_t>(o, kMagic);
  put<uint32_t>(o, kVersion);
  put<uint64_t>(o, tensors_.size());
  put<uint64_t>(o, kv_.size());
  for (const auto& [k, v] : kv_) {
    put_str(o, k);
    put<uint32_t>(o, static_cast<uint32_t>(v.type));
    put_value(o, v);
  }
  const uint64_t A = kDefaultAlignment;
  uint64_t off = 0;
  for (const T& t : tensors_) {
    put_str(o, t.name);
    put<uint32_t>(o, static_cast<uint32_t>(t.ne.size()));
    for (uint64_t e : t.ne) put<uint64_t>(o, e);
    put<uint32_t>(o, t.type);
    put<uint64_t>(o, off);
    off = (off + t.bytes.size() + A - 1) / A * A;
  }
  o.resize((o.size() + A - 1) / A * A, 0);
  for (const T& t : tensors_) {
    o.insert(o.end(), t.bytes.begin(), t.bytes.end());
    o.resize((o.size() + A - 1) / A * A, 0);
  }
  return o;
}

void Writer::save(const std::string& path) const {
  std::vector<uint8_t> bytes = to_bytes();
  write_file_atomic(path, [&](std::FILE* f) { fwrite_checked(f, bytes.data(), bytes.size(), path); });
}
}  // namespace edgetrain::gguf

namespace edgetrain {

bool is_gguf_file(const std::string& path) {
  std::error_code ec;
  if (!std::filesystem::is_regular_file(path, ec)) return false;
  std::ifstream in(path, std::ios::binary);
  char m[4] = {};
  return in && in.read(m, 4) && std::string_view(m, 4) == "GGUF";
}

}  // namespace edgetrain
