// GGUF reading (bounds-checked against the file size before every allocation), tensor decoding, the
// Q4_0 <-> q4gsw conversion, and writing.
#include "io/gguf.h"

#include <cmath>
#include <cstring>
#include <fstream>
#include <sstream>

#include "edgetrain/error.h"
#include "edgetrain/half.h"
#include "edgetrain/safetensors.h"
#include "io/atomic_file.h"
#ifndef EDGETRAIN_GGUF_READER_ONLY  // the fuzz target builds only the file format part
#include "edgetrain/interop.h"
#include "edgetrain/q4gsw.h"
#endif

namespace edgetrain::gguf {

const char* type_name(uint32_t t) {
  switch (t) {
    case F32: return "F32";
    case F16: return "F16";
    case Q4_0: return "Q4_0";
    case Q8_0: return "Q8_0";
  }
  return "unsupported";
}

uint64_t tensor_bytes(uint32_t type, uint64_t numel, const std::string& what) {
  switch (type) {
    case F32: return numel * 4;
    case F16: return numel * 2;
    case Q4_0:
    case Q8_0:
      ET_CHECK(numel % 32 == 0, what, ": ", type_name(type), " needs a multiple of 32 elements, got ", numel);
      return numel / 32 * (type == Q4_0 ? 18 : 34);
  }
  fail(what, ": unsupported tensor type ", type, " (supported: F32, F16, Q4_0, Q8_0)");
}

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
    t.nbytes = tensor_bytes(t.type, t.numel, "file " + source_ + ": tensor '" + t.name + "'");
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
  std::vector<float> out(static_cast<size_t>(t.numel));
  const uint8_t* src = data(t);
  switch (t.type) {
    case F32: safetensors::convert_to_f32("F32", src, out.size(), out.data()); break;
    case F16: safetensors::convert_to_f32("F16", src, out.size(), out.data()); break;
    case Q4_0: decode_q4_0(src, t.numel, out.data()); break;
    case Q8_0: decode_q8_0(src, t.numel, out.data()); break;
    default: fail("file ", source_, ": tensor '", t.name, "' has unsupported type ", t.type);
  }
  return out;
}

// ---- numbers and blocks ----

static float half(const uint8_t* p) {
  uint16_t h;
  std::memcpy(&h, p, 2);
  return f16_to_f32(h);
}

void decode_q4_0(const uint8_t* src, uint64_t numel, float* dst) {
  for (uint64_t b = 0; b < numel / 32; ++b) {
    const uint8_t* blk = src + b * 18;
    float d = half(blk);
    for (int j = 0; j < 16; ++j) {
      dst[b * 32 + j] = static_cast<float>((blk[2 + j] & 0xf) - 8) * d;
      dst[b * 32 + j + 16] = static_cast<float>((blk[2 + j] >> 4) - 8) * d;
    }
  }
}

void decode_q8_0(const uint8_t* src, uint64_t numel, float* dst) {
  for (uint64_t b = 0; b < numel / 32; ++b) {
    const uint8_t* blk = src + b * 34;
    float d = half(blk);
    for (int j = 0; j < 32; ++j) dst[b * 32 + j] = static_cast<float>(static_cast<int8_t>(blk[2 + j])) * d;
  }
}

void q4_0_to_q4gsw(const uint8_t* src, int64_t N, int64_t K, uint8_t* codes, float* scales) {
  ET_CHECK(K % 32 == 0, "Q4_0: K = ", K, " is not a multiple of 32");
  const int64_t G = K / 32;
  for (int64_t n = 0; n < N; ++n)
    for (int64_t g = 0; g < G; ++g) {
      const uint8_t* blk = src + (n * G + g) * 18;
      scales[g * N + n] = half(blk);
      for (int j = 0; j < 16; ++j) {
        codes[n * K + g * 32 + j] = blk[2 + j] & 0xf;
        codes[n * K + g * 32 + j + 16] = blk[2 + j] >> 4;
      }
    }
}

