// Texts and a learned BPE vocabulary for the pre-tokenizer tests (see pretokenize_texts.h).
#include "harness/pretokenize_texts.h"

#include <fstream>
#include <map>
#include <random>
#include <sstream>
#include <stdexcept>
#include <unordered_map>

#include "edgetrain/paths.h"
#include "text/bpe.h"

namespace edgetrain::test {
namespace {

std::string utf8(uint32_t cp) {
  std::string s;
  if (cp < 0x80) {
    s += static_cast<char>(cp);
  } else if (cp < 0x800) {
    s += static_cast<char>(0xC0 | (cp >> 6)), s += static_cast<char>(0x80 | (cp & 0x3F));
  } else if (cp < 0x10000) {
    s += static_cast<char>(0xE0 | (cp >> 12)), s += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
    s += static_cast<char>(0x80 | (cp & 0x3F));
  } else {
    s += static_cast<char>(0xF0 | (cp >> 18)), s += static_cast<char>(0x80 | ((cp >> 12) & 0x3F));
    s += static_cast<char>(0x80 | ((cp >> 6) & 0x3F)), s += static_cast<char>(0x80 | (cp & 0x3F));
  }
  return s;
}

const std::string& kjv() {
  static const std::string text = [] {
    const std::string path = deps_path("data/kjv.txt");
    std::ifstream f(path, std::ios::binary);
    std::ostringstream ss;
    ss << f.rdbuf();
    if (ss.str().size() < 100000) throw std::runtime_error("the KJV corpus is missing or short: " + path);
    return ss.str();
  }();
  return text;
}

const char* const kCode[] = {
    "int main(int argc, char** argv) {\n  for (int i = 0; i < argc; ++i) printf(\"%s\\n\", argv[i]);\n  return 0;\n}\n",
    "def fib(n):\n    if n <= 1:\n        return n\n    return fib(n - 1) + fib(n - 2)\n\n"
    "print([fib(k) for k in range(20)])\n",
    "{\"name\": \"edgetrain\", \"version\": \"1.2.3\", \"deps\": [\"gtest>=1.14\", \"vulkan\"], \"n\": 12345678}\n",
    "if [ -z \"$HOME\" ] || [ $# -ne 2 ]; then\n\techo 'usage: $0 A B' >&2; exit 1\nfi\nx=$((x+1)); y=${arr[@]:1}\n",
    "template <typename T>\nT clamp(T v, T lo, T hi) { return v < lo ? lo : hi < v ? hi : v; }"
    "  // C++17 has std::clamp\n",
    "SELECT id, COUNT(*) AS n FROM users WHERE age >= 18 AND name <> '' GROUP BY id HAVING n > 3;\r\n",
    "x = a^b | ~c & (d << 2); s += \"it's\"; t = 'DON''T'; z = 0xFF_FF + 1e-9 - 3.14159;\n",
    "    const auto it = map.find(key);\n    if (it == map.end()) {\n"
    "        throw std::runtime_error(\"missing\");\n    }\n",
};

const std::vector<std::string> kWords = {
    "the", "and", "of", "to", "in", "it", "is", "that", "you", "he", "was", "for", "on", "are", "with", "as", "I",
    "his", "they", "be", "at", "one", "have", "this", "from", "or", "had", "by", "word", "but", "what", "some",
    "Lord", "Israel", "THE", "AND", "Hello", "naïve", "café", "résumé", "Zürich", "straße"};

// One text of kind `kind` (0..9).
std::string make_text(std::mt19937& rng, int kind) {
  auto pick = [&](size_t n) { return static_cast<size_t>(rng() % n); };
  auto any = [&](std::initializer_list<const char*> xs) { return std::string(*(xs.begin() + pick(xs.size()))); };
  auto range = [&](uint32_t lo, uint32_t hi) { return utf8(lo + static_cast<uint32_t>(rng() % (hi - lo + 1))); };
  std::string s;
  switch (kind) {
    case 0: {  // a window of the KJV, cut anywhere
      const std::string& k = kjv();
      const size_t len = 1 + pick(400), at = pick(k.size() - len);
      s = k.substr(at, len);
      break;
    }
    case 1: {  // a window of code
      const std::string code = kCode[pick(std::size(kCode))];
      const size_t at = pick(code.size() / 2), len = 1 + pick(code.size() - at);
      s = code.substr(at, len);
      break;
    }
    case 2:  // CJK: ideographs, kana, hangul, CJK punctuation, fullwidth forms, ideographic space, ASCII
      for (size_t n = 1 + pick(40); n--;) {
        switch (pick(8)) {
          case 0: s += range(0x4E00, 0x9FFF); break;
          case 1: s += range(0x3041, 0x3096); break;
          case 2: s += range(0x30A1, 0x30FA); break;
          case 3: s += range(0xAC00, 0xD7A3); break;
          case 4:  // 。、「」！？
            s += any({"\xE3\x80\x82", "\xE3\x80\x81", "\xE3\x80\x8C", "\xE3\x80\x8D", "\xEF\xBC\x81", "\xEF\xBC\x9F"});
            break;
          case 5: s += range(0xFF10, 0xFF19); break;  // fullwidth digits (Nd)
          case 6: s += any({" ", "\xE3\x80\x80", "\n", " 2024", "ABC", "'s"}); break;
          default: s += range(0x20000, 0x2A6DF); break;  // CJK extension B (4-byte UTF-8)
        }
      }
      break;
    case 3:  // emoji: plain, skin tones, ZWJ sequences, flags, keycaps, variation selectors, mixed with text
      for (size_t n = 1 + pick(16); n--;) {
        switch (pick(7)) {
          case 0: s += range(0x1F600, 0x1F64F); break;
          case 1: s += range(0x1F44A, 0x1F450) + range(0x1F3FB, 0x1F3FF); break;
          case 2: s += "\xF0\x9F\x91\xA9\xE2\x80\x8D\xF0\x9F\x92\xBB"; break;            // 👩‍💻
          case 3: s += "\xF0\x9F\x87\xAB\xF0\x9F\x87\xB7"; break;                       // 🇫🇷
          case 4: s += range('0', '9') + "\xEF\xB8\x8F\xE2\x83\xA3"; break;              // keycap
          case 5: s += "\xE2\x9D\xA4\xEF\xB8\x8F"; break;                               // ❤️
          default: s += any({" ", "  ", "!", " ok", "\n", "I'M", " 12"}); break;
        }
      }
      break;
    case 4:  // digit runs of every length, separated, and other scripts' numbers
      for (size_t n = 1 + pick(10); n--;) {
        const size_t len = 1 + pick(pick(3) == 0 ? 20 : 7);
        for (size_t i = 0; i < len; ++i) s += static_cast<char>('0' + pick(10));
        s += any({" ", ",", ".", "-", "+", "x", " a", "\n", "  ", "$", "%", "", "\xD9\xA3\xD9\xA4", "\xE0\xA5\xA8",
                  "\xC2\xB2", "\xC2\xBD", "\xE2\x85\xAB", "\xE2\x91\xA0", "\xEF\xBC\x93"});
      }
      break;
    case 5:  // contractions in any case, and apostrophes that are not contractions
      for (size_t n = 1 + pick(12); n--;) {
        std::string w = kWords[pick(kWords.size())];
        std::string c = any({"'s", "'t", "'re", "'ve", "'m", "'ll", "'d", "'", "''", "'x", "\xE2\x80\x99s", "'S'"});
        for (auto& ch : c)
          if (ch >= 'a' && ch <= 'z' && pick(2)) ch = static_cast<char>(ch - 'a' + 'A');
        s += any({" ", "", "\n", "  "}) + w + c;
      }
      break;
    case 6:  // whitespace runs of every kind between words, numbers and punctuation, at both ends
      for (size_t n = 1 + pick(12); n--;) {
        for (size_t k = pick(6); k--;)
          s += any({" ", " ", "\t", "\n", "\r", "\r\n", "\xC2\xA0", "\xE3\x80\x80", "\xE2\x80\x83", "\xC2\x85",
                    "\xE2\x80\x8B", "\xE1\x9A\x80", "\x0B", "\x0C"});
        s += any({"word", "42", "!", "(", "x1", "\xC3\xA9t\xC3\xA9", "'s", "\xE4\xB8\x96"});
      }
      break;
    case 7:  // lines with newlines before and after words, punctuation and spaces
      for (size_t n = 1 + pick(10); n--;)
        s += any({"line", " line", "end.", "  indented", "\titem", "# title", "- a", "1.", "?!", "\xE6\x97\xA5"}) +
             any({"\n", "\n\n", "\n\n\n", " \n", "\n ", ".\n", "\r\n", " \r\n\r\n", "\n\t", ""});
      break;
    case 8:  // other scripts, combining marks (decomposed accents, Devanagari vowel signs), RTL text
      for (size_t n = 1 + pick(12); n--;) {
        s += any({"e\xCC\x81", "a\xCC\x88", "\xCE\xB1\xCE\xB2\xCE\xB3", "\xD0\xBF\xD1\x80\xD0\xB8",
                  "\xD8\xB3\xD9\x84\xD8\xA7\xD9\x85", "\xD7\xA9\xD7\x9C\xD7\x95\xD7\x9D",
                  "\xE0\xA4\xA8\xE0\xA4\xAE\xE0\xA4\xB8\xE0\xA5\x8D\xE0\xA4\xA4\xE0\xA5\x87",
                  "\xE0\xB8\xAA\xE0\xB8\xA7\xE0\xB8\xB1\xE0\xB8\xAA", "\xC3\x85ngstr\xC3\xB6m", "\xE2\x84\xAA"});
        s += any({" ", "", ",", "\xCC\x81", "\n", " 3", "\xD9\xAA"});
      }
      break;
    default:  // random code points of all planes (not surrogates, not NUL): the Unicode tables
      for (size_t n = 1 + pick(24); n--;) {
        uint32_t cp = 0;
        do {
          const size_t range = pick(3) == 0 ? 0x7F : pick(3) == 0 ? 0x110000 : 0x10000;  // ASCII, any plane, BMP
          cp = static_cast<uint32_t>(pick(range) + (range == 0x7F));
        } while (cp == 0 || (cp >= 0xD800 && cp <= 0xDFFF));
        s += utf8(cp);
      }
      break;
  }
  return s;
}

}  // namespace

std::vector<std::string> comparison_texts(size_t count, uint32_t seed) {
  std::mt19937 rng(seed);
  std::vector<std::string> texts;
  for (size_t i = 0; i < count; ++i) {
    // Mostly one kind; every fifth text joins two kinds, so that the kinds meet at their edges.
    std::string t = make_text(rng, static_cast<int>(i % 10));
    if (i % 5 == 4) t += make_text(rng, static_cast<int>(rng() % 10));
    texts.push_back(t);
  }
  return texts;
}

std::string training_text() {
  std::string all;
  for (const std::string& t : comparison_texts(300, 1234567)) all += t;
  return all;
}

GgufVocab learned_bpe_vocab(const std::string& text, int merges) {
  GgufVocab v;
  v.model = "gpt2";
  std::vector<std::string> bytes;  // raw bytes of each token
  std::map<std::string, int32_t> id_of;
  for (int b = 0; b < 256; ++b) {
    bytes.push_back(std::string(1, static_cast<char>(b)));
    id_of[bytes.back()] = b;
  }
  std::vector<int32_t> seq(text.begin(), text.end());
  for (auto& t : seq) t = static_cast<unsigned char>(t);
  for (int m = 0; m < merges; ++m) {
    std::unordered_map<uint64_t, int> count;
    count.reserve(1 << 14);
    for (size_t i = 0; i + 1 < seq.size(); ++i) ++count[text::pair_key(seq[i], seq[i + 1])];
    uint64_t best_key = 0;
    int best_n = 1;
    for (const auto& [key, n] : count)
      if (n > best_n || (n == best_n && n > 1 && key < best_key)) best_key = key, best_n = n;
    if (best_n < 2) break;
    const std::pair<int32_t, int32_t> best{static_cast<int32_t>(best_key >> 32),
                                           static_cast<int32_t>(best_key & 0xFFFFFFFFu)};
    const std::string joined = bytes[best.first] + bytes[best.second];
    auto [it, fresh] = id_of.emplace(joined, static_cast<int32_t>(bytes.size()));
    if (fresh) bytes.push_back(joined);
    v.merges.push_back(text::bytes_to_symbol(bytes[best.first]) + " " + text::bytes_to_symbol(bytes[best.second]));
    std::vector<int32_t> next;
    next.reserve(seq.size());
    for (size_t i = 0; i < seq.size(); ++i) {
      if (i + 1 < seq.size() && seq[i] == best.first && seq[i + 1] == best.second) {
        next.push_back(it->second);
        ++i;
      } else {
        next.push_back(seq[i]);
      }
    }
    seq.swap(next);
  }
  for (const std::string& b : bytes) {
    v.tokens.push_back(text::bytes_to_symbol(b));
    v.token_types.push_back(1);
  }
  // An end-of-text control token, so that llama.cpp takes no byte token for BOS/EOS.
  v.tokens.push_back("<|endoftext|>");
  v.token_types.push_back(3);
  v.bos = v.eos = static_cast<int64_t>(v.tokens.size()) - 1;
  return v;
}

}  // namespace edgetrain::test
