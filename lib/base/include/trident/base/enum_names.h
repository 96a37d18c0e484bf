// An enum's names, written once: the table that both directions (the name of
// a value, the value of a name) and the "allowed:" list of an error read.
//   const EnumNames<SyncMethod> kNames{{SyncMethod::kPs, "ps"}, ...};
#pragma once

#include <initializer_list>
#include <optional>
#include <string>
#include <utility>
#include <vector>

namespace trident {

template <class Enum>
class EnumNames {
 public:
  EnumNames(std::initializer_list<std::pair<Enum, const char*>> table) : table_(table) {}

  // The value's name; "?" for a value the table lacks.
  std::string name(Enum value) const {
    for (const auto& [v, n] : table_)
      if (v == value) return n;
    return "?";
  }
  // The value named `text`, or nullopt.
  std::optional<Enum> parse(const std::string& text) const {
    for (const auto& [v, n] : table_)
      if (text == n) return v;
    return std::nullopt;
  }
  // Every name, in the table's order.
  std::vector<std::string> names() const {
    std::vector<std::string> out;
    for (const auto& entry : table_) out.push_back(entry.second);
    return out;
  }

 private:
  std::vector<std::pair<Enum, const char*>> table_;
};

}  // namespace trident