std::vector<uint8_t> q4gsw_to_q4_0(int64_t N, int64_t K, const uint8_t* codes, const float* scales) {
  ET_CHECK(K % 32 == 0, "Q4_0: K = ", K, " is not a multiple of 32");
  const int64_t G = K / 32;
  std::vector<uint8_t> out(static_cast<size_t>(N * G * 18));
  for (int64_t n = 0; n < N; ++n)
    for (int64_t g = 0; g < G; ++g) {
      uint8_t* blk = out.data() + (n * G + g) * 18;
      float s = scales[g * N + n];
      uint16_t h = f32_to_f16(s);
      ET_CHECK(f16_to_f32(h) == s, "Q4_0: scale ", s, " (row ", n, ", group ", g,
               ") is not representable in fp16");
      std::memcpy(blk, &h, 2);
      for (int j = 0; j < 16; ++j)
        blk[2 + j] = static_cast<uint8_t>((codes[n * K + g * 32 + j] & 0xf) | (codes[n * K + g * 32 + j + 16] << 4));
    }
  return out;
}

std::vector<uint8_t> quantize_q4_0(const float* w, uint64_t numel) {
  std::vector<uint8_t> out(static_cast<size_t>(numel / 32 * 18));
  for (uint64_t b = 0; b < numel / 32; ++b) {
    const float* x = w + b * 32;
    float amax = 0, mx = 0;
    for (int j = 0; j < 32; ++j)
      if (std::fabs(x[j]) > amax) amax = std::fabs(x[j]), mx = x[j];
    uint16_t h = f32_to_f16(mx / -8.0f);
    float d = f16_to_f32(h);  // quantize with the stored (rounded) scale
    float id = d != 0.0f ? 1.0f / d : 0.0f;
    uint8_t* blk = out.data() + b * 18;
    std::memcpy(blk, &h, 2);
    auto code = [&](float v) {
      int c = static_cast<int>(std::nearbyint(v * id)) + 8;
      return static_cast<uint8_t>(c < 0 ? 0 : c > 15 ? 15 : c);
    };
    for (int j = 0; j < 16; ++j) blk[2 + j] = static_cast<uint8_t>(code(x[j]) | (code(x[j + 16]) << 4));
  }
  return out;
}

// ---- writing ----

void Writer::add_kv(const std::string& key, Value v) { kv_.emplace_back(key, std::move(v)); }

