#include "trident/base/json.h"

#include <algorithm>
#include <functional>

namespace trident {

std::string first_difference(const nlohmann::json& a, const nlohmann::json& b) {
  auto brief = [](const nlohmann::json& v) {
    auto text = v.dump();
    return text.size() > 60 ? text.substr(0, 57) + "..." : text;
  };
  std::function<std::string(const nlohmann::json&, const nlohmann::json&, const std::string&)> walk =
      [&](const nlohmann::json& x, const nlohmann::json& y, const std::string& at) -> std::string {
    if (x.type() != y.type()) return (at.empty() ? "/" : at) + ": " + brief(x) + " vs " + brief(y);
    if (x.is_object()) {
      for (const auto& [key, value] : x.items()) {
        if (!y.contains(key)) return at + "/" + key + ": " + brief(value) + " vs (missing)";
        if (auto d = walk(value, y.at(key), at + "/" + key); !d.empty()) return d;
      }
      for (const auto& [key, value] : y.items())
        if (!x.contains(key)) return at + "/" + key + ": (missing) vs " + brief(value);
      return "";
    }
    if (x.is_array()) {
      for (std::size_t i = 0; i < std::min(x.size(), y.size()); ++i)
        if (auto d = walk(x[i], y[i], at + "/" + std::to_string(i)); !d.empty()) return d;
      if (x.size() != y.size())
        return at + ": " + std::to_string(x.size()) + " vs " + std::to_string(y.size()) + " entries";
      return "";
    }
    return x == y ? "" : (at.empty() ? "/" : at) + ": " + brief(x) + " vs " + brief(y);
  };
  return walk(a, b, "");
}

}  // namespace trident
