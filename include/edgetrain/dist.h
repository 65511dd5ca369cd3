// Data-parallel training across processes: what the trainer needs from the distributed engine. MPI (Open
// MPI) when edgetrain is built with it and the process was started by mpirun; otherwise one process, and
// every collective is the identity. `mpirun -n 4 edgetrain train ...` is the interface.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

namespace edgetrain {

class Communicator {
 public:
  virtual ~Communicator() = default;
  virtual int rank() const = 0;        // 0 .. size-1; rank 0 alone writes files and prints
  virtual int size() const = 0;
  virtual int local_rank() const = 0;  // among the ranks on this machine: picks the device
  virtual int local_size() const = 0;
  virtual std::string name() const = 0;  // e.g. "MPI (Open MPI v4.1.4), 2 ranks"
  // In-place sums over all ranks; every rank gets the same bits (MPI_Allreduce, a fixed algorithm for a
  // given rank count and size, so reruns are bit-identical). Throws Error (ErrorKind::io) when a rank does
  // not take part within the timeout (it died or hangs) or MPI reports an error. `what` names the
  // collective in that message.
  virtual void sum(float* data, size_t n, const char* what) = 0;
  virtual void sum(double* data, size_t n, const char* what) = 0;
  // Every rank's value, by rank.
  virtual std::vector<uint64_t> gather_all(uint64_t value, const char* what) = 0;
  virtual void barrier(const char* what) = 0;
  // Ends every rank of the job now (after this rank has said why): a rank that fails must not leave the
  // others waiting in a collective.
  [[noreturn]] virtual void abort(int exit_code) = 0;
};

// The communicator of this process: MPI when this build has it and mpirun (or another MPI launcher) started
// the process, else a one-process communicator. timeout_s bounds every collective (0: wait forever).
// Call once; MPI is finalized when the communicator is destroyed.
std::unique_ptr<Communicator> make_communicator(double timeout_s);
// Whether this build can run data-parallel (was built with MPI).
bool mpi_built_in();
// A communicator of one process (what train() uses without TrainOptions::comm).
std::unique_ptr<Communicator> one_process();

}  // namespace edgetrain
