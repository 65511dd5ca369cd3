// Child processes of the `edgetrain` CLI for tests (cli_child.h).
#include "harness/cli_child.h"

#include <fcntl.h>
#include <signal.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <fstream>
#include <sstream>
#include <thread>

#include "edgetrain/backends.h"
#include "edgetrain/checkpoint.h"

namespace edgetrain::test {

namespace fs = std::filesystem;
using Clock = std::chrono::steady_clock;

std::string cli_path() {
  const char* e = std::getenv("EDGETRAIN_TEST_CLI");
  return e && *e ? e : EDGETRAIN_CLI;
}

// Everything is prepared before fork(): the child of a multi-threaded test process only calls
// async-signal-safe functions (open, dup2, setrlimit, execve).
pid_t spawn_cli(const std::vector<std::string>& args, const ChildOptions& o) {
  std::vector<std::string> strings = {cli_path()};
  strings.insert(strings.end(), args.begin(), args.end());
  const size_t argc = strings.size();
  for (char** e = environ; *e != nullptr; ++e) {
    std::string kv = *e;
    bool replaced = false;
    for (const auto& [k, v] : o.env) replaced |= kv.rfind(k + "=", 0) == 0;
    if (!replaced) strings.push_back(kv);
  }
  for (const auto& [k, v] : o.env)
    if (!v.empty()) strings.push_back(k + "=" + v);  // an empty value: unset
  std::vector<char*> argv, envp;
  for (size_t i = 0; i < strings.size(); ++i) (i < argc ? argv : envp).push_back(strings[i].data());
  argv.push_back(nullptr);
  envp.push_back(nullptr);
  pid_t pid = ::fork();
  if (pid != 0) return pid;
  int fd = ::open(o.log.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
  if (fd >= 0) ::dup2(fd, 1), ::dup2(fd, 2), ::close(fd);
  if (o.fsize_limit != RLIM_INFINITY) {
    rlimit rl{o.fsize_limit, o.fsize_limit};
    ::setrlimit(RLIMIT_FSIZE, &rl);
  }
  if (o.as_limit != RLIM_INFINITY) {
    rlimit rl{o.as_limit, o.as_limit};
    ::setrlimit(RLIMIT_AS, &rl);
  }
  ::execve(argv[0], argv.data(), envp.data());
  ::_exit(127);
}

std::string Outcome::describe() const {
  std::string s = timed_out ? "timed out" : WIFSIGNALED(status) ? "killed by signal " + std::to_string(WTERMSIG(status))
                                                               : "exit " + std::to_string(code());
  return s + "; output:\n" + output;
}

std::string slurp(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

Outcome wait_child(pid_t pid, const std::string& log, double limit_s) {
  Outcome r;
  auto deadline = Clock::now() + std::chrono::duration<double>(limit_s);
  while (true) {
    pid_t w = ::waitpid(pid, &r.status, WNOHANG);
    if (w == pid) break;
    if (Clock::now() > deadline) {
      ::kill(pid, SIGKILL);
      ::waitpid(pid, &r.status, 0);
      r.timed_out = true;
      break;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(2));
  }
  r.output = slurp(log);
  return r;
}

size_t count_of(const std::string& text, const std::string& what) {
  size_t n = 0;
  for (size_t at = text.find(what); at != std::string::npos; at = text.find(what, at + 1)) ++n;
  return n;
}

int64_t load_ok(const std::string& path) {
  auto backend = make_cpu_backend();
  Model m(*backend, read_checkpoint_config(path));
  load_checkpoint(path, m);
  return m.steps_done;
}

bool has_temp_file(const std::string& dir) {
  std::error_code ec;
  for (auto it = fs::directory_iterator(dir, ec); !ec && it != fs::directory_iterator(); it.increment(ec))
    if (it->path().filename().string().rfind("checkpoint.safetensors.tmp.", 0) == 0) return true;
  return false;
}

void CliTest::SetUp() {
  std::string tmpl = (fs::temp_directory_path() / "edgetrain_rel_XXXXXX").string();
  ASSERT_NE(::mkdtemp(tmpl.data()), nullptr);
  dir_ = tmpl;
  corpus_ = dir_ + "/corpus.txt";
  std::ofstream out(corpus_);
  for (int i = 0; i < 60; ++i) out << "In the beginning God created the heaven and the earth. Let there be light.\n";
}

void CliTest::TearDown() { fs::remove_all(dir_); }

Outcome CliTest::run(const std::vector<std::string>& args, double limit_s, ChildOptions o) {
  o.log = dir_ + "/log" + std::to_string(++runs_) + ".txt";
  return wait_child(spawn_cli(args, o), o.log, limit_s);
}

std::vector<std::string> CliTest::tiny_train(const std::string& out, std::vector<std::string> extra) {
  std::vector<std::string> a = {"train", "--preset", "tiny", "--backend", "cpu", "--threads", "1", "--corpus",
                                corpus_, "--batch", "2", "--seq", "16", "--eval-batches", "1", "--out", out,
                                "--no-progress", "--sample-tokens", "0"};
  a.insert(a.end(), extra.begin(), extra.end());
  return a;
}

}  // namespace edgetrain::test
