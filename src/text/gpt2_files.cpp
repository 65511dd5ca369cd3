// GPT-2's own tokenizer files: encoder.json (token text in the byte alphabet -> id) and vocab.bpe (merges
// by rank), checked line by line into byte-level BPE tables; and where "gpt2" finds them.
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "edgetrain/error.h"
#include "edgetrain/paths.h"
#include "text/bpe.h"

namespace edgetrain {
namespace {

using text::BpeMerge;
using text::BpeTables;
using text::pair_key;
using text::symbol_to_bytes;

std::string read_file(const std::string& path, const char* what) {
  std::ifstream f(path, std::ios::binary);
  ET_CHECK_KIND(ErrorKind::io, f.good(), "GPT-2 tokenizer: cannot open ", what, " '", path,
                "' (missing? scripts/setup.sh installs it)");
  std::ostringstream ss;
  ss << f.rdbuf();
  ET_CHECK_KIND(ErrorKind::io, !f.bad(), "GPT-2 tokenizer: cannot read ", what, " '", path, "'");
  return ss.str();
}

class Gpt2FileLoader {
 public:
  explicit Gpt2FileLoader(const std::string& dir) {
    t_.name = "gpt2";
    load_encoder(dir + "/encoder.json");
    load_merges(dir + "/vocab.bpe");
  }
  BpeTables take() { return std::move(t_); }

 private:
  void load_encoder(const std::string& path) {
    const std::string text = read_file(path, "encoder.json");
    nlohmann::json j;
    try {
      j = nlohmann::json::parse(text);
    } catch (const nlohmann::json::exception& e) {
      fail("GPT-2 tokenizer: '", path, "' is not valid JSON: ", e.what());
    }
    ET_CHECK(j.is_object() && !j.empty(), "GPT-2 tokenizer: '", path,
             "' must be a non-empty JSON object mapping token strings to ids");
    t_.id_bytes.assign(j.size(), std::string());
    std::vector<bool> seen(j.size(), false);
    std::string bytes;
    for (auto it = j.begin(); it != j.end(); ++it) {
      const std::string& key = it.key();
      ET_CHECK(it.value().is_number_integer(), "GPT-2 tokenizer: '", path, "': the id of token \"", key,
               "\" is not an integer");
      const int64_t id = it.value().get<int64_t>();
      ET_CHECK(id >= 0 && id < static_cast<int64_t>(j.size()), "GPT-2 tokenizer: '", path, "': token \"", key,
               "\" has id ", id, ", outside [0, ", j.size(), ") (ids must be 0..count-1)");
      ET_CHECK(!seen[id], "GPT-2 tokenizer: '", path, "': id ", id, " is used twice (again by \"", key, "\")");
      seen[id] = true;
      ET_CHECK(symbol_to_bytes(key, bytes), "GPT-2 tokenizer: '", path, "': token \"", key,
               "\" has a character outside GPT-2's byte alphabet");
      t_.id_bytes[id] = bytes;
      bytes_to_id_.emplace(bytes, static_cast<int32_t>(id));
      if (key == "<|endoftext|>") {
        t_.eot = t_.bos = static_cast<int32_t>(id);
        t_.special.add(key, t_.eot);  // its only special token
      }
    }
    t_.special.finish();
    for (int b = 0; b < 256; ++b) {
      auto it = bytes_to_id_.find(std::string(1, static_cast<char>(b)));
      ET_CHECK(it != bytes_to_id_.end(), "GPT-2 tokenizer: '", path, "' has no token for the single byte ", b);
      t_.byte_id[b] = it->second;
    }
  }

  void load_merges(const std::string& path) {
    const std::string text = read_file(path, "vocab.bpe");
    struct Line {
      int32_t a, b, id;
      size_t line_no;
    };
    std::vector<Line> lines;
    std::istringstream in(text);
    std::string line, bytes;
    size_t line_no = 0;
    auto symbol_id = [&](const std::string& sym, size_t at) {
      ET_CHECK(symbol_to_bytes(sym, bytes), "GPT-2 tokenizer: ", path, ":", at, ": symbol \"", sym,
               "\" has a character outside GPT-2's byte alphabet");
      auto it = bytes_to_id_.find(bytes);
      ET_CHECK(it != bytes_to_id_.end(), "GPT-2 tokenizer: ", path, ":", at, ": symbol \"", sym,
               "\" is not a token of encoder.json");
      return it->second;
    };
    while (std::getline(in, line)) {
      ++line_no;
      if (!line.empty() && line.back() == '\r') line.pop_back();
      if (line.empty() || (line_no == 1 && line[0] == '#')) continue;  // "#version: 0.2"
      const size_t sp = line.find(' ');
      ET_CHECK(sp != std::string::npos && sp > 0 && sp + 1 < line.size() &&
                   line.find(' ', sp + 1) == std::string::npos,
               "GPT-2 tokenizer: ", path, ":", line_no, ": expected two symbols separated by one space, got \"",
               line, "\"");
      const std::string a = line.substr(0, sp), b = line.substr(sp + 1);
      lines.push_back({symbol_id(a, line_no), symbol_id(b, line_no), symbol_id(a + b, line_no), line_no});
    }
    ET_CHECK(!lines.empty(), "GPT-2 tokenizer: '", path, "' has no merges");
    // The last merge that makes each token; a merge may only use tokens that are bytes or made earlier.
    std::vector<int32_t> made_by(t_.id_bytes.size(), -1);
    for (size_t r = 0; r < lines.size(); ++r) made_by[lines[r].id] = static_cast<int32_t>(r);
    for (size_t r = 0; r < lines.size(); ++r) {
      const Line& l = lines[r];
      for (int32_t part : {l.a, l.b}) {
        ET_CHECK(t_.id_bytes[part].size() == 1 || (made_by[part] >= 0 && made_by[part] < static_cast<int32_t>(r)),
                 "GPT-2 tokenizer: ", path, ":", l.line_no, ": symbol of ", t_.id_bytes[part].size(),
                 " bytes is neither a single byte nor made by an earlier merge");
      }
      const bool fresh = t_.merges.emplace(pair_key(l.a, l.b), BpeMerge{static_cast<int32_t>(r), l.id}).second;
      ET_CHECK(fresh, "GPT-2 tokenizer: ", path, ":", l.line_no, ": the same merge appears twice");
      t_.merge_pairs.push_back({l.a, l.b});
    }
  }

  BpeTables t_;
  std::unordered_map<std::string, int32_t> bytes_to_id_;
};
}  // namespace

std::unique_ptr<Tokenizer> load_gpt2_tokenizer(const std::string& dir) {
  return text::make_bpe_tokenizer(Gpt2FileLoader(dir).take());
}

std::string default_gpt2_dir() { return deps_path("gpt2"); }

}  // namespace edgetrain
