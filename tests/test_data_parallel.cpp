// Data-parallel training over real MPI: `mpirun -n 2 edgetrain train` against one process on the same global
// batch (CPU backend and Vulkan/lavapipe; qat and qlora), bit-identical reruns, --resume with another rank
// count, a killed rank, ranks that do not run the same job, and the per-step reduction size. Skipped (with
// the reason) when this build has no MPI or mpirun is missing.
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>
#include <thread>

#include "edgetrain/backends.h"
#include "edgetrain/checkpoint.h"
#include "edgetrain/dist.h"
#include "harness/cli_child.h"
#include "harness/model_helpers.h"
#include "harness/temp_files.h"

namespace fs = std::filesystem;

namespace edgetrain::test {
namespace {

std::string tmp(const std::string& name) { return temp_path("data_parallel", name); }

std::string skip_reason() {
  if (!mpi_built_in()) return "this build has no MPI (install libopenmpi-dev: scripts/setup.sh)";
  if (std::system("command -v mpirun > /dev/null 2>&1") != 0) return "mpirun not found (openmpi-bin)";
  return "";
}
#define SKIP_WITHOUT_MPI()                                              \
  do {                                                                  \
    if (std::string why = skip_reason(); !why.empty()) GTEST_SKIP() << why; \
  } while (0)

struct Outcome {
  int status = -1;  // exit status (128 + N when killed by signal N)
  std::string output;
};

// Runs a shell command line with output captured (stdout and stderr together).
Outcome sh(const std::string& cmd) {
  const std::string log = tmp("cmd_" + std::to_string(std::rand()) + ".log");
  Outcome r;
  const int rc = std::system((cmd + " > " + log + " 2>&1").c_str());
  r.status = WIFEXITED(rc) ? WEXITSTATUS(rc) : 128 + WTERMSIG(rc);
  std::ifstream in(log);
  std::stringstream ss;
  ss << in.rdbuf();
  r.output = ss.str();
  return r;
}

// mpirun as the test machines need it: as root allowed, more ranks than cores allowed, shared memory only.
std::string mpirun(int ranks) {
  return "OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMPI_MCA_btl=self,vader "
         "OMPI_MCA_btl_vader_single_copy_mechanism=none mpirun --oversubscribe -n " +
         std::to_string(ranks) + " ";
}

// `edgetrain train` of tiny on the small corpus, global batch `batch` x 32 tokens, one thread per rank.
std::string train_cmd(const std::string& out, const std::string& extra, int batch = 4) {
  return cli_path() + " train --preset tiny --corpus " + small_corpus() + " --out " + out +
         " --batch " + std::to_string(batch) + " --seq 32 --lr 1e-2 --warmup 2 --eval-every 10 --eval-batches 2"
         " --no-progress --sample-tokens 0 --threads 1 " + extra;
}

std::vector<double> losses(const std::string& out) {
  std::vector<double> l;
  std::ifstream in(out + "/metrics.jsonl");
  std::string line;
  while (std::getline(in, line)) {
    auto j = nlohmann::json::parse(line);
    if (j.contains("loss")) l.push_back(j["loss"].get<double>());
  }
  return l;
}

// The largest relative RMS difference of a tensor's masters between two checkpoints of the same config.
double worst_master_difference(const std::string& a, const std::string& b) {
  auto be = make_cpu_backend();
  Model ma(*be, read_checkpoint_config(a)), mb(*be, read_checkpoint_config(b));
  load_checkpoint(a, ma);
  load_checkpoint(b, mb);
  double worst = 0;
  for (Param& p : ma.params()) {
    const auto x = be->to_vector<float>(p.value), y = be->to_vector<float>(mb.param(p.name).value);
    double d = 0, n = 0;
    for (size_t i = 0; i < x.size(); ++i)
      d += (static_cast<double>(x[i]) - y[i]) * (static_cast<double>(x[i]) - y[i]), n += static_cast<double>(y[i]) * y[i];
    worst = std::max(worst, std::sqrt(d / std::max(n, 1e-30)));
  }
  return worst;
}

void expect_losses_alike(const std::vector<double>& got, const std::vector<double>& want) {
  ASSERT_EQ(got.size(), want.size());
  for (size_t i = 0; i < got.size(); ++i)
    EXPECT_NEAR(got[i], want[i], 1e-4 + 1e-4 * std::fabs(want[i])) << "step " << i + 1;  // the suite's model tolerance
}

// 2 ranks x 2 sequences = 1 rank x 4 sequences: the same global batch, the same run up to the order in
// which the gradient sums are added (fp32: within the tolerance the suite uses for models).
TEST(DataParallel, TwoRanksTrainLikeOneOnTheSameGlobalBatch) {
  SKIP_WITHOUT_MPI();
  struct Case {
    const char* name;
    std::string flags;
  };
  std::vector<Case> cases = {{"cpu_qat", "--backend cpu --mode qat"}, {"cpu_qlora", "--backend cpu --mode qlora"}};
#ifdef EDGETRAIN_HAS_VULKAN
  cases.push_back({"vulkan_qat", "--backend vulkan --device 0 --mode qat"});  // lavapipe: one device for both ranks
#endif
  for (const Case& c : cases) {
    SCOPED_TRACE(c.name);
    const std::string one = tmp(std::string("one_") + c.name), two = tmp(std::string("two_") + c.name);
    Outcome r1 = sh(train_cmd(one, c.flags + " --steps 20"));
    ASSERT_EQ(r1.status, 0) << r1.output;
    Outcome r2 = sh(mpirun(2) + train_cmd(two, c.flags + " --steps 20"));
    ASSERT_EQ(r2.status, 0) << r2.output;
    EXPECT_NE(r2.output.find("data parallel: MPI"), std::string::npos) << r2.output;
    EXPECT_NE(r2.output.find("2 sequences per rank of the global batch 4"), std::string::npos) << r2.output;
    expect_losses_alike(losses(two), losses(one));
    const double d = worst_master_difference(two + "/checkpoint.safetensors", one + "/checkpoint.safetensors");
    std::printf("[ data parallel ] %s: worst relative RMS master difference, 2 ranks vs 1: %.3g\n", c.name, d);
    EXPECT_LT(d, 1e-3);
  }
}

TEST(DataParallel, RerunsAreBitIdenticalAndTheReductionSizeIsReported) {
  SKIP_WITHOUT_MPI();
  const std::string a = tmp("rerun_a"), b = tmp("rerun_b");
  Outcome ra = sh(mpirun(2) + train_cmd(a, "--backend cpu --steps 12"));
  ASSERT_EQ(ra.status, 0) << ra.output;
  Outcome rb = sh(mpirun(2) + train_cmd(b, "--backend cpu --steps 12"));
  ASSERT_EQ(rb.status, 0) << rb.output;
  EXPECT_EQ(losses(a), losses(b));
  EXPECT_EQ(slurp(a + "/checkpoint.safetensors"), slurp(b + "/checkpoint.safetensors"));
  // Every trainable tensor's fp32 gradient travels once per step.
  auto be = make_cpu_backend();
  Model m(*be, read_checkpoint_config(a + "/checkpoint.safetensors"));
  int64_t bytes = 0;
  for (Param& p : m.params())
    if (p.trainable) bytes += p.grad.numel() * 4;
  char want[64];
  std::snprintf(want, sizeof want, "all-reduce of %.1f MB per step", bytes / 1e6);
  EXPECT_NE(ra.output.find(want), std::string::npos) << want << "\n" << ra.output;
  // Rank 0 alone printed the run's lines.
  size_t n = 0;
  for (size_t at = ra.output.find("edgetrain train:"); at != std::string::npos; at = ra.output.find("edgetrain train:", at + 1))
    ++n;
  EXPECT_EQ(n, 1u) << ra.output;
}

// The checkpoint holds no per-rank state: a run of 2 ranks resumed with 1, and one of 1 resumed with 2, go on
// as the run of 1 resumed with 1 (the same step budgets, so the same schedule).
TEST(DataParallel, ResumeWithAnotherRankCount) {
  SKIP_WITHOUT_MPI();
  auto launch = [](int ranks) { return ranks > 1 ? mpirun(ranks) : std::string(); };
  auto two_legs = [&](int first, int second) {
    const std::string out = tmp("resume_" + std::to_string(first) + std::to_string(second));
    Outcome r1 = sh(launch(first) + train_cmd(out, "--backend cpu --steps 10"));
    EXPECT_EQ(r1.status, 0) << r1.output;
    Outcome r2 = sh(launch(second) + cli_path() + " train --resume --out " + out +
                    " --steps 20 --backend cpu --no-progress --sample-tokens 0 --threads 1");
    EXPECT_EQ(r2.status, 0) << r2.output;
    return losses(out);
  };
  const std::vector<double> reference = two_legs(1, 1);
  ASSERT_EQ(reference.size(), 20u);
  for (const auto& [first, second] : {std::pair{2, 1}, std::pair{1, 2}}) {
    SCOPED_TRACE(std::to_string(first) + " then " + std::to_string(second) + " ranks");
    expect_losses_alike(two_legs(first, second), reference);
  }
}

// A rank that dies ends the job within bounded time with a non-zero status; the checkpoint on disk loads.
TEST(DataParallel, AKilledRankEndsTheJob) {
  SKIP_WITHOUT_MPI();
  const std::string out = tmp("killed");
  const std::string marker = out + "/started";
  fs::create_directories(out);
  // Rank 1 writes its pid where the test finds it, then the run goes on for long enough to be killed.
  const std::string cmd = mpirun(2) + "sh -c 'if [ \"$OMPI_COMM_WORLD_RANK\" = 1 ]; then echo $$ > " + marker +
                          "; fi; exec " + train_cmd(out, "--backend cpu --steps 100000 --checkpoint-every 5 --dist-timeout 20") + "'";
  const auto t0 = std::chrono::steady_clock::now();
  std::thread killer([&] {
    for (int i = 0; i < 600 && !fs::exists(out + "/checkpoint.safetensors"); ++i)
      std::this_thread::sleep_for(std::chrono::milliseconds(100));
    std::ifstream in(marker);
    pid_t pid = 0;
    in >> pid;
    if (pid > 0) ::kill(pid, SIGKILL);
  });
  Outcome r = sh(cmd);
  killer.join();
  const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  EXPECT_NE(r.status, 0) << r.output;
  EXPECT_LT(secs, 120) << "the job did not end in bounded time";
  ASSERT_TRUE(fs::exists(out + "/checkpoint.safetensors")) << r.output;
  auto be = make_cpu_backend();
  Model m(*be, read_checkpoint_config(out + "/checkpoint.safetensors"));
  EXPECT_NO_THROW(load_checkpoint(out + "/checkpoint.safetensors", m)) << r.output;
  EXPECT_GE(m.steps_done, 5);
}

// A rank that hangs (stopped): rank 0 gives up after --dist-timeout with one message naming the collective,
// and the whole job ends.
TEST(DataParallel, AHangingRankEndsTheJobAfterTheTimeout) {
  SKIP_WITHOUT_MPI();
  const std::string out = tmp("hang");
  const std::string marker = out + "/started";
  fs::create_directories(out);
  const std::string cmd = mpirun(2) + "sh -c 'if [ \"$OMPI_COMM_WORLD_RANK\" = 1 ]; then echo $$ > " + marker +
                          "; fi; exec " + train_cmd(out, "--backend cpu --steps 100000 --dist-timeout 5") + "'";
  const auto t0 = std::chrono::steady_clock::now();
  std::thread stopper([&] {
    for (int i = 0; i < 600 && !fs::exists(marker); ++i) std::this_thread::sleep_for(std::chrono::milliseconds(100));
    std::this_thread::sleep_for(std::chrono::seconds(1));
    std::ifstream in(marker);
    pid_t pid = 0;
    in >> pid;
    if (pid > 0) ::kill(pid, SIGSTOP);
  });
  Outcome r = sh(cmd);
  stopper.join();
  const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  EXPECT_EQ(r.status, 4) << r.output;  // io: the other ranks are gone
  EXPECT_LT(secs, 60) << "the job did not end in bounded time";
  EXPECT_NE(r.output.find("edgetrain: error: rank 0 of 2: data parallel: rank 0 waited 5 s for the"), std::string::npos)
      << r.output;
  EXPECT_NE(r.output.find("another rank died or hangs"), std::string::npos) << r.output;
}

TEST(DataParallel, RanksThatDoNotRunTheSameJobAreRefused) {
  SKIP_WITHOUT_MPI();
  const std::string out = tmp("mismatch");
  // MPMD: rank 0 and rank 1 with different seeds.
  Outcome r = sh(mpirun(1) + train_cmd(out, "--backend cpu --steps 5 --seed 1") + " : -n 1 " +
             train_cmd(out, "--backend cpu --steps 5 --seed 2"));
  EXPECT_NE(r.status, 0) << r.output;
  EXPECT_NE(r.output.find("the ranks do not run the same job: the training options of rank(s) 1 differs"),
            std::string::npos) << r.output;
  EXPECT_FALSE(fs::exists(out + "/checkpoint.safetensors"));
  // A global batch the ranks cannot share evenly.
  Outcome odd = sh(mpirun(2) + train_cmd(tmp("odd"), "--backend cpu --steps 5", /*batch=*/3));
  EXPECT_NE(odd.status, 0);
  EXPECT_NE(odd.output.find("--batch 3 cannot be split over 2 ranks"), std::string::npos) << odd.output;
  // A time budget: each rank would plan its own total from its own clock.
  Outcome timed = sh(mpirun(2) + train_cmd(tmp("timed"), "--backend cpu --time 1m"));
  EXPECT_NE(timed.status, 0);
  EXPECT_NE(timed.output.find("--time is not supported under mpirun"), std::string::npos) << timed.output;
  EXPECT_FALSE(fs::exists(tmp("timed") + "/checkpoint.safetensors"));
}

}  // namespace
}  // namespace edgetrain::test
