// safetensors reader/writer and atomic file writes: round trips, a hand-built file, every class of corrupt
// header (each must raise Error naming the file), every truncation, a bounded random-mutation fuzz, injected
// write failures. Model checkpoints: test_checkpoint_io.cpp.
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/resource.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <random>

#include "edgetrain/half.h"
#include "edgetrain/safetensors.h"
#include "io/atomic_file.h"
#include "harness/temp_files.h"

namespace edgetrain {
namespace {

namespace fs = std::filesystem;
namespace st = safetensors;
using Bytes = std::vector<uint8_t>;

using SafetensorsFile = test::TempDirTest;

Bytes read_all(const std::string& p) {
  std::ifstream f(p, std::ios::binary);
  return Bytes((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
}

void write_all(const std::string& p, const Bytes& b) {
  std::ofstream f(p, std::ios::binary | std::ios::trunc);
  f.write(reinterpret_cast<const char*>(b.data()), static_cast<std::streamsize>(b.size()));
}

// A file per the spec, built by hand: u64 LE length, the JSON as given, the data bytes.
Bytes make_file(const std::string& header, const Bytes& data, uint64_t declared_len = UINT64_MAX) {
  uint64_t n = declared_len == UINT64_MAX ? header.size() : declared_len;
  Bytes out;
  for (int i = 0; i < 8; ++i) out.push_back(static_cast<uint8_t>(n >> (8 * i)));
  out.insert(out.end(), header.begin(), header.end());
  out.insert(out.end(), data.begin(), data.end());
  return out;
}

// Parsing must raise Error whose message names the source and contains `fragment`.
void expect_bad(const Bytes& b, const std::string& fragment, const std::string& source = "bad.safetensors") {
  std::string what = "(no error)";
  try {
    st::Reader::from_memory(b.data(), b.size(), source);
  } catch (const Error& e) {
    what = e.what();
  }
  EXPECT_NE(what.find(source), std::string::npos) << "source missing in: " << what;
  EXPECT_NE(what.find(fragment), std::string::npos) << "missing '" << fragment << "' in: " << what;
}

std::string entry(const std::string& name, const std::string& dtype, const std::string& shape, uint64_t b,
                  uint64_t e) {
  return cat("\"", name, "\":{\"dtype\":\"", dtype, "\",\"shape\":", shape, ",\"data_offsets\":[", b, ",", e, "]}");
}

// A small valid writer-made file with several dtypes, a scalar, an empty tensor and metadata.
st::Writer sample_writer(std::vector<std::vector<uint8_t>>& keep) {
  st::Writer w;
  keep.clear();
  auto add = [&](const std::string& name, const std::string& dtype, std::vector<int64_t> shape) {
    int64_t n = 1;
    for (int64_t d : shape) n *= d;
    Bytes b(static_cast<size_t>(n) * st::dtype_bytes(dtype));
    for (size_t i = 0; i < b.size(); ++i) b[i] = static_cast<uint8_t>(i * 37 + name.size());
    keep.push_back(b);
    w.add(name, dtype, shape, keep.back().data(), keep.back().size());
  };
  keep.reserve(16);
  add("weight", "F32", {2, 3});
  add("half", "F16", {4});
  add("brain", "BF16", {2, 2});
  add("scalar", "I32", {});
  add("empty", "U8", {0});
  add("empty3", "U32", {3, 0, 2});
  add("long", "I64", {2});
  add("flags", "BOOL", {5});
  w.set_metadata("author", "test");
  w.set_metadata("note", "ünïcode ✓");
  return w;
}

TEST(Safetensors, RoundTripInMemory) {
  std::vector<Bytes> keep;
  st::Writer w = sample_writer(keep);
  Bytes file = w.to_bytes();
  uint64_t n = 0;
  for (int i = 7; i >= 0; --i) n = (n << 8) | file[i];
  EXPECT_EQ((8 + n) % 8, 0u) << "data must start 8-byte aligned";
  st::Reader r = st::Reader::from_memory(file.data(), file.size(), "mem");
  ASSERT_EQ(r.tensors().size(), 8u);
  EXPECT_EQ(r.metadata().at("author"), "test");
  EXPECT_EQ(r.metadata().at("note"), "ünïcode ✓");
  const std::vector<std::string> names = {"weight", "half", "brain", "scalar", "empty", "empty3", "long", "flags"};
  for (size_t i = 0; i < names.size(); ++i) {
    const st::TensorInfo& t = r.info(names[i]);
    ASSERT_EQ(t.nbytes(), keep[i].size()) << names[i];
    // memcmp with a null pointer is undefined even for 0 bytes (an empty vector's data() may be null).
    if (!keep[i].empty()) {
      EXPECT_EQ(std::memcmp(r.data(names[i]), keep[i].data(), keep[i].size()), 0) << names[i];
    }
  }
  EXPECT_EQ(r.info("weight").shape, (std::vector<int64_t>{2, 3}));
  EXPECT_EQ(r.info("scalar").shape, std::vector<int64_t>{});
  EXPECT_EQ(r.info("scalar").numel(), 1);
  EXPECT_EQ(r.info("empty3").numel(), 0);
  EXPECT_EQ(r.info("half").dtype, "F16");
  // Stable order: name order is data order.
  std::vector<std::string> order;
  for (const auto& t : r.tensors()) order.push_back(t.name);
  std::vector<std::string> sorted = order;
  std::sort(sorted.begin(), sorted.end());
  EXPECT_EQ(order, sorted);
  EXPECT_FALSE(r.contains("nope"));
  EXPECT_THROW(r.info("nope"), Error);
  EXPECT_THROW(r.to_f32("long"), Error);
  // Writing the same content twice gives the same bytes.
  EXPECT_EQ(sample_writer(keep).to_bytes(), file);
}

TEST_F(SafetensorsFile, RoundTripThroughFilesSmallAndMapped) {
  std::vector<Bytes> keep;
  st::Writer w = sample_writer(keep);
  Bytes big(3 << 20);  // over the mmap threshold
  std::mt19937 rng(5);
  for (auto& b : big) b = static_cast<uint8_t>(rng());
  w.add("big", "U8", {static_cast<int64_t>(big.size())}, big.data(), big.size());
  w.save(path("a.safetensors"));
  EXPECT_FALSE(fs::exists(atomic_temp_path(path("a.safetensors"))));
  EXPECT_EQ(read_all(path("a.safetensors")), w.to_bytes());
  st::Reader r = st::Reader::open(path("a.safetensors"));
  EXPECT_EQ(r.source(), path("a.safetensors"));
  EXPECT_EQ(std::memcmp(r.data("big"), big.data(), big.size()), 0);
  EXPECT_EQ(std::memcmp(r.data("weight"), keep[0].data(), keep[0].size()), 0);
  st::Reader moved = std::move(r);
  EXPECT_EQ(std::memcmp(moved.data("big"), big.data(), big.size()), 0);
}

TEST(Safetensors, HandBuiltFileParses) {
  // F32 [2] = {1.5, -2}; F16 [3] = {1, -2, 65504}; BF16 [] = 1.0; U8 [2,1] = {7, 9}; with metadata, keys
  // in no particular order and padding spaces after the JSON.
  Bytes data = {0x00, 0x00, 0xC0, 0x3F, 0x00, 0x00, 0x00, 0xC0,  // f32 1.5, -2
                0x00, 0x3C, 0x00, 0xC0, 0xFF, 0x7B,              // f16 1, -2, 65504
                0x80, 0x3F,                                      // bf16 1.0
                7,    9};
  std::string header = "{" + entry("u", "U8", "[2, 1]", 16, 18) + "," + entry("b", "BF16", "[]", 14, 16) +
                       ",\"__metadata__\":{\"format\":\"pt\"}," + entry("f", "F32", "[2]", 0, 8) + "," +
                       entry("h", "F16", "[3]", 8, 14) + "}   ";
  Bytes file = make_file(header, data);
  st::Reader r = st::Reader::from_memory(file.data(), file.size(), "hand.safetensors");
  EXPECT_EQ(r.metadata().at("format"), "pt");
  EXPECT_EQ(r.to_f32("f"), (std::vector<float>{1.5f, -2.0f}));
  EXPECT_EQ(r.to_f32("h"), (std::vector<float>{1.0f, -2.0f, 65504.0f}));
  EXPECT_EQ(r.to_f32("b"), (std::vector<float>{1.0f}));
  EXPECT_EQ(r.info("u").shape, (std::vector<int64_t>{2, 1}));
  EXPECT_EQ(r.data("u")[1], 9);
  EXPECT_EQ(r.tensors().front().name, "f");
  EXPECT_EQ(r.data_bytes(), data.size());
}

TEST(Safetensors, HalfAndBfloatConversionIsExact) {
  EXPECT_EQ(f16_to_f32(0x0001), std::ldexp(1.0f, -24));  // smallest subnormal
  EXPECT_EQ(f16_to_f32(0x03FF), std::ldexp(1023.0f, -24));
  EXPECT_EQ(f16_to_f32(0x0400), std::ldexp(1.0f, -14));   // smallest normal
  EXPECT_EQ(f16_to_f32(0x7C00), INFINITY);
  EXPECT_EQ(f16_to_f32(0xFC00), -INFINITY);
  EXPECT_TRUE(std::isnan(f16_to_f32(0x7E00)));
  EXPECT_TRUE(std::signbit(f16_to_f32(0x8000)));
  EXPECT_EQ(bf16_to_f32(0xC049), -3.140625f);
#ifdef __FLT16_MAX__
  for (uint32_t h = 0; h < 65536; ++h) {  // every half against the compiler's conversion
    _Float16 x;
    uint16_t hb = static_cast<uint16_t>(h);
    std::memcpy(&x, &hb, 2);
    float want = static_cast<float>(x), got = f16_to_f32(hb);
    if (std::isnan(want)) ASSERT_TRUE(std::isnan(got)) << h;
    else ASSERT_EQ(std::memcmp(&want, &got, 4), 0) << "half 0x" << std::hex << h;
  }
#endif
}

TEST(Safetensors, WriterRejectsBadEntries) {
  st::Writer w;
  float x[4] = {};
  w.add("a", "F32", {4}, x, sizeof x);
  EXPECT_THROW(w.add("a", "F32", {4}, x, sizeof x), Error);        // duplicate
  EXPECT_THROW(w.add("b", "F32", {3}, x, sizeof x), Error);        // size mismatch
  EXPECT_THROW(w.add("c", "F99", {4}, x, sizeof x), Error);        // unknown dtype
  EXPECT_THROW(w.add("d", "F32", {-4}, x, sizeof x), Error);       // negative dim
  EXPECT_THROW(w.add("", "F32", {4}, x, sizeof x), Error);         // empty name
  EXPECT_THROW(w.add("__metadata__", "F32", {4}, x, sizeof x), Error);
  EXPECT_THROW(w.add("e", "U8", {int64_t(1) << 40, int64_t(1) << 40}, x, 1), Error);  // overflow-free mismatch
  EXPECT_EQ(w.size(), 1u);
}

// Every prefix of a valid file is rejected with the file named, from memory and from disk.
TEST_F(SafetensorsFile, EveryTruncationIsRejected) {
  std::vector<Bytes> keep;
  Bytes file = sample_writer(keep).to_bytes();
  ASSERT_GT(file.size(), 100u);
  for (size_t len = 0; len < file.size(); ++len) {
    Bytes cut(file.begin(), file.begin() + static_cast<std::ptrdiff_t>(len));  // exact size: overreads show in ASan
    std::string what = "(no error)";
    try {
      st::Reader::from_memory(cut.data(), cut.size(), "trunc.safetensors");
    } catch (const Error& e) {
      what = e.what();
    }
    ASSERT_NE(what.find("trunc.safetensors"), std::string::npos) << "length " << len << ": " << what;
    if (len % 7 == 0 || len + 1 == file.size()) {
      write_all(path("t.safetensors"), cut);
      try {
        st::Reader::open(path("t.safetensors"));
        ADD_FAILURE() << "truncated file of " << len << " bytes parsed";
      } catch (const Error& e) {
        EXPECT_NE(std::string(e.what()).find(path("t.safetensors")), std::string::npos) << e.what();
      }
    }
  }
}

TEST(Safetensors, CorruptHeadersAreRejected) {
  const Bytes d8(8, 0);
  const std::string ok = entry("a", "F32", "[2]", 0, 8);
  // Sanity: the base case parses.
  Bytes good = make_file("{" + ok + "}", d8);
  EXPECT_NO_THROW(st::Reader::from_memory(good.data(), good.size(), "x"));

  expect_bad(make_file("{" + ok + "}", d8, 1000), "exceeds the file size");
  expect_bad(make_file("{" + ok + "}", d8, uint64_t(1) << 63), "exceeds the limit");
  expect_bad(make_file("{" + ok + "}", d8, 200ull << 20), "exceeds the limit");
  expect_bad(Bytes{1, 0, 0}, "too short");
  expect_bad(make_file("", {}), "does not start with '{'");
  expect_bad(make_file("[1, 2]", {}), "does not start with '{'");
  expect_bad(make_file("{\"a\": ", {}), "not valid JSON");
  expect_bad(make_file("{\"a\":1,}", {}), "not valid JSON");
  expect_bad(make_file("{" + ok + "} x", d8), "not valid JSON");
  expect_bad(make_file("{\"a\": 5}", {}), "is not a JSON object");
  expect_bad(make_file("{\"__metadata__\": [1]}", {}), "__metadata__ is not a JSON object");
  expect_bad(make_file("{\"__metadata__\": {\"k\": 1}}", {}), "is not a string");
  expect_bad(make_file("{\"a\":{\"dtype\":\"F32\",\"shape\":[2]}}", d8), "lacks one of the fields");
  expect_bad(make_file("{\"a\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8],\"x\":1}}", d8), "unknown field 'x'");
  expect_bad(make_file("{" + entry("a", "F32", "[2]", 0, 16) + "}", d8), "exceed the data buffer");
  expect_bad(make_file("{" + entry("a", "F32", "[2]", 8, 0) + "}", d8), "reversed");
  expect_bad(make_file("{" + entry("a", "F32", "[3]", 0, 8) + "}", d8), "needs 12");
  expect_bad(make_file("{" + entry("a", "F32", "[2]", 0, 8) + "," + entry("b", "U8", "[4]", 4, 8) + "}", d8),
             "overlaps");
  expect_bad(make_file("{" + entry("a", "U8", "[4]", 4, 8) + "}", d8), "gap");
  expect_bad(make_file("{" + entry("a", "U8", "[4]", 0, 4) + "}", d8), "trailing bytes");
  expect_bad(make_file("{" + entry("a", "F32", "[-2]", 0, 8) + "}", d8), "non-negative");
  expect_bad(make_file("{" + entry("a", "F32", "[2.0]", 0, 8) + "}", d8), "non-negative");
  expect_bad(make_file("{" + entry("a", "F32", "[\"2\"]", 0, 8) + "}", d8), "non-negative");
  expect_bad(make_file("{" + entry("a", "F32", "[18446744073709551615]", 0, 8) + "}", d8), "non-negative");
  expect_bad(make_file("{" + entry("a", "F32", "[1099511627776, 1099511627776]", 0, 8) + "}", d8), "overflows");
  expect_bad(make_file("{" + entry("a", "F32", "[4294967296, 4294967296]", 0, 8) + "}", d8), "overflows");
  expect_bad(make_file("{" + entry("a", "F32", "[1099511627776]", 0, 8) + "}", d8), "needs 4398046511104");
  expect_bad(make_file("{" + entry("a", "F32", "[2]", 0, 8) + "," + entry("a", "F32", "[2]", 0, 8) + "}", d8),
             "duplicate key 'a'");
  expect_bad(make_file("{" + entry("a", "Q4", "[2]", 0, 8) + "}", d8), "unknown dtype 'Q4'");
  expect_bad(make_file("{\"a\":{\"dtype\":5,\"shape\":[2],\"data_offsets\":[0,8]}}", d8), "dtype is not a string");
  expect_bad(make_file("{\"a\":{\"dtype\":\"F32\",\"shape\":2,\"data_offsets\":[0,8]}}", d8), "shape is not an array");
  expect_bad(make_file("{\"a\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0]}}", d8), "data_offsets");
  expect_bad(make_file("{\"a\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[-1,7]}}", d8), "data_offsets");
  expect_bad(make_file("{" + entry("", "F32", "[2]", 0, 8) + "}", d8), "empty name");
  std::string rank33 = "[1";
  for (int i = 0; i < 32; ++i) rank33 += ",1";
  expect_bad(make_file("{" + entry("a", "U8", rank33 + "]", 0, 1) + "}", Bytes(1)), "rank 33");
  expect_bad(make_file("{\"__metadata__\":{\"k\":" + std::string(10000, '[') + "}}", {}), "nested deeper");
  expect_bad(make_file("{\"a\":\"\xff\xfe\"}", {}), "not valid JSON");  // invalid UTF-8
  // Huge-but-empty shapes are fine: a zero dimension makes the tensor empty whatever the others are.
  Bytes empty_ok = make_file("{" + entry("z", "F64", "[4611686018427387904, 4611686018427387904, 0]", 0, 0) + "}", {});
  st::Reader r = st::Reader::from_memory(empty_ok.data(), empty_ok.size(), "z");
  EXPECT_EQ(r.info("z").numel(), 0);
}

// A parse that succeeds must describe a self-consistent file whose every byte can be read.
void check_consistent(const st::Reader& r, size_t file_size) {
  uint64_t total = 0;
  for (const st::TensorInfo& t : r.tensors()) {
    ASSERT_LE(t.begin, t.end);
    ASSERT_LE(t.end, r.data_bytes());
    ASSERT_EQ(static_cast<uint64_t>(t.numel()) * st::dtype_bytes(t.dtype), t.nbytes());
    total += t.nbytes();
    volatile uint8_t sink = 0;
    const uint8_t* p = r.data(t.name);
    for (uint64_t i = 0; i < t.nbytes(); ++i) sink = sink ^ p[i];
    if (t.dtype == "F32" || t.dtype == "F16" || t.dtype == "BF16") {
      EXPECT_EQ(r.to_f32(t.name).size(), size_t(t.numel()));
    }
  }
  ASSERT_EQ(total, r.data_bytes());
  ASSERT_LE(r.data_bytes(), file_size);
}

// The always-on stand-in for the libFuzzer target: 3000 seeded mutations of a valid file (bit flips, byte
// sets, truncations, insertions, length-prefix edits) must each throw Error or parse consistently.
TEST(Safetensors, BoundedFuzzNeverCrashes) {
  std::vector<Bytes> keep;
  const Bytes base = sample_writer(keep).to_bytes();
  std::mt19937_64 rng(20240607);
  int parsed = 0, rejected = 0;
  for (int iter = 0; iter < 3000; ++iter) {
    Bytes b = base;
    const int edits = 1 + static_cast<int>(rng() % 4);
    for (int e = 0; e < edits && !b.empty(); ++e) {
      size_t pos = rng() % b.size();
      switch (rng() % 6) {
        case 0: b[pos] ^= static_cast<uint8_t>(1u << (rng() % 8)); break;
        case 1: b[pos] = static_cast<uint8_t>(rng()); break;
        case 2: b.resize(pos); break;
        case 3: b.insert(b.begin() + static_cast<std::ptrdiff_t>(pos), static_cast<uint8_t>(rng())); break;
        case 4: b[pos] = "{}[]\",:0123456789-eE. "[rng() % 22]; break;  // JSON-ish bytes
        case 5: if (b.size() >= 8) b[rng() % 8] = static_cast<uint8_t>(rng()); break;  // length prefix
      }
    }
    try {
      st::Reader r = st::Reader::from_memory(b.data(), b.size(), "fuzz");
      check_consistent(r, b.size());
      ++parsed;
    } catch (const Error& e) {
      ASSERT_NE(std::string(e.what()).find("fuzz"), std::string::npos) << e.what();
      ++rejected;
    } catch (const std::exception& e) {
      FAIL() << "mutation " << iter << " raised a non-Error exception: " << e.what();
    }
  }
  std::printf("bounded fuzz: %d parsed, %d rejected\n", parsed, rejected);
  EXPECT_GT(rejected, 1000);
  EXPECT_GT(parsed, 10);  // e.g. flips inside data bytes or metadata strings
}

// ---- atomic writes ----

TEST_F(SafetensorsFile, AtomicWriteReplacesAndCleansUp) {
  std::string p = path("f.bin");
  write_all(p, {1, 2, 3});
  write_file_atomic(p, [](std::FILE* f) { fwrite_checked(f, "hello", 5, "f"); });
  EXPECT_EQ(read_all(p), (Bytes{'h', 'e', 'l', 'l', 'o'}));
  EXPECT_FALSE(fs::exists(atomic_temp_path(p)));
  EXPECT_EQ(std::distance(fs::directory_iterator(dir), fs::directory_iterator()), 1);
}

TEST_F(SafetensorsFile, AtomicWriteFailureKeepsPreviousFile) {
  std::string p = path("f.bin");
  write_all(p, {1, 2, 3});
  std::string what;
  try {
    write_file_atomic(p, [](std::FILE* f) {
      fwrite_checked(f, "partial", 7, "f");
      std::fflush(f);
      fail("simulated: ", std::strerror(ENOSPC));  // what a writer sees on a full disk
    });
  } catch (const Error& e) {
    what = e.what();
  }
  EXPECT_NE(what.find(p), std::string::npos) << what;
  EXPECT_NE(what.find("previous file (if any) is intact"), std::string::npos) << what;
  EXPECT_NE(what.find(std::strerror(ENOSPC)), std::string::npos) << what;
  EXPECT_EQ(read_all(p), (Bytes{1, 2, 3}));
  EXPECT_FALSE(fs::exists(atomic_temp_path(p)));
}

TEST_F(SafetensorsFile, AtomicWriteToMissingDirectoryFails) {
  std::string p = path("no/such/dir/f.bin");
  std::string what;
  try {
    write_file_atomic(p, [](std::FILE* f) { fwrite_checked(f, "x", 1, "f"); });
  } catch (const Error& e) {
    what = e.what();
  }
  EXPECT_NE(what.find(p), std::string::npos) << what;
  EXPECT_NE(what.find(std::strerror(ENOENT)), std::string::npos) << what;
}

// A real short write: the file-size limit makes write(2) fail with EFBIG, as a full disk fails with
// ENOSPC, and the same checks catch it (SIGXFSZ is ignored for the test and restored after).
TEST_F(SafetensorsFile, AtomicWriteRealShortWriteIsCaught) {
  std::string p = path("big.bin");
  write_all(p, {9, 9});
  struct rlimit old {};
  ASSERT_EQ(::getrlimit(RLIMIT_FSIZE, &old), 0);
  if (old.rlim_max != RLIM_INFINITY && old.rlim_max < (1 << 20)) GTEST_SKIP() << "hard file size limit too low";
  auto old_handler = ::signal(SIGXFSZ, SIG_IGN);
  struct rlimit lim = old;
  lim.rlim_cur = 64 << 10;
  ASSERT_EQ(::setrlimit(RLIMIT_FSIZE, &lim), 0);
  std::string what;
  try {
    Bytes mb(1 << 20, 7);
    write_file_atomic(p, [&](std::FILE* f) { fwrite_checked(f, mb.data(), mb.size(), p); });
  } catch (const Error& e) {
    what = e.what();
  }
  ::setrlimit(RLIMIT_FSIZE, &old);
  ::signal(SIGXFSZ, old_handler);
  EXPECT_NE(what.find(std::strerror(EFBIG)), std::string::npos) << what;
  EXPECT_NE(what.find("intact"), std::string::npos) << what;
  EXPECT_EQ(read_all(p), (Bytes{9, 9}));
  EXPECT_FALSE(fs::exists(atomic_temp_path(p)));
}

}  // namespace
}  // namespace edgetrain
