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
#ifndef TPUMESH_BASE_JSON_TEXT_H_
#define TPUMESH_BASE_JSON_TEXT_H_

#include <set>
#include <string>
#include <string_view>
#include <vector>

#include "base/printable.h"

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

}  // namespace tpumesh

#endif  // TPUMESH_BASE_JSON_TEXT_H_