void Writer::add_tensor(const std::string& name, std::vector<uint64_t> ne, uint32_t type, std::vector<uint8_t> bytes) {
  uint64_t n = 1;
  for (uint64_t e : ne) n *= e;
  ET_CHECK(bytes.size() == tensor_bytes(type, n, "gguf writer: tensor '" + name + "'"), "gguf writer: tensor '", name,
           "' has ", bytes.size(), " bytes, expected ", tensor_bytes(type, n, name));
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

// ---- tokenizer metadata ----

GgufVocab read_vocab(const File& f) {
  GgufVocab v;
  const std::string& src = f.source();
  if (!f.has("tokenizer.ggml.model")) return v;
  v.model = f.get_string("tokenizer.ggml.model");
  if (f.has("tokenizer.ggml.pre")) v.pre = f.get_string("tokenizer.ggml.pre");
  // An array whose elements pass `ok`, or null when the key is absent.
  auto array = [&](const char* key, bool (*ok)(VType), const char* what) -> const std::vector<Value>* {
    const Value* x = f.find(key);
    if (!x) return nullptr;
    ET_CHECK(x->type == VType::ARRAY && ok(x->elem), "file ", src, ": metadata key '", key, "' must be an array of ",
             what);
    return &x->arr;
  };
  auto is_string = [](VType t) { return t == VType::STRING; };
  auto is_number = [](VType t) { return t != VType::STRING && t != VType::ARRAY && t != VType::BOOL; };
  auto is_integer = [](VType t) {
    return t != VType::STRING && t != VType::ARRAY && t != VType::BOOL && t != VType::F32 && t != VType::F64;
  };
  const auto* tokens = array("tokenizer.ggml.tokens", is_string, "strings");
  ET_CHECK(tokens, "file ", src, ": tokenizer.ggml.model is set but tokenizer.ggml.tokens is missing");
  v.tokens.reserve(tokens->size());
  for (const Value& e : *tokens) v.tokens.push_back(e.s);
  if (const auto* a = array("tokenizer.ggml.scores", is_number, "numbers")) {
    ET_CHECK(a->size() == v.tokens.size(), "file ", src, ": tokenizer.ggml.scores has ", a->size(),
             " entries but tokenizer.ggml.tokens has ", v.tokens.size());
    for (const Value& e : *a) v.scores.push_back(e.is_float() ? static_cast<float>(e.f) : static_cast<float>(e.i));
  }
  if (const auto* a = array("tokenizer.ggml.token_type", is_integer, "integers")) {
    ET_CHECK(a->size() == v.tokens.size(), "file ", src, ": tokenizer.ggml.token_type has ", a->size(),
             " entries but tokenizer.ggml.tokens has ", v.tokens.size());
    for (const Value& e : *a) {
      // Out-of-range values become -1, which make_gguf_tokenizer rejects naming the index.
      v.token_types.push_back(e.i >= 0 && e.i <= 255 ? static_cast<int32_t>(e.i) : -1);
    }
  }
  if (const auto* a = array("tokenizer.ggml.merges", is_string, "strings"))
    for (const Value& e : *a) v.merges.push_back(e.s);
  auto id = [&](const char* key, int64_t& out) {
    if (!f.has(key)) return;
    const int64_t x = f.get_int(key);
    ET_CHECK(x >= 0 && x < static_cast<int64_t>(v.tokens.size()), "file ", src, ": ", key, " = ", x,
             " is outside the vocabulary [0, ", v.tokens.size(), ")");
    out = x;
  };
  id("tokenizer.ggml.bos_token_id", v.bos);
  id("tokenizer.ggml.eos_token_id", v.eos);
  id("tokenizer.ggml.unknown_token_id", v.unk);
  id("tokenizer.ggml.padding_token_id", v.pad);
  auto flag = [&](const char* key, int& out) {
    const Value* x = f.find(key);
    if (!x) return;
    ET_CHECK(x->type == VType::BOOL, "file ", src, ": metadata key '", key, "' must be a bool");
    out = x->u ? 1 : 0;
  };
  flag("tokenizer.ggml.add_bos_token", v.add_bos);
  flag("tokenizer.ggml.add_eos_token", v.add_eos);
  flag("tokenizer.ggml.add_space_prefix", v.add_space_prefix);
  return v;
}

void add_vocab(Writer& w, const GgufVocab& v) {
  w.add_kv("tokenizer.ggml.model", Value::str(v.model));
  if (!v.pre.empty()) w.add_kv("tokenizer.ggml.pre", Value::str(v.pre));
  w.add_kv("tokenizer.ggml.tokens", Value::strings(v.tokens));
  if (!v.scores.empty()) w.add_kv("tokenizer.ggml.scores", Value::f32s(v.scores));
  if (!v.token_types.empty()) w.add_kv("tokenizer.ggml.token_type", Value::i32s(v.token_types));
  if (!v.merges.empty() || v.model == "gpt2") w.add_kv("tokenizer.ggml.merges", Value::strings(v.merges));
  const std::pair<const char*, int64_t> ids[] = {{"tokenizer.ggml.bos_token_id", v.bos},
                                                 {"tokenizer.ggml.eos_token_id", v.eos},
                                                 {"tokenizer.ggml.unknown_token_id", v.unk},
                                                 {"tokenizer.ggml.padding_token_id", v.pad}};
  for (const auto& [key, id] : ids)
    if (id >= 0) w.add_kv(key, Value::u32(static_cast<uint32_t>(id)));
  const std::pair<const char*, int> flags[] = {{"tokenizer.ggml.add_bos_token", v.add_bos},
                                               {"tokenizer.ggml.add_eos_token", v.add_eos},
                                               {"tokenizer.ggml.add_space_prefix", v.add_space_prefix}};
  for (const auto& [key, f] : flags)
    if (f >= 0) w.add_kv(key, Value::boolean(f != 0));
}

}  // namespace edgetrain::gguf

namespace edgetrain {

GgufVocab read_gguf_vocab(const std::string& path) { return gguf::read_vocab(gguf::File::open(path)); }

void save_gguf_tokenizer(const std::string& path, const GgufVocab& vocab) {
  gguf::Writer w;
  w.add_kv("general.name", gguf::Value::str("edgetrain tokenizer"));
  gguf::add_vocab(w, vocab);
  w.save(path);
}

std::unique_ptr<Tokenizer> load_gguf_tokenizer(const std::string& path, std::vector<std::string>* warnings) {
  return make_gguf_tokenizer(read_gguf_vocab(path), path, warnings);
}

}  // namespace edgetrain

// ---- llama models <-> GGUF ----
#ifndef EDGETRAIN_GGUF_READER_ONLY

