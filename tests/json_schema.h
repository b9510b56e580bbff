// Validating apnea-locks' JSON documents against docs/apnea-locks.schema.json: a small JSON
// Schema validator (Boost.JSON) for the keywords that file uses, and the checks the tests
// call on every JSON document the binary prints.
//
// Keywords: type (one or a list), enum, const, properties, required, additionalProperties
// (false or a schema), items, minItems, minimum, allOf, anyOf, oneOf, if/then/else and
// $ref to "#/$defs/NAME". Anything else in a schema is an error of the schema (so the
// schema cannot silently use a keyword this validator ignores); annotations ($schema, $id,
// title, description) are skipped.
#pragma once

#include <boost/json.hpp>
#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <fstream>
#include <iterator>
#include <set>
#include <string>
#include <string_view>
#include <vector>

namespace apnea_locks::testing {

class JsonSchema {
 public:
  /// A validator for `root` (a parsed schema document).
  explicit JsonSchema(boost::json::value root) : root_(std::move(root)) {}

  /// The problems of `instance` against the schema at `pointer` ("" the root,
  /// "#/$defs/status" a definition): empty when it is valid.
  std::vector<std::string> validate(const boost::json::value& instance, std::string_view pointer = "") const {
    std::vector<std::string> errors;
    const boost::json::value* schema = resolve(pointer);
    if (schema == nullptr) return {"no schema at " + std::string(pointer)};
    check(*schema, instance, "$", errors);
    return errors;
  }

 private:
  const boost::json::value* resolve(std::string_view ref) const {
    if (ref.empty() || ref == "#") return &root_;
    const std::string_view prefix = "#/$defs/";
    if (!ref.starts_with(prefix)) return nullptr;
    const auto* defs = root_.as_object().if_contains("$defs");
    if (defs == nullptr || !defs->is_object()) return nullptr;
    return defs->as_object().if_contains(ref.substr(prefix.size()));
  }

  static bool has_type(const boost::json::value& v, std::string_view type) {
    if (type == "null") return v.is_null();
    if (type == "boolean") return v.is_bool();
    if (type == "string") return v.is_string();
    if (type == "object") return v.is_object();
    if (type == "array") return v.is_array();
    if (type == "integer")
      return v.is_int64() || v.is_uint64() ||
             (v.is_double() && std::isfinite(v.as_double()) && std::floor(v.as_double()) == v.as_double());
    if (type == "number") return v.is_number();
    return false;
  }

  static double number(const boost::json::value& v) {
    if (v.is_int64()) return static_cast<double>(v.as_int64());
    if (v.is_uint64()) return static_cast<double>(v.as_uint64());
    return v.as_double();
  }

  static bool equal(const boost::json::value& a, const boost::json::value& b) {
    if (a.is_number() && b.is_number()) return number(a) == number(b);
    return a == b;
  }

  bool valid(const boost::json::value& schema, const boost::json::value& instance) const {
    std::vector<std::string> errors;
    check(schema, instance, "$", errors);
    return errors.empty();
  }

  void check(const boost::json::value& schema, const boost::json::value& v, const std::string& at,
             std::vector<std::string>& errors) const {
    if (schema.is_bool()) {
      if (!schema.as_bool()) errors.push_back(at + ": not allowed");
      return;
    }
    const boost::json::object& s = schema.as_object();
    static const std::set<std::string_view> known = {
        "$schema", "$id", "title", "description", "type", "enum", "const", "properties",
        "required", "additionalProperties", "items", "minItems", "minimum", "minLength", "allOf", "anyOf",
        "oneOf", "if", "then", "else", "$ref", "$defs"};
    for (const auto& member : s)
      if (known.count(member.key()) == 0)
        errors.push_back(at + ": the schema uses an unsupported keyword " + std::string(member.key()));
    if (const auto* ref = s.if_contains("$ref")) {
      const boost::json::value* target = resolve(ref->as_string());
      if (target == nullptr) errors.push_back(at + ": unresolved $ref " + std::string(ref->as_string()));
      else check(*target, v, at, errors);
    }
    if (const auto* type = s.if_contains("type")) {
      bool ok = false;
      if (type->is_string()) ok = has_type(v, type->as_string());
      else
        for (const auto& t : type->as_array()) ok = ok || has_type(v, t.as_string());
      if (!ok) {
        errors.push_back(at + ": expected type " + boost::json::serialize(*type) + ", got " + boost::json::serialize(v));
        return;
      }
    }
    if (const auto* options = s.if_contains("enum")) {
      bool ok = false;
      for (const auto& option : options->as_array()) ok = ok || equal(option, v);
      if (!ok) errors.push_back(at + ": " + boost::json::serialize(v) + " is not one of " + boost::json::serialize(*options));
    }
    if (const auto* constant = s.if_contains("const"))
      if (!equal(*constant, v))
        errors.push_back(at + ": expected " + boost::json::serialize(*constant) + ", got " + boost::json::serialize(v));
    if (const auto* minimum = s.if_contains("minimum"))
      if (v.is_number() && number(v) < number(*minimum))
        errors.push_back(at + ": below the minimum " + boost::json::serialize(*minimum));
    if (const auto* min_length = s.if_contains("minLength"))
      if (v.is_string()) {
        // Characters, as JSON Schema counts them: the bytes that do not continue a UTF-8 sequence.
        const auto& text = v.as_string();
        const auto characters = std::count_if(text.begin(), text.end(), [](char c) {
          return (static_cast<unsigned char>(c) & 0xC0) != 0x80;
        });
        if (static_cast<double>(characters) < number(*min_length))
          errors.push_back(at + ": shorter than " + boost::json::serialize(*min_length) + " characters");
      }
    if (v.is_object()) {
      const boost::json::object& o = v.as_object();
      const boost::json::object* properties = nullptr;
      if (const auto* p = s.if_contains("properties")) properties = &p->as_object();
      if (const auto* required = s.if_contains("required"))
        for (const auto& name : required->as_array())
          if (!o.contains(name.as_string())) errors.push_back(at + ": missing member " + std::string(name.as_string()));
      for (const auto& member : o) {
        const std::string where = at + "." + std::string(member.key());
        if (properties != nullptr)
          if (const auto* sub = properties->if_contains(member.key())) {
            check(*sub, member.value(), where, errors);
            continue;
          }
        if (const auto* extra = s.if_contains("additionalProperties")) check(*extra, member.value(), where, errors);
      }
    }
    if (v.is_array()) {
      const boost::json::array& a = v.as_array();
      if (const auto* min_items = s.if_contains("minItems"))
        if (static_cast<double>(a.size()) < number(*min_items)) errors.push_back(at + ": too few items");
      if (const auto* items = s.if_contains("items"))
        for (std::size_t i = 0; i < a.size(); ++i) check(*items, a[i], at + "[" + std::to_string(i) + "]", errors);
    }
    if (const auto* all = s.if_contains("allOf"))
      for (const auto& sub : all->as_array()) check(sub, v, at, errors);
    if (const auto* any = s.if_contains("anyOf")) {
      bool ok = false;
      for (const auto& sub : any->as_array()) ok = ok || valid(sub, v);
      if (!ok) errors.push_back(at + ": matches none of anyOf");
    }
    if (const auto* one = s.if_contains("oneOf")) {
      int matched = 0;
      for (const auto& sub : one->as_array()) matched += valid(sub, v) ? 1 : 0;
      if (matched != 1)
        errors.push_back(at + ": matches " + std::to_string(matched) + " of oneOf (exactly 1 needed): " +
                         boost::json::serialize(v).substr(0, 200));
    }
    if (const auto* condition = s.if_contains("if")) {
      if (valid(*condition, v)) {
        if (const auto* then = s.if_contains("then")) check(*then, v, at, errors);
      } else if (const auto* otherwise = s.if_contains("else")) {
        check(*otherwise, v, at, errors);
      }
    }
  }

