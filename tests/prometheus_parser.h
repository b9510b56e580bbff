// A small strict parser of the Prometheus text exposition format (0.0.4), for tests: every
// family starts with `# HELP` then `# TYPE`, names and labels are checked against the
// format's grammar, label values are unescaped, values are numbers, series are unique.
#pragma once

#include <cerrno>
#include <cmath>
#include <cstdlib>
#include <expected>
#include <map>
#include <set>
#include <string>
#include <string_view>
#include <vector>

namespace apnea_locks::testing {

struct PromSample {
  std::string name;
  std::map<std::string, std::string> labels;
  double value = 0;
};

struct PromFamily {
  std::string name;
  std::string help;
  std::string type;
  std::vector<PromSample> samples;
};

struct PromExposition {
  std::vector<PromFamily> families;

  const PromFamily* find(std::string_view name) const {
    for (const auto& family : families)
      if (family.name == name) return &family;
    return nullptr;
  }
  /// The value of the one sample of `name` whose labels include `labels`; NaN when none.
  double value(std::string_view name, const std::map<std::string, std::string>& labels = {}) const {
    const PromFamily* family = find(name);
    if (family == nullptr) return std::nan("");
    for (const auto& sample : family->samples) {
      bool match = true;
      for (const auto& [key, want] : labels) {
        auto it = sample.labels.find(key);
        if (it == sample.labels.end() || it->second != want) match = false;
      }
      if (match) return sample.value;
    }
    return std::nan("");
  }
};

namespace prom_detail {

inline bool is_name_start(char c, bool colon) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_' || (colon && c == ':');
}
inline bool is_name_char(char c, bool colon) { return is_name_start(c, colon) || (c >= '0' && c <= '9'); }

/// Reads a metric (colon allowed) or label name at `at`.
inline std::string read_name(std::string_view line, std::size_t& at, bool colon) {
  const std::size_t start = at;
  if (at >= line.size() || !is_name_start(line[at], colon)) return {};
  while (at < line.size() && is_name_char(line[at], colon)) ++at;
  return std::string(line.substr(start, at - start));
}

inline bool valid_utf8(std::string_view text) {
  for (std::size_t i = 0; i < text.size();) {
    const auto c = static_cast<unsigned char>(text[i]);
    const std::size_t n = c < 0x80 ? 0 : (c & 0xE0) == 0xC0 ? 1 : (c & 0xF0) == 0xE0 ? 2
                        : (c & 0xF8) == 0xF0 ? 3 : 4;
    if (n == 4 || i + n >= text.size()) return false;
    for (std::size_t k = 1; k <= n; ++k)
      if ((static_cast<unsigned char>(text[i + k]) & 0xC0) != 0x80) return false;
    i += n + 1;
  }
  return true;
}

inline bool parse_value(std::string_view text, double& out) {
  if (text == "NaN") { out = std::nan(""); return true; }
  if (text == "+Inf") { out = HUGE_VAL; return true; }
  if (text == "-Inf") { out = -HUGE_VAL; return true; }
  if (text.empty()) return false;
  const std::string copy(text);
  char* end = nullptr;
  errno = 0;
  out = std::strtod(copy.c_str(), &end);
  return errno == 0 && end == copy.c_str() + copy.size() && std::isfinite(out);
}

}  // namespace prom_detail