namespace edgetrain {

namespace {

// Our parameter name -> GGUF tensor name ("" for LoRA adapters, which are merged, not exported).
std::string gguf_name(const std::string& ours) {
  if (ours.find(".lora_") != std::string::npos) return "";
  if (ours == "tok_embeddings.weight") return "token_embd.weight";
  if (ours == "norm.weight") return "output_norm.weight";
  if (ours == "output.weight") return "output.weight";
  static const std::pair<const char*, const char*> table[] = {
      {"attention_norm.weight", "attn_norm.weight"}, {"attention.wq.weight", "attn_q.weight"},
      {"attention.wk.weight", "attn_k.weight"},      {"attention.wv.weight", "attn_v.weight"},
      {"attention.wo.weight", "attn_output.weight"}, {"ffn_norm.weight", "ffn_norm.weight"},
      {"feed_forward.w1.weight", "ffn_gate.weight"}, {"feed_forward.w3.weight", "ffn_up.weight"},
      {"feed_forward.w2.weight", "ffn_down.weight"}};
  size_t dot = ours.find('.', 7);  // "layers.<i>.<rest>"
  ET_CHECK(ours.rfind("layers.", 0) == 0 && dot != std::string::npos, "gguf: no GGUF name for '", ours, "'");
  std::string rest = ours.substr(dot + 1);
  for (auto& [a, b] : table)
    if (rest == a) return "blk." + ours.substr(7, dot - 7) + "." + b;
  fail("gguf: no GGUF name for '", ours, "'");
}

std::vector<uint64_t> gguf_dims(const Shape& s) {
  std::vector<uint64_t> ne;
  for (int64_t d = s.rank() - 1; d >= 0; --d) ne.push_back(static_cast<uint64_t>(s[d]));
  return ne;
}

ModelConfig config_from(const gguf::File& f, TrainMode mode, int64_t group_size) {
  const std::string& src = f.source();
  std::string arch = f.get_string("general.architecture");
  ET_CHECK(arch == "llama", "file ", src, ": general.architecture is '", arch, "', only 'llama' is supported");
  ModelConfig c;
  c.mode = mode;
  c.group_size = group_size;
  c.dim = f.get_int("llama.embedding_length");
  c.n_layers = f.get_int("llama.block_count");
  c.n_heads = f.get_int("llama.attention.head_count");
  if (f.has("llama.attention.head_count_kv")) {
    // Grouped-query attention. K rows are in llama.cpp's order already (adjacent rotary pairs within each
    // of the head_count_kv heads, as convert_hf_to_gguf permutes them): nothing to permute here.
    int64_t kv = f.get_int("llama.attention.head_count_kv");
    ET_CHECK(kv >= 1 && c.n_heads >= 1 && c.n_heads % kv == 0, "file ", src, ": llama.attention.head_count_kv = ", kv,
             " does not divide llama.attention.head_count = ", c.n_heads,
             " (grouped-query attention needs n_heads / n_kv_heads query heads per key/value head)");
    c.n_kv_heads = kv;
  }
  c.ffn_dim = f.get_int("llama.feed_forward_length");
  c.max_seq = f.has("llama.context_length") ? f.get_int("llama.context_length") : 2048;
  if (f.has("llama.rope.freq_base")) c.rope_theta = static_cast<float>(f.get_float("llama.rope.freq_base"));
  c.norm_eps = static_cast<float>(f.get_float("llama.attention.layer_norm_rms_epsilon"));
  ET_CHECK(c.n_heads >= 1 && c.dim % c.n_heads == 0, "file ", src, ": llama.embedding_length ", c.dim,
           " is not a multiple of llama.attention.head_count ", c.n_heads);
  if (f.has("llama.rope.dimension_count"))
    ET_CHECK(f.get_int("llama.rope.dimension_count") == c.dim / c.n_heads, "file ", src,
             ": llama.rope.dimension_count differs from the head dim (partial rotary is not supported)");
  const gguf::TensorInfo* emb = f.tensor("token_embd.weight");
  ET_CHECK(emb && emb->ne.size() == 2, "file ", src, ": missing 2-D tensor 'token_embd.weight'");
  c.vocab = static_cast<int64_t>(emb->ne[1]);
  c.tied_head = f.tensor("output.weight") == nullptr;
  try {
    c.validate();
  } catch (const Error& e) {
    fail_kind(e.kind(), "file ", src, ": ", e.what());
  }
  return c;
}

}  // namespace

ModelConfig read_gguf_config(const std::string& path, TrainMode mode, int64_t group_size) {
  return config_from(gguf::File::open(path), mode, group_size);
}

std::unique_ptr<Model> load_gguf_model(const std::string& path, Backend& backend, TrainMode mode, int64_t group_size,
                                       ImportInfo* info) {
  gguf::File f = gguf::File::open(path);
  ModelConfig cfg = config_from(f, mode, group_size);
  auto model = std::make_unique<Model>(backend, cfg);
  model->init(1);  // LoRA adapters and moments; every base tensor is overwritten below
  std::vector<std::pair<Param*, const gguf::TensorInfo*>> exact;
  for (Param& p : model->params()) {
    std::string gn = gguf_name(p.name);
    if (gn.empty()) continue;
    const gguf::TensorInfo* t = f.tensor(gn);
    ET_CHECK(t, "file ", path, ": missing tensor '", gn, "' (for ", p.name, ")");
    ET_CHECK(t->ne == gguf_dims(p.value.shape()), "file ", path, ": tensor '", gn, "' has the wrong shape for ",
             p.name, " ", p.value.shape().str());
    std::vector<float> v = f.to_f32(*t);
    backend.upload(p.value, v.data(), v.size() * sizeof(float));
    if (p.quantized() && t->type == gguf::Q4_0 && group_size == 32) exact.push_back({&p, t});
  }
  model->quantize_from_masters();
  for (auto [p, t] : exact) {
    q4::Geometry g(p->value.shape()[0], p->value.shape()[1], 32);
    std::vector<uint8_t> codes(static_cast<size_t>(g.N * g.K));
    std::vector<float> scales(static_cast<size_t>(g.groups() * g.N));
    gguf::q4_0_to_q4gsw(f.data(*t), g.N, g.K, codes.data(), scales.data());
    auto words = q4::pack_w4x8(g, codes.data());
    backend.upload(p->codes, words.data(), words.size() * sizeof(uint32_t));
    backend.upload(p->scales, scales.data(), scales.size() * sizeof(float));
  }
  model->steps_done = 0;
  if (info) {
    info->config = cfg;
    try {
      info->vocab = gguf::read_vocab(f);
    } catch (const Error& e) {
      info->vocab = GgufVocab();
      info->notes.push_back(std::string("tokenizer metadata not usable: ") + e.what());
    }
    info->exact_q4 = static_cast<int>(exact.size());
  }
  return model;
}

GgufType gguf_type_from_name(const std::string& s) {
  if (s == "f32" || s == "F32") return GgufType::F32;
  if (s == "f16" || s == "F16") return GgufType::F16;
  if (s == "q4_0" || s == "Q4_0") return GgufType::Q4_0;
  fail("unknown GGUF type '", s, "' (choose f32, f16 or q4_0)");
}

GgufExportReport save_gguf(const std::string& path, Model& model, GgufType type, const Tokenizer* tok) {
  const ModelConfig& c = model.config();
  Backend& b = model.backend();
  GgufExportReport rep;
  gguf::Writer w;
  using V = gguf::Value;
  w.add_kv("general.architecture", V::str("llama"));
  w.add_kv("general.name", V::str("edgetrain"));
  w.add_kv("general.alignment", V::u32(32));
  w.add_kv("general.file_type", V::u32(type == GgufType::F32 ? 0 : type == GgufType::F16 ? 1 : 2));
  w.add_kv("llama.context_length", V::u32(static_cast<uint32_t>(c.max_seq)));
  w.add_kv("llama.embedding_length", V::u32(static_cast<uint32_t>(c.dim)));
  w.add_kv("llama.block_count", V::u32(static_cast<uint32_t>(c.n_layers)));
  w.add_kv("llama.feed_forward_length", V::u32(static_cast<uint32_t>(c.ffn_dim)));
  w.add_kv("llama.attention.head_count", V::u32(static_cast<uint32_t>(c.n_heads)));
  w.add_kv("llama.attention.head_count_kv", V::u32(static_cast<uint32_t>(c.kv_heads())));
  w.add_kv("llama.rope.dimension_count", V::u32(static_cast<uint32_t>(c.head_dim())));
  w.add_kv("llama.rope.freq_base", V::f32(c.rope_theta));
  w.add_kv("llama.attention.layer_norm_rms_epsilon", V::f32(c.norm_eps));
  w.add_kv("llama.vocab_size", V::u32(static_cast<uint32_t>(c.vocab)));
  if (tok) {
    ET_CHECK(tok->vocab_size() == c.vocab, "save_gguf: tokenizer '", tok->name(), "' has ", tok->vocab_size(),
             " tokens, the model ", c.vocab);
    gguf::add_vocab(w, tok->gguf_vocab());
  }
  for (Param& p : model.params()) {
    std::string gn = gguf_name(p.name);
    if (gn.empty()) continue;
    auto ne = gguf_dims(p.value.shape());
    std::vector<float> v = interop_detail::effective_weight(model, p);
    bool linear = p.value.shape().rank() == 2 && p.name != "tok_embeddings.weight";
    auto as_f32 = [&] {
      std::vector<uint8_t> bytes(v.size() * 4);
      std::memcpy(bytes.data(), v.data(), bytes.size());
      return bytes;
    };
    // Q4_0 files keep what edgetrain never quantizes (embeddings, norms, the output head) in F32, as trained:
    // the file is the model, not an approximation of it.
    if (!linear || type == GgufType::F32 || p.name == "output.weight") {
      w.add_tensor(gn, ne, gguf::F32, as_f32());
    } else if (type == GgufType::F16) {
      std::vector<uint8_t> bytes(v.size() * 2);
      for (size_t i = 0; i < v.size(); ++i) {
        uint16_t h = f32_to_f16(v[i]);
        std::memcpy(&bytes[2 * i], &h, 2);
      }
      w.add_tensor(gn, ne, gguf::F16, std::move(bytes));
    } else {
      const int64_t N = p.value.shape()[0], K = p.value.shape()[1];
      if (K % 32 != 0) {
        rep.warnings.push_back(p.name + ": K not a multiple of 32, written as F32");
        w.add_tensor(gn, ne, gguf::F32, as_f32());
        continue;
      }
      bool merged = false;
      for (Param& q : model.params())
        if (q.name == p.name + ".lora_b")
          for (float x : b.to_vector<float>(q.value)) merged |= x != 0.0f;
      // A q4gsw group of 32*j values with scale s is j Q4_0 blocks with that scale: exact whenever the group
      // size is a multiple of 32 and s is an fp16 value (quantize() rounds every scale to fp16).
      std::string why_not;
      if (!p.quantized()) why_not = "an fp32-mode weight";
      else if (merged) why_not = "merged LoRA adapters";
      else if (c.group_size % 32 != 0) why_not = "group size " + std::to_string(c.group_size) + " is not a multiple of 32";
      std::vector<float> scales32;
      if (why_not.empty()) {
        q4::Geometry g(N, K, c.group_size);
        const auto scales = b.to_vector<float>(p.scales);
        scales32.resize(static_cast<size_t>(K / 32 * N));
        for (int64_t j = 0; j < K / 32; ++j)
          for (int64_t n = 0; n < N; ++n) {
            const float sc = scales[(j * 32 / c.group_size) * N + n];
            if (round_to_f16(sc) != sc && why_not.empty())
              why_not = "scale " + std::to_string(sc) + " is not an fp16 value (a checkpoint of an older version)";
            scales32[j * N + n] = sc;
          }
      }
      if (why_not.empty()) {
        const auto codes = q4::unpack_w4x8(q4::Geometry(N, K, c.group_size), b.to_vector<uint32_t>(p.codes).data());
        w.add_tensor(gn, ne, gguf::Q4_0, gguf::q4gsw_to_q4_0(N, K, codes.data(), scales32.data()));
        ++rep.exact_q4;
      } else {
        auto blocks = gguf::quantize_q4_0(v.data(), v.size());
        std::vector<float> back(v.size());
        gguf::decode_q4_0(blocks.data(), back.size(), back.data());
        double err = 0, ref = 0;
        for (size_t i = 0; i < v.size(); ++i) err += (back[i] - v[i]) * double(back[i] - v[i]), ref += v[i] * double(v[i]);
        w.add_tensor(gn, ne, gguf::Q4_0, std::move(blocks));
        ++rep.requantized;
        char buf[64];
        std::snprintf(buf, sizeof buf, "%.3g%%", ref > 0 ? 100.0 * std::sqrt(err / ref) : 0.0);
        rep.warnings.push_back(p.name + ": re-quantized to Q4_0 (" + why_not + "), RMS weight error " + buf +
                               " of the weight RMS");
      }
    }
  }
  w.save(path);
  return rep;
}

}  // namespace edgetrain
#endif  // EDGETRAIN_GGUF_READER_ONLY
