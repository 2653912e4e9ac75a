// JSON from files, read the same way by every parser (chip files,
// workloads, diffusers configs): templates over the JSON type
// (nlohmann::json, ordered_json), so that base needs no JSON library.
//
// DescribeJson: how a message shows a value a file gave: a number, boolean
// or null as written, a string quoted and escaped (base/printable.h; cut at
// 64 bytes), an array or object by its type alone. Never a dump of a
// container: a value may nest 200,000 levels deep (dumping recurses once per
// level) or hold bytes that are not UTF-8 (nlohmann's dump throws on them).
//
// ParseJsonOnce: parses like Json::parse(text, nullptr, allow_exceptions)
// (a discarded value or a parse_error on a syntax error), and sets *duplicate to the first key an object
// holds twice (JSON allows it and nlohmann keeps the last silently, so a
// file saying "name" twice would mean whichever came second).
//
// ParseJsonFile: ParseJsonOnce as a file's reader wants it: the value, or
// one message naming `origin` and the place and saying what was wrong
// ("w.json:2:16: not valid JSON (unexpected '}'; expected string literal)",
// "... (invalid string: ill-formed UTF-8 byte; last read: ...)", "w.json:
// not valid JSON (number overflow parsing '1e999')", "w.json: an object
// holds the key 'm' twice (which one would be meant?)").
#ifndef TPUMESH_BASE_JSON_TEXT_H_
#define TPUMESH_BASE_JSON_TEXT_H_

#include <set>
#include <string>
#include <string_view>
#include <vector>

#include "base/printable.h"
#include "base/status.h"

namespace tpumesh {

template <typename Json>
std::string DescribeJson(const Json& v) {
  if (v.is_number() || v.is_boolean() || v.is_null()) return v.dump();
  if (v.is_string()) {
    const std::string& t = v.template get_ref<const std::string&>();
    return Quoted(t.size() > 64 ? t.substr(0, 64) + "..." : t);
  }
  return v.is_array() ? "an array" : "an object";
}

template <typename Json>
Json ParseJsonOnce(std::string_view text, std::string* duplicate, bool allow_exceptions = false) {
  duplicate->clear();
  std::vector<std::set<std::string>> open;  // the keys of each object being read
  auto seen = [&](int /*depth*/, typename Json::parse_event_t event, Json& parsed) {
    using Event = typename Json::parse_event_t;
    if (event == Event::object_start) {
      open.emplace_back();
    } else if (event == Event::object_end) {
      if (!open.empty()) open.pop_back();
    } else if (event == Event::key && !open.empty()) {
      const std::string& key = parsed.template get_ref<const std::string&>();
      if (!open.back().insert(key).second && duplicate->empty()) *duplicate = key;
    }
    return true;
  };
  return Json::parse(text, seen, allow_exceptions);
}

// "LINE:COLUMN" (from 1) of byte `offset` of text.
inline std::string JsonLineColumn(std::string_view text, size_t offset) {
  int line = 1, col = 1;
  for (size_t i = 0; i < offset && i < text.size(); ++i) {
    if (text[i] == '\n') {
      ++line;
      col = 1;
    } else {
      ++col;
    }
  }
  return std::to_string(line) + ":" + std::to_string(col);
}

template <typename Json>
StatusOr<Json> ParseJsonFile(std::string_view text, const std::string& origin) {
  Json j;
  std::string duplicate;
  try {
    j = ParseJsonOnce<Json>(text, &duplicate, /*allow_exceptions=*/true);
  } catch (const typename Json::exception& e) {
    // A syntax error is a parse_error with its byte ("[json.exception.parse_error.101] parse error at line 2,
    // column 15: syntax error while parsing object key - unexpected '}'; expected string literal": the part
    // after " - " is kept); a number past a double's range is out_of_range with no place
    // ("[json.exception.out_of_range.406] number overflow parsing '1e999'").
    const auto* syntax = dynamic_cast<const typename Json::parse_error*>(&e);
    std::string why = e.what();
    const size_t at = why.find(syntax != nullptr ? " - " : "] ");
    if (at != std::string::npos) why = why.substr(at + (syntax != nullptr ? 3 : 2));
    const std::string place =
        syntax != nullptr ? ":" + JsonLineColumn(text, syntax->byte > 0 ? syntax->byte - 1 : 0) : std::string();
    return InvalidArgumentError(origin + place + ": not valid JSON (" + why + ")");
  }
  if (!duplicate.empty())
    return InvalidArgumentError(origin + ": an object holds the key " + Quoted(duplicate) +
                                " twice (which one would be meant?)");
  return j;
}

}  // namespace tpumesh

#endif  // TPUMESH_BASE_JSON_TEXT_H_