  boost::json::value root_;
};

/// The schema of docs/apnea-locks.schema.json (APNEA_LOCKS_SOURCE), read once.
inline const JsonSchema& apnea_locks_schema() {
  static const JsonSchema schema = [] {
    const char* source = std::getenv("APNEA_LOCKS_SOURCE");
    const std::string path = std::string(source != nullptr ? source : ".") + "/docs/apnea-locks.schema.json";
    std::ifstream in(path);
    const std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    boost::json::error_code error;
    boost::json::value root = boost::json::parse(text, error);
    if (error || !root.is_object()) {
      FAIL("cannot read the JSON schema " << path << ": " << error.message());
    }
    return JsonSchema(std::move(root));
  }();
  return schema;
}

/// The problems of one apnea-locks JSON document: its "schema" member names the definition
/// it is checked against (status, inspect, path, reclaim, run-event), and the document must
/// also match exactly one branch of the schema's root.
inline std::vector<std::string> schema_problems(const boost::json::value& document) {
  const JsonSchema& schema = apnea_locks_schema();
  if (!document.is_object()) return {"not a JSON object"};
  const auto* tag = document.as_object().if_contains("schema");
  if (tag == nullptr || !tag->is_object() || !tag->as_object().contains("name") ||
      !tag->as_object().at("name").is_string())
    return {"no \"schema\": {\"name\", \"version\"} member"};
  std::string name(tag->as_object().at("name").as_string());
  for (char& c : name)
    if (c == '-') c = '_';
  std::vector<std::string> problems = schema.validate(document, "#/$defs/" + name);
  if (problems.empty()) problems = schema.validate(document);
  return problems;
}

/// Counts the documents validated in this test process (for the tests of this helper).
inline int& validated_documents() {
  static int count = 0;
  return count;
}

/// Parses `text` as one JSON document apnea-locks printed and checks it against the schema
/// (a failed CHECK naming each problem). Returns the parsed value (null when unparsable).
inline boost::json::value parse_checked_json(std::string_view text) {
  boost::json::error_code error;
  boost::json::value document = boost::json::parse(text, error);
  if (error) {
    FAIL_CHECK("not JSON (" << error.message() << "): " << std::string(text.substr(0, 400)));
    return nullptr;
  }
  ++validated_documents();
  for (const std::string& problem : schema_problems(document))
    FAIL_CHECK("JSON schema: " << problem << "\n  in: " << std::string(text.substr(0, 300)));
  return document;
}

/// Checks the JSON document `text` starts with (what may follow it, such as error lines
/// folded in from standard error, is left alone).
inline void check_first_json_document(std::string_view text) {
  boost::json::stream_parser parser;
  boost::json::error_code error;
  const std::size_t used = parser.write_some(text.data(), text.size(), error);
  if (!error && !parser.done()) parser.finish(error);
  if (error) {
    FAIL_CHECK("not JSON (" << error.message() << "): " << std::string(text.substr(0, 400)));
    return;
  }
  parse_checked_json(text.substr(0, used));
}

/// Checks every line of `text` that is a JSON object (run --json events among other lines).
inline void check_json_lines(std::string_view text) {
  std::size_t at = 0;
  while (at < text.size()) {
    std::size_t end = text.find('\n', at);
    if (end == std::string_view::npos) end = text.size();
    const std::string_view line = text.substr(at, end - at);
    if (line.starts_with("{\"schema\"")) parse_checked_json(line);
    at = end + 1;
  }
}

}  // namespace apnea_locks::testing
