// Runs tests/llamacpp/llama_ref.mjs as a child process (argv passed as is, no shell, so a prompt may hold
// any character) and parses its JSON answer (see llamacpp.h).
#include "harness/llamacpp.h"

#include <poll.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <limits>
#include <nlohmann/json.hpp>
#include <stdexcept>

#include "edgetrain/paths.h"

extern char** environ;

namespace edgetrain::test {

namespace {

constexpr const char* kPinnedVersion = "3.21.1";

struct ProcessResult {
  int status = -1;  // exit code, or 128 + signal
  std::string out, err;
};

// Runs argv[0] (looked up on PATH) with stdout and stderr captured; both pipes are drained together so
// that neither can fill up and stall the child.
ProcessResult run_process(const std::vector<std::string>& argv) {
  int out_pipe[2], err_pipe[2];
  if (::pipe(out_pipe) != 0) throw std::runtime_error(std::string("pipe: ") + std::strerror(errno));
  if (::pipe(err_pipe) != 0) {
    ::close(out_pipe[0]), ::close(out_pipe[1]);
    throw std::runtime_error(std::string("pipe: ") + std::strerror(errno));
  }
  posix_spawn_file_actions_t fa;
  posix_spawn_file_actions_init(&fa);
  posix_spawn_file_actions_adddup2(&fa, out_pipe[1], 1);
  posix_spawn_file_actions_adddup2(&fa, err_pipe[1], 2);
  for (int fd : {out_pipe[0], out_pipe[1], err_pipe[0], err_pipe[1]}) posix_spawn_file_actions_addclose(&fa, fd);
  std::vector<char*> args;
  for (const std::string& a : argv) args.push_back(const_cast<char*>(a.c_str()));
  args.push_back(nullptr);
  pid_t pid = 0;
  const int rc = ::posix_spawnp(&pid, args[0], &fa, nullptr, args.data(), environ);
  posix_spawn_file_actions_destroy(&fa);
  ::close(out_pipe[1]), ::close(err_pipe[1]);
  if (rc != 0) {
    ::close(out_pipe[0]), ::close(err_pipe[0]);
    throw std::runtime_error("cannot start '" + argv[0] + "' (is it on PATH?): " + std::strerror(rc));
  }
  ProcessResult r;
  pollfd fds[2] = {{out_pipe[0], POLLIN, 0}, {err_pipe[0], POLLIN, 0}};
  std::string* sinks[2] = {&r.out, &r.err};
  int open_fds = 2;
  while (open_fds > 0) {
    if (::poll(fds, 2, -1) < 0) {
      if (errno == EINTR) continue;
      break;
    }
    for (int i = 0; i < 2; ++i) {
      if (fds[i].fd < 0 || !(fds[i].revents & (POLLIN | POLLHUP | POLLERR))) continue;
      char buf[65536];
      const ssize_t n = ::read(fds[i].fd, buf, sizeof buf);
      if (n > 0) {
        sinks[i]->append(buf, static_cast<size_t>(n));
      } else if (n == 0 || errno != EINTR) {
        ::close(fds[i].fd);
        fds[i].fd = -1;
        --open_fds;
      }
    }
  }
  for (const pollfd& f : fds)
    if (f.fd >= 0) ::close(f.fd);
  int st = 0;
  while (::waitpid(pid, &st, 0) < 0 && errno == EINTR) {
  }
  r.status = WIFEXITED(st) ? WEXITSTATUS(st) : 128 + (WIFSIGNALED(st) ? WTERMSIG(st) : 0);
  return r;
}

std::vector<double> logprob_row(const nlohmann::json& row, int64_t n_vocab, const std::string& what) {
  if (!row.is_array() || static_cast<int64_t>(row.size()) != n_vocab)
    throw std::runtime_error(what + ": expected an array of " + std::to_string(n_vocab) + " log-probabilities");
  std::vector<double> v(row.size());
  for (size_t i = 0; i < row.size(); ++i)
    v[i] = row[i].is_null() ? -std::numeric_limits<double>::infinity() : row[i].get<double>();
  return v;
}

}  // namespace

std::string llamacpp_dir() { return deps_path("llamacpp"); }

std::string llamacpp_missing_reason() {
  const std::string pkg = llamacpp_dir() + "/node_modules/node-llama-cpp/package.json";
  std::ifstream f(pkg);
  if (!f) return "llama.cpp reference not installed: no " + pkg + " (scripts/setup.sh installs node-llama-cpp " +
                kPinnedVersion + " there)";
  nlohmann::json j = nlohmann::json::parse(f, nullptr, false);
  const std::string version = j.is_object() && j.contains("version") && j["version"].is_string()
                                  ? j["version"].get<std::string>() : "an unreadable version";
  if (version != kPinnedVersion)
    return "llama.cpp reference not installed: " + llamacpp_dir() + " holds node-llama-cpp " + version +
           ", the pin is " + kPinnedVersion + " (run scripts/setup.sh)";
  return "";
}

LlamaRef run_llama_ref(const std::string& gguf, const LlamaRefRequest& req) {
  std::vector<std::string> argv = {"node", std::string(EDGETRAIN_SOURCE_DIR) + "/tests/llamacpp/llama_ref.mjs",
                                   "--model", gguf, "--deps", llamacpp_dir(), "--threads", "1",
                                   "--generate", std::to_string(req.generate)};
  if (!req.prompt.empty()) {
    argv.insert(argv.end(), {"--prompt", req.prompt});
  } else {
    std::string ids;
    for (int32_t t : req.tokens) {
      if (!ids.empty()) ids += ',';
      ids += std::to_string(t);
    }
    argv.insert(argv.end(), {"--tokens", ids});
  }
  if (!req.lora.empty()) argv.insert(argv.end(), {"--lora", req.lora, "--lora-scale", std::to_string(req.lora_scale)});
  ProcessResult p = run_process(argv);
  if (p.status != 0)
    throw std::runtime_error("llama_ref.mjs exited with status " + std::to_string(p.status) + ":\n" + p.err);
  nlohmann::json j = nlohmann::json::parse(p.out, nullptr, false);
  if (!j.is_object()) throw std::runtime_error("llama_ref.mjs printed no JSON object:\n" + p.out.substr(0, 2000) + p.err);
  try {
    LlamaRef r;
    r.reference = j.at("reference").get<std::string>();
    r.n_vocab = j.at("n_vocab").get<int64_t>();
    if (j.contains("prompt_tokens")) r.prompt_tokens = j["prompt_tokens"].get<std::vector<int32_t>>();
    r.tokens = j.at("tokens").get<std::vector<int32_t>>();
    if (j.at("logprobs_kind").get<std::string>() != "log_softmax")
      throw std::runtime_error("unexpected logprobs_kind " + j["logprobs_kind"].dump());
    const auto& lp = j.at("logprobs");
    if (lp.size() != r.tokens.size()) throw std::runtime_error("logprobs has " + std::to_string(lp.size()) +
                                                                " rows for " + std::to_string(r.tokens.size()) + " tokens");
    for (size_t i = 0; i < lp.size(); ++i) r.logprobs.push_back(logprob_row(lp[i], r.n_vocab, "logprobs[" + std::to_string(i) + "]"));
    r.argmax = j.at("argmax").get<std::vector<int32_t>>();
    const auto& g = j.at("generated");
    r.generated = g.at("tokens").get<std::vector<int32_t>>();
    r.generated_text = g.at("text").get<std::string>();
    for (size_t i = 0; i < g.at("logprobs").size(); ++i)
      r.generated_logprobs.push_back(logprob_row(g["logprobs"][i], r.n_vocab, "generated.logprobs[" + std::to_string(i) + "]"));
    return r;
  } catch (const nlohmann::json::exception& e) {
    throw std::runtime_error(std::string("llama_ref.mjs printed unexpected JSON: ") + e.what());
  }
}

std::vector<std::vector<int32_t>> run_llama_tokenize(const std::string& gguf, const std::vector<std::string>& texts,
                                                     std::string* reference) {
  const std::string texts_path = gguf + ".texts.json";
  {
    std::ofstream f(texts_path, std::ios::binary);
    f << nlohmann::json(texts).dump();
    if (!f) throw std::runtime_error("cannot write " + texts_path);
  }
  ProcessResult p = run_process({"node", std::string(EDGETRAIN_SOURCE_DIR) + "/tests/llamacpp/llama_ref.mjs", "--model",
                                 gguf, "--deps", llamacpp_dir(), "--texts", texts_path});
  std::remove(texts_path.c_str());
  if (p.status != 0)
    throw std::runtime_error("llama_ref.mjs exited with status " + std::to_string(p.status) + ":\n" + p.err);
  nlohmann::json j = nlohmann::json::parse(p.out, nullptr, false);
  if (!j.is_object()) throw std::runtime_error("llama_ref.mjs printed no JSON object:\n" + p.out.substr(0, 2000) + p.err);
  try {
    auto ids = j.at("tokens").get<std::vector<std::vector<int32_t>>>();
    if (ids.size() != texts.size())
      throw std::runtime_error("llama_ref.mjs gave " + std::to_string(ids.size()) + " tokenizations for " +
                               std::to_string(texts.size()) + " texts");
    if (reference) *reference = j.at("reference").get<std::string>();
    return ids;
  } catch (const nlohmann::json::exception& e) {
    throw std::runtime_error(std::string("llama_ref.mjs printed unexpected JSON: ") + e.what());
  }
}

}  // namespace edgetrain::test