/// Parses `text`; the message names the line and what is wrong.
inline std::expected<PromExposition, std::string> parse_exposition(std::string_view text) {
  using namespace prom_detail;
  PromExposition out;
  if (text.empty()) return std::unexpected(std::string("empty exposition"));
  if (text.back() != '\n') return std::unexpected(std::string("does not end with a newline"));
  if (!valid_utf8(text)) return std::unexpected(std::string("not UTF-8"));
  std::set<std::string> family_names;
  std::set<std::string> series;
  std::size_t line_no = 0;
  std::size_t at = 0;
  auto fail = [&](const std::string& what) {
    return std::unexpected("line " + std::to_string(line_no) + ": " + what);
  };
  while (at < text.size()) {
    const std::size_t end = text.find('\n', at);
    std::string_view line = text.substr(at, end - at);
    at = end + 1;
    ++line_no;
    if (line.empty()) return fail("empty line");
    if (line.starts_with("# HELP ")) {
      std::size_t i = 7;
      std::string name = read_name(line, i, true);
      if (name.empty() || i >= line.size() || line[i] != ' ') return fail("bad HELP line");
      if (!family_names.insert(name).second) return fail("family repeated: " + name);
      std::string help;
      for (++i; i < line.size(); ++i) {
        if (line[i] == '\\') {
          if (++i >= line.size()) return fail("dangling escape in HELP");
          if (line[i] == 'n') help += '\n';
          else if (line[i] == '\\') help += '\\';
          else return fail("bad escape in HELP");
        } else {
          help += line[i];
        }
      }
      if (help.empty()) return fail("empty HELP");
      out.families.push_back(PromFamily{name, help, "", {}});
      continue;
    }
    if (line.starts_with("# TYPE ")) {
      std::size_t i = 7;
      std::string name = read_name(line, i, true);
      if (out.families.empty() || out.families.back().name != name)
        return fail("TYPE not right after its HELP: " + name);
      if (!out.families.back().type.empty() || !out.families.back().samples.empty())
        return fail("TYPE repeated or after samples");
      if (i >= line.size() || line[i] != ' ') return fail("bad TYPE line");
      const std::string type(line.substr(i + 1));
      if (type != "gauge" && type != "counter" && type != "untyped" && type != "histogram" &&
          type != "summary")
        return fail("unknown type " + type);
      out.families.back().type = type;
      continue;
    }
    if (line.starts_with("#")) return fail("unexpected comment");
    // A sample: name{label="value",...} value
    std::size_t i = 0;
    PromSample sample;
    sample.name = read_name(line, i, true);
    if (sample.name.empty()) return fail("bad metric name");
    if (out.families.empty() || out.families.back().name != sample.name)
      return fail("sample outside its family: " + sample.name);
    if (out.families.back().type.empty()) return fail("sample before TYPE");
    if (i < line.size() && line[i] == '{') {
      ++i;
      while (true) {
        if (i < line.size() && line[i] == '}') { ++i; break; }
        std::string label = read_name(line, i, false);
        if (label.empty() || label.starts_with("__")) return fail("bad label name");
        if (i >= line.size() || line[i] != '=') return fail("label without =");
        if (++i >= line.size() || line[i] != '"') return fail("label value not quoted");
        std::string value;
        for (++i;; ++i) {
          if (i >= line.size()) return fail("unterminated label value");
          if (line[i] == '"') break;
          if (line[i] == '\\') {
            if (++i >= line.size()) return fail("dangling escape");
            if (line[i] == 'n') value += '\n';
            else if (line[i] == '\\' || line[i] == '"') value += line[i];
            else return fail("bad escape in label value");
          } else {
            value += line[i];
          }
        }
        ++i;
        if (!sample.labels.emplace(label, value).second) return fail("label repeated: " + label);
        if (i < line.size() && line[i] == ',') { ++i; continue; }
        if (i < line.size() && line[i] == '}') { ++i; break; }
        return fail("bad label list");
      }
    }
    if (i >= line.size() || line[i] != ' ') return fail("no space before the value");
    const std::string_view value = line.substr(i + 1);
    if (value.find(' ') != std::string_view::npos) return fail("timestamp or trailing text");
    if (!parse_value(value, sample.value)) return fail("bad value '" + std::string(value) + "'");
    std::string key = sample.name;
    for (const auto& [k, v] : sample.labels) key += "\x01" + k + "\x02" + v;
    if (!series.insert(key).second) return fail("series repeated");
    out.families.back().samples.push_back(std::move(sample));
  }
  for (const auto& family : out.families)
    if (family.type.empty()) return std::unexpected("family without TYPE: " + family.name);
  return out;
}

}  // namespace apnea_locks::testing
