// Corrupt GGUF files: truncations at every length, huge counts, bad fields (each refused with one message
// naming the problem), and a fixed-seed mutation loop that must never crash the reader.
#include <gtest/gtest.h>

#include <cstring>
#include <fstream>
#include <random>
#include <string>
#include <vector>

#include "edgetrain/backends.h"
#include "edgetrain/interop.h"
#include "io/gguf.h"
#include "harness/interop_helpers.h"

namespace edgetrain::test {
namespace {

std::vector<uint8_t> small_valid_gguf() {
  gguf::Writer w;
  w.add_kv("general.architecture", gguf::Value::str("llama"));
  w.add_kv("u8", [] { gguf::Value v; v.type = gguf::VType::U8; v.u = 7; return v; }());
  w.add_kv("f64", [] { gguf::Value v; v.type = gguf::VType::F64; v.f = 2.5; return v; }());
  w.add_kv("b", gguf::Value::boolean(true));
  w.add_kv("strs", gguf::Value::strings({"a", "bc", ""}));
  gguf::Value nested;
  nested.type = gguf::VType::ARRAY;
  nested.elem = gguf::VType::ARRAY;
  nested.arr = {gguf::Value::f32s({1.0f, 2.0f}), gguf::Value::f32s({})};
  w.add_kv("nested", nested);
  std::vector<float> x = {1, 2, 3, 4, 5, 6};
  std::vector<uint8_t> xb(24);
  std::memcpy(xb.data(), x.data(), 24);
  w.add_tensor("x", {3, 2}, gguf::F32, xb);
  w.add_tensor("q", {32}, gguf::Q4_0, std::vector<uint8_t>(18, 0x11));
  return w.to_bytes();
}

// Parses and decodes everything; returns false when the file is rejected with an Error naming it.
bool parse_all(const std::vector<uint8_t>& b) {
  try {
    gguf::File f = gguf::File::from_memory(b.data(), b.size(), "corrupt.gguf");
    for (auto& t : f.tensors()) f.to_f32(t);
    for (auto& [k, v] : f.metadata()) v.describe();
    return true;
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("corrupt.gguf"), std::string::npos) << e.what();
    return false;
  }
}

TEST(Interop, GgufTruncatedAtEveryLengthIsRejected) {
  auto full = small_valid_gguf();
  ASSERT_TRUE(parse_all(full));
  gguf::File f = gguf::File::from_memory(full.data(), full.size(), "x");
  const gguf::TensorInfo* q = f.tensor("q");
  const size_t data_end = static_cast<size_t>(f.data(*q) - full.data()) + q->nbytes;
  int rejected = 0;
  for (size_t n = 0; n < full.size(); ++n) {
    std::vector<uint8_t> cut(full.begin(), full.begin() + static_cast<long>(n));
    bool ok = parse_all(cut);
    if (n < data_end) {
      EXPECT_FALSE(ok) << "length " << n;
    }
    rejected += !ok;
  }
  EXPECT_EQ(rejected, static_cast<int>(data_end));
}

std::vector<uint8_t> header(uint64_t n_tensors, uint64_t n_kv, uint32_t magic = gguf::kMagic, uint32_t version = 3) {
  std::vector<uint8_t> b(24);
  std::memcpy(&b[0], &magic, 4);
  std::memcpy(&b[4], &version, 4);
  std::memcpy(&b[8], &n_tensors, 8);
  std::memcpy(&b[16], &n_kv, 8);
  return b;
}
template <typename T>
void put(std::vector<uint8_t>& b, T v) {
  size_t at = b.size();
  b.resize(at + sizeof(T));
  std::memcpy(&b[at], &v, sizeof(T));
}
void put_str(std::vector<uint8_t>& b, const std::string& s) {
  put<uint64_t>(b, s.size());
  b.insert(b.end(), s.begin(), s.end());
}
std::string reject_message(const std::vector<uint8_t>& b) {
  try {
    gguf::File::from_memory(b.data(), b.size(), "corrupt.gguf");
  } catch (const Error& e) {
    return e.what();
  }
  return "ACCEPTED";
}
std::vector<uint8_t> one_tensor(uint32_t n_dims, std::vector<uint64_t> dims, uint32_t type, uint64_t offset) {
  auto b = header(1, 0);
  put_str(b, "t");
  put<uint32_t>(b, n_dims);
  for (uint64_t d : dims) put<uint64_t>(b, d);
  put<uint32_t>(b, type);
  put<uint64_t>(b, offset);
  b.resize(b.size() + 64, 0);
  return b;
}

TEST(Interop, GgufCorruptFieldsAreRejected) {
  struct Case {
    const char* what;
    std::vector<uint8_t> bytes;
    const char* expect;
  };
  std::vector<Case> cases;
  cases.push_back({"tensor count 2^60", header(uint64_t{1} << 60, 0), "tensor count"});
  cases.push_back({"kv count 2^62", header(0, uint64_t{1} << 62), "metadata count"});
  {
    auto b = header(0, 1);
    put<uint64_t>(b, uint64_t{1} << 62);  // key length
    b.resize(b.size() + 64, 0);
    cases.push_back({"string length 2^62", b, "truncated"});
  }
  {
    auto b = header(0, 1);
    put_str(b, "k");
    put<uint32_t>(b, 8);  // STRING
    put<uint64_t>(b, uint64_t{1} << 62);
    b.resize(b.size() + 64, 0);
    cases.push_back({"string value length 2^62", b, "truncated"});
  }
  {
    auto b = header(0, 1);
    put_str(b, "k");
    put<uint32_t>(b, 9);  // ARRAY
    put<uint32_t>(b, 0);  // of u8
    put<uint64_t>(b, uint64_t{1} << 62);
    cases.push_back({"array count 2^62", b, "array count"});
  }
  {
    auto b = header(0, 1);
    put_str(b, "k");
    put<uint32_t>(b, 13);
    cases.push_back({"bad value type", b, "unknown value type"});
  }
  {
    auto b = header(0, 1);
    put_str(b, "k");
    put<uint32_t>(b, 9);  // ARRAY of ARRAY of ARRAY ...
    for (int d = 0; d < 20; ++d) put<uint32_t>(b, 9), put<uint64_t>(b, 1);
    cases.push_back({"deep nesting", b, "nested"});
  }
  cases.push_back({"bad magic", header(0, 0, 0x12345678), "bad magic"});
  cases.push_back({"bad version", header(0, 0, gguf::kMagic, 99), "version"});
  cases.push_back({"bad tensor type", one_tensor(1, {32}, 99, 0), "unknown tensor type 99"});
  cases.push_back({"removed tensor type", one_tensor(1, {32}, 31, 0), "unknown tensor type 31"});
  cases.push_back({"five dims", one_tensor(5, {1, 1, 1, 1, 1}, 0, 0), "dims"});
  cases.push_back({"dims overflow", one_tensor(2, {uint64_t{1} << 40, uint64_t{1} << 40}, 0, 0), "overflow"});
  cases.push_back({"offset past the end", one_tensor(1, {4}, 0, 1024), "past the end"});
  cases.push_back({"misaligned offset", one_tensor(1, {4}, 0, 4), "alignment"});
  cases.push_back({"partial Q4_0 block", one_tensor(1, {31}, 2, 0), "whole blocks of 32 elements, but ne[0] = 31"});
  // 256 values, but rows of 128: a Q4_K block would straddle two rows.
  cases.push_back({"Q4_K row of half a block", one_tensor(2, {128, 2}, 12, 0), "Q4_K row holds whole blocks of 256"});
  for (auto& c : cases) {
    std::string m = reject_message(c.bytes);
    EXPECT_NE(m.find("corrupt.gguf"), std::string::npos) << c.what << ": " << m;
    EXPECT_NE(m.find(c.expect), std::string::npos) << c.what << ": " << m;
  }
  // From disk: the error names the path.
  std::string path = interop_tmp("trunc.gguf");
  auto full = small_valid_gguf();
  std::ofstream(path, std::ios::binary).write(reinterpret_cast<const char*>(full.data()), 30);
  auto be = make_cpu_backend();
  try {
    load_gguf_model(path, *be, TrainMode::qat, 32);
    FAIL();
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find(path), std::string::npos) << e.what();
  }
}

TEST(Interop, GgufMutationFuzzNeverCrashes) {
  auto base = small_valid_gguf();
  std::mt19937_64 rng(1234);
  int accepted = 0, rejected = 0;
  for (int it = 0; it < 2000; ++it) {
    auto b = base;
    int edits = 1 + static_cast<int>(rng() % 4);
    for (int e = 0; e < edits; ++e) {
      size_t at = rng() % b.size();
      switch (rng() % 4) {
        case 0: b[at] ^= static_cast<uint8_t>(1u << (rng() % 8)); break;
        case 1: b[at] = static_cast<uint8_t>(rng()); break;
        case 2: {  // a large little-endian u64 somewhere
          uint64_t v = rng() >> (rng() % 64);
          for (int k = 0; k < 8 && at + k < b.size(); ++k) b[at + k] = static_cast<uint8_t>(v >> (8 * k));
          break;
        }
        case 3: b.resize(at); break;
      }
      if (b.empty()) break;
    }
    (parse_all(b) ? accepted : rejected)++;
  }
  EXPECT_EQ(accepted + rejected, 2000);
  EXPECT_GT(rejected, 500);
}

}  // namespace
}  // namespace edgetrain::test
