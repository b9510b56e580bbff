// main() for a fuzz target built without libFuzzer (any compiler): runs
// LLVMFuzzerTestOneInput on every file of the given corpus files and directories, then on
// deterministic mutations of them, so the targets' invariants are checked in every
// `meson test` (suite 'fuzz'), the sanitizer build included. An invariant violation aborts.
//
//   replay [--mutations N] [--seed S] [--dict FILE] [--max-len N] PATH...
#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <sstream>
#include <string>
#include <string_view>
#include <vector>

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size);

namespace {

/// splitmix64: the same sequence on every platform and standard library.
class Random {
 public:
  explicit Random(std::uint64_t seed) : state_(seed) {}
  std::uint64_t next() {
    std::uint64_t z = (state_ += 0x9E3779B97F4A7C15ULL);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ULL;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBULL;
    return z ^ (z >> 31);
  }
  /// Uniform in [0, n); n > 0.
  std::size_t below(std::size_t n) { return static_cast<std::size_t>(next() % n); }

 private:
  std::uint64_t state_;
};

void run(const std::string& input) {
  LLVMFuzzerTestOneInput(reinterpret_cast<const std::uint8_t*>(input.data()), input.size());
}

std::string read_file(const std::filesystem::path& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
}

int hex_value(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

/// The entries of a libFuzzer dictionary: lines `name="value"` or `"value"`, with `\\`,
/// `\"` and `\xHH` escapes; `#` comments.
std::vector<std::string> read_dictionary(const std::string& path) {
  std::vector<std::string> entries;
  std::istringstream lines(read_file(path));
  std::string line;
  while (std::getline(lines, line)) {
    const auto open = line.find('"');
    const auto close = line.rfind('"');
    if (line.empty() || line[0] == '#' || open == std::string::npos || close <= open) continue;
    std::string value;
    for (std::size_t i = open + 1; i < close; ++i) {
      if (line[i] == '\\' && i + 1 < close) {
        if (line[i + 1] == 'x' && i + 3 < close && hex_value(line[i + 2]) >= 0 &&
            hex_value(line[i + 3]) >= 0) {
          value += static_cast<char>(hex_value(line[i + 2]) * 16 + hex_value(line[i + 3]));
          i += 3;
        } else {
          value += line[++i];
        }
      } else {
        value += line[i];
      }
    }
    entries.push_back(std::move(value));
  }
  return entries;
}

/// One to four random edits of `input`: byte flips and overwrites, inserts and deletes,
/// a copied range, a dictionary word, a splice with another input, a truncation.
std::string mutate(std::string input, Random& random, const std::vector<std::string>& inputs,
                   const std::vector<std::string>& dictionary, std::size_t max_len) {
  const std::size_t edits = 1 + random.below(4);
  for (std::size_t e = 0; e < edits; ++e) {
    const std::size_t at = random.below(input.size() + 1);
    switch (random.below(8)) {
      case 0:
        if (at < input.size()) input[at] = static_cast<char>(input[at] ^ (1 << random.below(8)));
        break;
      case 1:
        if (at < input.size()) input[at] = static_cast<char>(random.below(256));
        break;
      case 2: input.insert(at, 1, static_cast<char>(random.below(256))); break;
      case 3: input.erase(at, 1 + random.below(8)); break;
      case 4:
        if (!input.empty()) {
          const std::size_t from = random.below(input.size());
          input.insert(at, input.substr(from, 1 + random.below(16)));
        }
        break;
      case 5:
        if (!dictionary.empty()) input.insert(at, dictionary[random.below(dictionary.size())]);
        break;
      case 6: {
        const std::string& other = inputs[random.below(inputs.size())];
        const std::size_t from = random.below(other.size() + 1);
        input = input.substr(0, at) + other.substr(from);
        break;
      }
      default: input.resize(at); break;
    }
  }
  if (input.size() > max_len) input.resize(max_len);
  return input;
}

int usage() {
  std::fprintf(stderr,
               "usage: replay [--mutations N] [--seed S] [--dict FILE] [--max-len N] PATH...\n");
  return 2;
}

}  // namespace

int main(int argc, char** argv) {
  std::size_t mutations = 0, max_len = 8192;
  std::uint64_t seed = 1;
  std::vector<std::string> dictionary;
  std::vector<std::filesystem::path> files;
  for (int i = 1; i < argc; ++i) {
    const std::string_view arg = argv[i];
    const bool has_value = i + 1 < argc;
    if (arg == "--mutations" && has_value) {
      mutations = std::strtoull(argv[++i], nullptr, 10);
    } else if (arg == "--seed" && has_value) {
      seed = std::strtoull(argv[++i], nullptr, 10);
    } else if (arg == "--max-len" && has_value) {
      max_len = std::strtoull(argv[++i], nullptr, 10);
    } else if (arg == "--dict" && has_value) {
      for (auto& entry : read_dictionary(argv[++i])) dictionary.push_back(std::move(entry));
    } else if (arg.starts_with("--")) {
      return usage();
    } else if (std::filesystem::is_directory(argv[i])) {
      std::vector<std::filesystem::path> found;
      for (const auto& entry : std::filesystem::directory_iterator(argv[i]))
        if (entry.is_regular_file()) found.push_back(entry.path());
      std::sort(found.begin(), found.end());  // a fixed order, so the mutations are too
      files.insert(files.end(), found.begin(), found.end());
    } else if (std::filesystem::is_regular_file(argv[i])) {
      files.emplace_back(argv[i]);
    } else {
      std::fprintf(stderr, "replay: no such corpus file or directory: %s\n", argv[i]);
      return 2;
    }
  }
  if (files.empty()) {
    std::fprintf(stderr, "replay: no corpus inputs given: nothing would be checked\n");
    return usage();
  }

  std::vector<std::string> inputs;
  for (const auto& file : files) inputs.push_back(read_file(file));
  for (const auto& input : inputs) run(input);

  Random random(seed);
  for (std::size_t m = 0; m < mutations; ++m) {
    const std::string& base = inputs[m % inputs.size()];
    run(mutate(base, random, inputs, dictionary, max_len));
  }
  std::printf("replayed %zu corpus inputs and %zu mutations (seed %llu): all invariants held\n",
              inputs.size(), mutations, static_cast<unsigned long long>(seed));
  return 0;
}
