// Error kinds and the one fallback rule. Representative errors carry the kind of their cause (misuse,
// unsupported, device, io, numeric), and a --backend list (first_that_starts, the loop behind make_backend
// and train()'s start-up) moves on after device and unsupported errors only, whatever the message says:
// input errors raised inside the Vulkan backend are the error, a pipeline the driver cannot create falls
// back with a notice. The CLI's exit status per kind is checked in test_reliability*.cpp.
#include <sys/stat.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <optional>

#include <gtest/gtest.h>

#include "edgetrain/backends.h"
#include "edgetrain/safetensors.h"
#include "harness/scoped_env.h"

#ifdef EDGETRAIN_HAS_VULKAN
#include "vulkan/ops_gemm.h"
#include "vulkan/program.h"
#endif

namespace edgetrain::test {
namespace {

namespace fs = std::filesystem;

constexpr ErrorKind kAllKinds[] = {ErrorKind::misuse, ErrorKind::unsupported, ErrorKind::device, ErrorKind::io,
                                   ErrorKind::numeric};

// Runs f, which must throw an Error; returns it (a misuse Error saying "no error" when f returned).
template <typename F>
Error error_of(F&& f) {
  try {
    f();
  } catch (const Error& e) {
    return e;
  }
  ADD_FAILURE() << "no Error was thrown";
  return Error("no error");
}

// The candidates of `spec` that `attempt` saw, the index first_that_starts returned, and what it threw.
struct ListRun {
  std::vector<std::string> tried;
  std::optional<size_t> started;
  std::optional<Error> error;
  std::string notes;
};
ListRun run_list(const std::string& spec, const std::function<void(const BackendCandidate&)>& attempt) {
  ListRun r;
  try {
    r.started = first_that_starts(
        backend_plan(spec),
        [&](const BackendCandidate& c) {
          r.tried.push_back(c.backend);
          attempt(c);
        },
        "", &r.notes);
  } catch (const Error& e) {
    r.error = e;
  }
  return r;
}

TEST(ErrorKinds, PlainFailAndEtCheckAreMisuseAndTheKindHelpersSetTheirKind) {
  EXPECT_EQ(error_of([] { fail("x ", 1); }).kind(), ErrorKind::misuse);
  EXPECT_EQ(error_of([] { ET_CHECK(false, "x"); }).kind(), ErrorKind::misuse);
  for (ErrorKind k : kAllKinds) {
    SCOPED_TRACE(kind_name(k));
    const Error a = error_of([&] { fail_kind(k, "a", 2, "b"); });
    EXPECT_EQ(a.kind(), k);
    EXPECT_STREQ(a.what(), "a2b");
    EXPECT_EQ(error_of([&] { ET_CHECK_KIND(k, 1 + 1 == 3, "c"); }).kind(), k);
  }
  EXPECT_NO_THROW(ET_CHECK_KIND(ErrorKind::device, true, "never"));
}

// The rule looks at the kind and nothing else: a backend-named input error stays, a device error falls back
// whatever its text.
TEST(ErrorKinds, BackendListsFallBackOnDeviceAndUnsupportedErrorsOnly) {
  for (ErrorKind k : kAllKinds) {
    SCOPED_TRACE(kind_name(k));
    const bool want = k == ErrorKind::device || k == ErrorKind::unsupported;
    EXPECT_EQ(backend_list_falls_back(Error("vulkan: out of device memory allocating 12 bytes", k)), want);
    EXPECT_EQ(backend_list_falls_back(Error("checkpoint 'x': tensor 'norm.weight' is missing", k)), want);

    // Through the loop itself, with no device needed: the first candidate throws an Error of kind k.
    const ListRun r = run_list("vulkan,cpu", [&](const BackendCandidate& c) {
      if (c.backend == "vulkan") throw Error("vulkan: write_rows: too many rows", k);
    });
    if (want) {
      EXPECT_EQ(r.tried, (std::vector<std::string>{"vulkan", "cpu"}));
      EXPECT_EQ(r.started, std::optional<size_t>(1));
      EXPECT_NE(r.notes.find("backend vulkan failed (vulkan: write_rows: too many rows); falling back to cpu"),
                std::string::npos)
          << r.notes;
    } else {
      EXPECT_EQ(r.tried, (std::vector<std::string>{"vulkan"}));
      ASSERT_TRUE(r.error.has_value());
      EXPECT_EQ(r.error->kind(), k);
      EXPECT_STREQ(r.error->what(), "vulkan: write_rows: too many rows");
      EXPECT_EQ(r.notes, "");
    }
  }
  // The last candidate's failure is the error, device or not.
  const ListRun last = run_list("cpu", [](const BackendCandidate&) { fail_kind(ErrorKind::device, "cpu: gone"); });
  ASSERT_TRUE(last.error.has_value());
  EXPECT_EQ(last.error->kind(), ErrorKind::device);
}

TEST(ErrorKinds, BackendSpecsAreParsedAndBadOnesAreMisuse) {
  EXPECT_EQ(parse_backend_spec("vulkan,webgpu,cpu"), (std::vector<std::string>{"vulkan", "webgpu", "cpu"}));
  EXPECT_EQ(parse_backend_spec("auto"), (std::vector<std::string>{"auto"}));
  for (const char* bad : {"", "gpu", "cpu,", ",cpu", "cpu,cpu", "auto,cpu", "vulkan;cpu"}) {
    SCOPED_TRACE(bad);
    const Error e = error_of([&] { parse_backend_spec(bad); });
    EXPECT_EQ(std::string(e.what()).rfind("--backend: ", 0), 0u) << e.what();
    EXPECT_EQ(e.kind(), ErrorKind::misuse);
  }
  EXPECT_EQ(backend_plan("cpu").size(), 1u);
  EXPECT_EQ(backend_plan("vulkan,cpu").size(), 2u);
  EXPECT_EQ(backend_plan("auto").back().backend, "cpu");
}

// A backend this build lacks is unsupported (a list falls through it); one it has but whose driver or
// device is missing is a device failure. Either way a list moves on.
TEST(ErrorKinds, ABackendThatCannotStartIsUnsupportedOrDevice) {
  for (const char* name : {"vulkan", "webgpu"}) {
    SCOPED_TRACE(name);
    bool compiled = false;
#ifdef EDGETRAIN_HAS_VULKAN
    compiled |= std::string(name) == "vulkan";
#endif
#ifdef EDGETRAIN_HAS_WEBGPU
    compiled |= std::string(name) == "webgpu";
#endif
    if (compiled) {
      BackendOptions o;
      o.device = "no-such-gpu-anywhere";
      const Error e = error_of([&] { make_backend(name, o); });
      EXPECT_EQ(e.kind(), ErrorKind::device) << e.what();
      if (std::string(name) == "vulkan") {  // an index past the list, even one past size_t
        o.device = "123456789012345678901234567890";
        const Error big = error_of([&] { make_backend(name, o); });
        EXPECT_EQ(big.kind(), ErrorKind::device) << big.what();
        EXPECT_NE(std::string(big.what()).find("device index 123456789012345678901234567890 out of range"),
                  std::string::npos) << big.what();
      }
    } else {
      const Error e = error_of([&] { make_backend(name); });
      EXPECT_EQ(e.kind(), ErrorKind::unsupported) << e.what();
      EXPECT_NE(std::string(e.what()).find("not compiled into this build"), std::string::npos) << e.what();
    }
  }
}

TEST(ErrorKinds, ABadShapeIsMisuse) {
  auto b = make_cpu_backend();
  const Tensor x = b->zeros(Shape{2, 3}, DType::f32), w = b->zeros(Shape{4, 5}, DType::f32);
  const Tensor y = b->zeros(Shape{2, 5}, DType::f32);
  const Error e = error_of([&] { b->run({Op::mm, {x, w}, {y}, {}, {}}); });
  EXPECT_EQ(e.kind(), ErrorKind::misuse) << e.what();
  EXPECT_NE(std::string(e.what()).find("mm"), std::string::npos) << e.what();
  EXPECT_EQ(error_of([&] { x.reshape(Shape{7}); }).kind(), ErrorKind::misuse);
}

class FileErrors : public ::testing::Test {
 protected:
  void SetUp() override {
    std::string tmpl = (fs::temp_directory_path() / "edgetrain_errors_XXXXXX").string();
    ASSERT_NE(::mkdtemp(tmpl.data()), nullptr);
    dir_ = tmpl;
  }
  void TearDown() override { fs::remove_all(dir_); }
  std::string dir_;
};

// Missing, unreadable and cut-short files are io; a file whose content is wrong is misuse.
TEST_F(FileErrors, MissingAndTruncatedFilesAreIoAndBadContentIsMisuse) {
  EXPECT_EQ(error_of([&] { safetensors::Reader::open(dir_ + "/missing.safetensors"); }).kind(), ErrorKind::io);
  EXPECT_EQ(error_of([&] { safetensors::Reader::open(dir_); }).kind(), ErrorKind::misuse);  // a directory

  const std::string path = dir_ + "/w.safetensors";
  safetensors::Writer w;
  const std::vector<float> v(64, 1.5f);
  w.add("w", "F32", {8, 8}, v.data(), v.size() * sizeof(float));
  w.save(path);
  const auto full = fs::file_size(path);
  ASSERT_NO_THROW(safetensors::Reader::open(path));
  // Cut inside the data, inside the header, and inside the 8-byte header length.
  for (const uintmax_t keep : {full - 4, uintmax_t{20}, uintmax_t{5}}) {
    SCOPED_TRACE(keep);
    fs::resize_file(path, keep);
    const Error e = error_of([&] { safetensors::Reader::open(path); });
    EXPECT_EQ(e.kind(), ErrorKind::io) << e.what();
    EXPECT_NE(std::string(e.what()).find(path), std::string::npos) << e.what();
  }
  std::ofstream(path, std::ios::binary | std::ios::trunc) << std::string("\x10\0\0\0\0\0\0\0", 8) << "[not a header]  ";
  const Error bad = error_of([&] { safetensors::Reader::open(path); });
  EXPECT_EQ(bad.kind(), ErrorKind::misuse) << bad.what();
}

// A write that fails (here: into a folder that does not exist) is io, and the message says so.
TEST_F(FileErrors, AFailedAtomicWriteIsIo) {
  safetensors::Writer w;
  const float one = 1.0f;
  w.add("x", "F32", {1}, &one, sizeof one);
  const Error e = error_of([&] { w.save(dir_ + "/no/such/folder/x.safetensors"); });
  EXPECT_EQ(e.kind(), ErrorKind::io) << e.what();
  EXPECT_NE(std::string(e.what()).find("atomic write"), std::string::npos) << e.what();
}

#ifdef EDGETRAIN_HAS_VULKAN

bool have_usable_vulkan() {
  for (const DeviceInfo& d : list_devices())
    if (d.backend == "vulkan" && d.usable) return true;
  return false;
}

// A tensor of `shape` on backend b whose storage claims `bytes` but was never allocated: lets a call reach
// an encoder's size checks without allocating gigabytes (the id is one no allocation has, so its release
// is a no-op, and no encoder that throws first ever binds it).
Tensor unallocated(Backend& b, uint64_t id, Shape shape, DType dtype) {
  const size_t bytes = static_cast<size_t>(shape.numel()) * dtype_size(dtype);
  return Tensor(std::make_shared<Storage>(&b, id, bytes), shape, dtype);
}

// The two input errors of the issue, raised by the Vulkan backend's own code under `--backend vulkan,cpu`:
// each is THE error (misuse, its message unchanged) and the CPU is never tried. Matching on the message
// ("vulkan...") would have taken them for device failures and fallen back.
TEST(BackendList, InputErrorsRaisedInsideTheVulkanBackendAreTheError) {
  if (!have_usable_vulkan()) GTEST_SKIP() << "no usable Vulkan device";
  struct Case {
    const char* name;
    const char* message;
    std::function<void(Backend&)> provoke;
  };
  const std::vector<Case> cases = {
      // write_rows of 2^31 one-byte rows: past the 32-bit row arithmetic of the write_rows kernel
      // (ops_copy.cpp), found when the program is encoded at finalize.
      {"write_rows", "vulkan: write_rows: too many rows",
       [](Backend& b) {
         const Tensor x = unallocated(b, ~uint64_t{0} - 1, Shape{int64_t{1} << 31, 1}, DType::u8);
         const Tensor out = unallocated(b, ~uint64_t{0} - 2, Shape{4, 1}, DType::u8);
         auto p = b.new_program();
         p->record({Op::write_rows, {x}, {out}, {}, {0.0f}});
         p->finalize();
       }},
      // The tensor-core GEMM helper given operands of different contraction lengths (ops_gemm_coop.cpp),
      // with this device's encode context.
      {"coop gemm", "vulkan coop gemm: contraction lengths differ (256 vs 128)",
       [](Backend& b) {
         const vk::EncodeContext ctx = dynamic_cast<vk::VulkanBackend&>(b).encode_context();
         const vk::CoopOperand a = vk::coop_fp32(0, 128, 256, 256, 1, 0), w = vk::coop_fp32(1, 128, 128, 1, 128, 0);
         vk::Encoded out;
         vk::append_coop(a, w, vk::CoopEpilogue{}, false, ctx, out);
       }},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.name);
    const ListRun r = run_list("vulkan,cpu", [&](const BackendCandidate& k) {
      if (k.backend != "vulkan") return;  // the CPU would start; the point is whether it is tried at all
      std::unique_ptr<Backend> b = make_backend(k.backend, k.options);
      ASSERT_EQ(b->name(), "vulkan");
      c.provoke(*b);
    });
    EXPECT_EQ(r.tried, (std::vector<std::string>{"vulkan"})) << r.notes;
    EXPECT_EQ(r.notes, "");
    ASSERT_TRUE(r.error.has_value()) << "no error: the list started candidate " << r.started.value_or(99);
    EXPECT_EQ(r.error->kind(), ErrorKind::misuse);
    EXPECT_EQ(std::string(r.error->what()).rfind(c.message, 0), 0u) << r.error->what();
  }
}

// A real device failure in the same place: every compute pipeline fails to create (the test-only fault
// EDGETRAIN_VK_FAULT=pipeline makes vkCreateComputePipelines fail as a driver that cannot compile would).
// It is a device error, and the list falls back to the CPU with the notice, which then runs the program.
TEST(BackendList, APipelineTheDriverCannotCreateFallsBackWithANotice) {
  if (!have_usable_vulkan()) GTEST_SKIP() << "no usable Vulkan device";
  ScopedEnv fault("EDGETRAIN_VK_FAULT", "pipeline");
  std::vector<float> result;
  auto add_program = [&](const BackendCandidate& k) {
    std::unique_ptr<Backend> b = make_backend(k.backend, k.options);
    const Tensor a = b->from_vector(Shape{4}, DType::f32, std::vector<float>{1, 2, 3, 4});
    const Tensor c = b->from_vector(Shape{4}, DType::f32, std::vector<float>{10, 20, 30, 40});
    const Tensor out = b->zeros(Shape{4}, DType::f32);
    auto p = b->new_program();
    p->record({Op::add, {a, c}, {out}, {}, {1.0f}});
    p->finalize();
    p->replay();
    result = b->to_vector<float>(out);
  };
  const Error alone = error_of([&] { add_program(backend_plan("vulkan")[0]); });
  EXPECT_EQ(alone.kind(), ErrorKind::device) << alone.what();
  EXPECT_NE(std::string(alone.what()).find("vulkan: creating the compute pipeline of kernel '"), std::string::npos)
      << alone.what();

  const ListRun r = run_list("vulkan,cpu", add_program);
  ASSERT_FALSE(r.error.has_value()) << r.error->what();
  EXPECT_EQ(r.tried, (std::vector<std::string>{"vulkan", "cpu"}));
  EXPECT_EQ(r.started, std::optional<size_t>(1));
  EXPECT_EQ(r.notes.rfind("backend vulkan failed (vulkan: creating the compute pipeline of kernel '", 0), 0u)
      << r.notes;
  EXPECT_NE(r.notes.find("); falling back to cpu"), std::string::npos) << r.notes;
  EXPECT_EQ(result, (std::vector<float>{11, 22, 33, 44}));
}

#endif  // EDGETRAIN_HAS_VULKAN

}  // namespace
}  // namespace edgetrain::test
