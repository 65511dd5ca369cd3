// The communicators behind include/edgetrain/dist.h: one process, or MPI when the build has it
// (EDGETRAIN_HAS_MPI) and a launcher started this process. Collectives are non-blocking MPI calls polled
// against a deadline, so a rank that died or hangs ends the job with a message instead of a silent wait.
#include "edgetrain/dist.h"

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <thread>

#include "edgetrain/error.h"

#ifdef EDGETRAIN_HAS_MPI
#include <mpi.h>
#endif

namespace edgetrain {
namespace {

class SingleProcess final : public Communicator {
 public:
  int rank() const override { return 0; }
  int size() const override { return 1; }
  int local_rank() const override { return 0; }
  int local_size() const override { return 1; }
  std::string name() const override { return "one process"; }
  void sum(float*, size_t, const char*) override {}
  void sum(double*, size_t, const char*) override {}
  std::vector<uint64_t> gather_all(uint64_t value, const char*) override { return {value}; }
  void barrier(const char*) override {}
  [[noreturn]] void abort(int exit_code) override {
    std::fflush(nullptr);
    std::_Exit(exit_code);
  }
};

#ifdef EDGETRAIN_HAS_MPI

// Started by mpirun/mpiexec (Open MPI, or a PMI/PMIx launcher such as Slurm's srun)?
bool launched_by_mpi() {
  for (const char* v : {"OMPI_COMM_WORLD_SIZE", "PMIX_RANK", "PMI_SIZE", "PMI_RANK"})
    if (std::getenv(v)) return true;
  return false;
}

class Mpi final : public Communicator {
 public:
  explicit Mpi(double timeout_s) : timeout_s_(timeout_s) {
    int provided = 0;
    if (MPI_Init_thread(nullptr, nullptr, MPI_THREAD_FUNNELED, &provided) != MPI_SUCCESS)
      fail_kind(ErrorKind::io, "data parallel: MPI_Init_thread failed");
    // Errors come back as codes (and become one clear message) instead of MPI's default abort.
    MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank_);
    MPI_Comm_size(MPI_COMM_WORLD, &size_);
    MPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_SHARED, rank_, MPI_INFO_NULL, &local_);
    MPI_Comm_rank(local_, &local_rank_);
    MPI_Comm_size(local_, &local_size_);
    char version[MPI_MAX_LIBRARY_VERSION_STRING];
    int len = 0;
    MPI_Get_library_version(version, &len);
    std::string v(version, static_cast<size_t>(len));
    library_ = v.substr(0, v.find_first_of(",\n"));
  }
  ~Mpi() override {
    MPI_Comm_free(&local_);
    MPI_Finalize();
  }
  int rank() const override { return rank_; }
  int size() const override { return size_; }
  int local_rank() const override { return local_rank_; }
  int local_size() const override { return local_size_; }
  std::string name() const override {
    return "MPI (" + library_ + "), " + std::to_string(size_) + " ranks";
  }
  void sum(float* data, size_t n, const char* what) override { reduce(data, n, MPI_FLOAT, what); }
  void sum(double* data, size_t n, const char* what) override { reduce(data, n, MPI_DOUBLE, what); }
  std::vector<uint64_t> gather_all(uint64_t value, const char* what) override {
    std::vector<uint64_t> all(static_cast<size_t>(size_));
    MPI_Request req;
    check(MPI_Iallgather(&value, 1, MPI_UINT64_T, all.data(), 1, MPI_UINT64_T, MPI_COMM_WORLD, &req), what);
    wait(req, what);
    return all;
  }
  void barrier(const char* what) override {
    MPI_Request req;
    check(MPI_Ibarrier(MPI_COMM_WORLD, &req), what);
    wait(req, what);
  }
  [[noreturn]] void abort(int exit_code) override {
    std::fflush(nullptr);
    MPI_Abort(MPI_COMM_WORLD, exit_code);
    std::_Exit(exit_code);  // MPI_Abort does not return; this keeps [[noreturn]] honest
  }

 private:
  void reduce(void* data, size_t n, MPI_Datatype type, const char* what) {
    ET_CHECK(n <= static_cast<size_t>(INT32_MAX), "data parallel: ", what, ": ", n, " values in one all-reduce");
    MPI_Request req;
    check(MPI_Iallreduce(MPI_IN_PLACE, data, static_cast<int>(n), type, MPI_SUM, MPI_COMM_WORLD, &req), what);
    wait(req, what);
  }
  void check(int rc, const char* what) {
    if (rc == MPI_SUCCESS) return;
    char msg[MPI_MAX_ERROR_STRING];
    int len = 0;
    MPI_Error_string(rc, msg, &len);
    fail_kind(ErrorKind::io, "data parallel: rank ", rank_, ": ", what, " failed: ", std::string(msg, len));
  }
  // Polls the request (MPI makes progress inside MPI_Test) until it completes or the deadline passes.
  void wait(MPI_Request& req, const char* what) {
    using Clock = std::chrono::steady_clock;
    const auto start = Clock::now();
    for (int polls = 0;; ++polls) {
      int done = 0;
      check(MPI_Test(&req, &done, MPI_STATUS_IGNORE), what);
      if (done) return;
      const double waited = std::chrono::duration<double>(Clock::now() - start).count();
      if (timeout_s_ > 0 && waited > timeout_s_)
        fail_kind(ErrorKind::io, "data parallel: rank ", rank_, " waited ", static_cast<int>(waited), " s for the ",
                  what, ": another rank died or hangs (--dist-timeout ", timeout_s_, " s)");
      // MPI moves data only inside MPI_Test: a waiting rank keeps polling and only yields its core.
      if (polls > 1000) std::this_thread::yield();
    }
  }

  double timeout_s_;
  int rank_ = 0, size_ = 1, local_rank_ = 0, local_size_ = 1;
  MPI_Comm local_ = MPI_COMM_NULL;
  std::string library_;
};

#endif  // EDGETRAIN_HAS_MPI

}  // namespace

bool mpi_built_in() {
#ifdef EDGETRAIN_HAS_MPI
  return true;
#else
  return false;
#endif
}

std::unique_ptr<Communicator> one_process() { return std::make_unique<SingleProcess>(); }

std::unique_ptr<Communicator> make_communicator(double timeout_s) {
#ifdef EDGETRAIN_HAS_MPI
  if (launched_by_mpi()) return std::make_unique<Mpi>(timeout_s);
#else
  for (const char* v : {"OMPI_COMM_WORLD_SIZE", "PMIX_RANK", "PMI_SIZE"})
    if (const char* s = std::getenv(v); s && std::atoi(s) > 1 && std::string(v) != "PMIX_RANK")
      fail_kind(ErrorKind::unsupported, "data parallel: this edgetrain was built without MPI (install libopenmpi-dev "
                "and rebuild: scripts/setup.sh), but was started by an MPI launcher with ", s, " ranks");
#endif
  (void)timeout_s;
  return std::make_unique<SingleProcess>();
}

}  // namespace edgetrain
