// libFuzzer target for the GPT-2 tokenizer reader (load_gpt2_tokenizer: encoder.json + vocab.bpe). One input
// holds both files: encoder.json's bytes, a NUL byte, then vocab.bpe's bytes (no NUL: vocab.bpe is empty).
// Any input must either throw edgetrain::Error or load a tokenizer that keeps its promises: every id it
// produces is in [0, vocab_size), and decode(encode(text)) == text for any bytes (ASan/UBSan catch the rest).
//
// Seeds: with EDGETRAIN_FUZZ_SEED_DIR set, LLVMFuzzerInitialize writes a few small tokenizers there (a valid
// one, the same with CRLF lines, and near misses) before fuzzing starts; the CTest job passes that folder
// as a second corpus directory, so no seed file is committed.
#include <unistd.h>

#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <string>
#include <string_view>
#include <vector>

#include "edgetrain/error.h"
#include "edgetrain/tokenizer.h"

namespace {

namespace fs = std::filesystem;

std::string g_dir;  // where this process writes the two files of each input

void write_file(const std::string& path, const void* data, size_t n) {
  std::FILE* f = std::fopen(path.c_str(), "wb");
  if (f == nullptr) std::abort();
  if (n > 0 && std::fwrite(data, 1, n, f) != n) std::abort();
  if (std::fclose(f) != 0) std::abort();
}

// The JSON key of the token for byte b in GPT-2's byte alphabet: printable bytes stand for themselves,
// the other 68 are mapped in order to U+0100..U+0143 (written as \u escapes).
std::string byte_key(int b) {
  static int cp_of[256];
  static bool ready = false;
  if (!ready) {
    int extra = 0;
    for (int i = 0; i < 256; ++i) {
      const bool printable = (i >= '!' && i <= '~') || (i >= 0xA1 && i <= 0xAC) || i >= 0xAE;
      cp_of[i] = printable ? i : 256 + extra++;
    }
    ready = true;
  }
  char buf[16];
  const int cp = cp_of[b];
  if (cp >= '!' && cp <= '~' && cp != '"' && cp != '\\') std::snprintf(buf, sizeof buf, "%c", cp);
  else std::snprintf(buf, sizeof buf, "\\u%04X", cp);
  return buf;
}

// A small valid tokenizer: the 256 byte tokens, five merged tokens and <|endoftext|>. `eol` ends the
// vocab.bpe lines; `extra_merges` are appended after the valid ones.
std::string make_seed(const std::string& eol, const std::string& extra_merges, bool drop_byte = false,
                      bool duplicate_id = false) {
  std::string enc = "{";
  int id = 0;
  for (int b = 0; b < 256; ++b) {
    if (drop_byte && b == 'q') continue;
    enc += (id ? ", \"" : "\"") + byte_key(b) + "\": " + std::to_string(id);
    ++id;
  }
  const char* merged[] = {"th", "the", "\\u0120t", "\\u0120th", "\\u0120the"};
  for (const char* m : merged) enc += std::string(", \"") + m + "\": " + std::to_string(duplicate_id ? 3 : id++);
  enc += ", \"<|endoftext|>\": " + std::to_string(id) + "}";
  std::string bpe = "#version: 0.2" + eol + "t h" + eol + "th e" + eol + "\xC4\xA0 t" + eol + "\xC4\xA0t h" + eol +
                    "\xC4\xA0th e" + eol + extra_merges;
  return enc + std::string(1, '\0') + bpe;
}

void write_seeds(const std::string& dir) {
  std::error_code ec;
  fs::create_directories(dir, ec);
  const std::pair<const char*, std::string> seeds[] = {
      {"seed_valid", make_seed("\n", "")},
      {"seed_crlf", make_seed("\r\n", "")},
      {"seed_unknown_symbol", make_seed("\n", "x yz\n")},
      {"seed_merge_order", make_seed("\n", "the \xC4\xA0t\n")},  // "the" is made, the pair's token is not
      {"seed_missing_byte", make_seed("\n", "", /*drop_byte=*/true)},
      {"seed_duplicate_id", make_seed("\n", "", false, /*duplicate_id=*/true)},
      {"seed_no_merges", make_seed("\n", "").substr(0, make_seed("\n", "").find('\0'))},
  };
  for (const auto& [name, bytes] : seeds) write_file(dir + "/" + name, bytes.data(), bytes.size());
}

void remove_dir() {
  std::error_code ec;
  if (!g_dir.empty()) fs::remove_all(g_dir, ec);
}

void check(bool ok) {
  if (!ok) std::abort();
}

// Encodes `text`, checks the ids and the round trip.
void round_trip(const edgetrain::Tokenizer& tok, std::string_view text) {
  const std::vector<int32_t> ids = tok.encode(text);
  for (int32_t id : ids) check(id >= 0 && id < tok.vocab_size());
  check(tok.decode(ids) == text);
}

}  // namespace

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  if (const char* seeds = std::getenv("EDGETRAIN_FUZZ_SEED_DIR"); seeds != nullptr && *seeds != '\0')
    write_seeds(seeds);
  std::string tmpl = (fs::temp_directory_path() / "edgetrain_fuzz_gpt2_XXXXXX").string();
  if (::mkdtemp(tmpl.data()) == nullptr) std::abort();
  g_dir = tmpl;
  std::atexit(remove_dir);
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const auto* bytes = reinterpret_cast<const char*>(data);
  const std::string_view input(bytes, size);
  const size_t nul = input.find('\0');
  const std::string_view encoder = input.substr(0, nul);
  const std::string_view merges = nul == std::string_view::npos ? std::string_view() : input.substr(nul + 1);
  write_file(g_dir + "/encoder.json", encoder.data(), encoder.size());
  write_file(g_dir + "/vocab.bpe", merges.data(), merges.size());
  try {
    auto tok = edgetrain::load_gpt2_tokenizer(g_dir);
    check(tok->vocab_size() >= 256);
    check(tok->eot() >= -1 && tok->eot() < tok->vocab_size());
    // Letters, digits, contractions, whitespace runs, multi-byte UTF-8, invalid UTF-8 and the special text.
    round_trip(*tok, "the the  then\tthe's 12345 \xC3\xA9t\xC3\xA9 \xE2\x80\x94 \xF0\x9F\x98\x80 \xFF\xC0 "
                     "<|endoftext|> I'll  \n\n x");
    round_trip(*tok, merges.substr(0, 512));
    round_trip(*tok, encoder.substr(0, 512));
    // An id outside the vocabulary is an Error, never a read out of bounds.
    try {
      (void)tok->decode({static_cast<int32_t>(tok->vocab_size())});
      std::abort();
    } catch (const edgetrain::Error&) {
    }
  } catch (const edgetrain::Error&) {
    // Rejected input: the expected outcome for nearly everything.
  }
  return 0;
}
