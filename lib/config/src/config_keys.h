// The machinery that reads, checks and writes a TrainConfig key by key
// (internal to config.cc): Reader (typed reads that name the key, the value
// and what is allowed), Key (one documented key: its reader, writer,
// default and allowed values) and the helpers that make the usual kinds of
// key. The keys themselves and the checks across keys are in config.cc.
#pragma once

#include <yaml-cpp/yaml.h>

#include <algorithm>
#include <cstdint>
#include <functional>
#include <limits>
#include <string>
#include <vector>

#include "trident/base/text.h"
#include "trident/config/config.h"

namespace trident::config::config_keys {

inline size_t edit_distance(const std::string& a, const std::string& b) {
  std::vector<size_t> row(b.size() + 1);
  for (size_t j = 0; j <= b.size(); ++j) row[j] = j;
  for (size_t i = 1; i <= a.size(); ++i) {
    size_t diag = row[0];
    row[0] = i;
    for (size_t j = 1; j <= b.size(); ++j) {
      size_t up = row[j];
      row[j] = std::min({row[j] + 1, row[j - 1] + 1, diag + (a[i - 1] != b[j - 1])});
      diag = up;
    }
  }
  return row[b.size()];
}

inline std::string text_of(const YAML::Node& n) {
  if (n.IsScalar()) return "'" + n.Scalar() + "'";
  YAML::Emitter e;
  e << YAML::Flow << n;
  return e.c_str();
}

// Reads one section of the config, remembering the source for messages.
class Reader {
 public:
  Reader(std::string source, YAML::Node root) : source_(std::move(source)), root_(std::move(root)) {}

  [[noreturn]] void fail(const std::string& key, const YAML::Node& value, const std::string& allowed) const {
    throw ConfigError(source_ + ": " + key + " = " + text_of(value) + ": " + allowed);
  }
  [[noreturn]] void fail(const std::string& message) const { throw ConfigError(source_ + ": " + message); }

  // The section `name` (empty = top level) after checking it is a map whose
  // keys are all in `allowed`.
  YAML::Node section(const std::string& name, const std::vector<std::string>& allowed) const {
    YAML::Node node = name.empty() ? root_ : YAML::Node(root_[name]);
    if (!node || node.IsNull()) return YAML::Node(YAML::NodeType::Map);
    if (!node.IsMap()) fail(name.empty() ? "the config" : name, node, "must be a mapping of keys to values");
    for (const auto& kv : node) {
      const auto key = kv.first.Scalar();
      if (std::find(allowed.begin(), allowed.end(), key) != allowed.end()) continue;
      std::string hint;
      for (const auto& a : allowed)
        if (edit_distance(key, a) <= 2) hint = " (did you mean '" + a + "'?)";
      throw ConfigError(source_ + ": unknown key '" + (name.empty() ? "" : name + ".") + key + "'" + hint +
                        "; allowed " + (name.empty() ? "top-level keys" : "in " + name) + ": " + join(allowed));
    }
    return node;
  }

  std::string str(const YAML::Node& sec, const std::string& key, const std::string& dflt,
                  const std::vector<std::string>& choices = {}) const {
    const auto& n = sec[leaf(key)];
    if (!n || n.IsNull()) return dflt;
    if (!n.IsScalar()) fail(key, n, "must be a string");
    const auto v = n.Scalar();
    if (!choices.empty() && std::find(choices.begin(), choices.end(), v) == choices.end()) {
      fail(key, n, "allowed: " + join(choices));
    }
    return v;
  }

  std::int64_t integer(const YAML::Node& sec, const std::string& key, std::int64_t dflt, std::int64_t lo,
                       std::int64_t hi = std::numeric_limits<std::int64_t>::max()) const {
    const auto& n = sec[leaf(key)];
    if (!n || n.IsNull()) return dflt;
    const std::string range = hi == std::numeric_limits<std::int64_t>::max()
                                  ? ">= " + std::to_string(lo)
                                  : "in [" + std::to_string(lo) + ", " + std::to_string(hi) + "]";
    std::int64_t v;
    if (!n.IsScalar() || !YAML::convert<std::int64_t>::decode(n, v)) fail(key, n, "must be an integer " + range);
    if (v < lo || v > hi) fail(key, n, "must be an integer " + range);
    return v;
  }

  // A number in [lo, hi] (or [lo, hi) when `open_hi`).
  double real(const YAML::Node& sec, const std::string& key, double dflt, double lo, double hi,
              bool open_hi = false, bool open_lo = false) const {
    const auto& n = sec[leaf(key)];
    if (!n || n.IsNull()) return dflt;
    std::ostringstream range;
    range << (open_lo ? "(" : "[") << lo << ", ";
    if (hi == std::numeric_limits<double>::infinity()) range << "inf)";
    else range << hi << (open_hi ? ")" : "]");
    double v;
    if (!n.IsScalar() || !YAML::convert<double>::decode(n, v) || !std::isfinite(v)) {
      fail(key, n, "must be a number in " + range.str());
    }
    if (v < lo || v > hi || (open_hi && v == hi) || (open_lo && v == lo)) fail(key, n, "must be a number in " + range.str());
    return v;
  }

  bool boolean(const YAML::Node& sec, const std::string& key, bool dflt) const {
    const auto& n = sec[leaf(key)];
    if (!n || n.IsNull()) return dflt;
    bool v;
    if (!n.IsScalar() || !YAML::convert<bool>::decode(n, v)) fail(key, n, "must be true or false");
    return v;
  }

 private:
  static std::string leaf(const std::string& key) { return key.substr(key.rfind('.') + 1); }
  std::string source_;
  YAML::Node root_;
};

// Note [Config keys]
// ~~~~~~~~~~~~~~~~~~
// The key table — the Key rows that config.cc's *_keys() functions return,
// section by section — is the one place a config key is named. Each row says where the key lives in TrainConfig, how it is read and
// checked (type, range or choices, default — either may depend on keys read
// before it, so the table is in dependency order), and how it is described.
// From it follow: the allowed keys of each section (unknown-key errors and
// their suggestions), reading with defaults, to_yaml(), --set of map keys,
// and the key table of docs/config.md (config_test checks that the page
// lists exactly these rows). Checks that relate several keys run after every key is read
// (check_relations).
struct Key {
  std::string path;                // "train.mini_batch"
  std::string fallback, allowed;   // for people: the default and what is allowed
  std::function<void(const Reader&, const YAML::Node& section, TrainConfig&)> read;
  std::function<void(YAML::Emitter&, const TrainConfig&)> write;  // the value; nothing to omit the key
  bool map = false;  // a map whose keys are names (parameter names may hold dots)
};

template <class T>
using Ref = T& (*)(TrainConfig&);
template <class T>
using From = std::function<T(const TrainConfig&)>;

// A default that depends on keys read before (with its text for people);
// without one, a key's default is TrainConfig's own initial value.
template <class T>
struct Default {
  From<T> value;
  std::string text;
};

inline std::string section_of(const std::string& path) {
  const auto dot = path.find('.');
  return dot == std::string::npos ? "" : path.substr(0, dot);
}

inline std::string shown(const std::string& v) { return "`" + v + "`"; }
inline std::string shown(std::int64_t v) { return std::to_string(v); }
inline std::string shown(double v) { return format_number("%g", v); }
inline std::string shown(bool v) { return v ? "true" : "false"; }

// Fills the key's default, its text, and to_yaml's writer from `ref`.
template <class T>
void finish(Key& k, Ref<T> ref, Default<T>& dflt, bool omit_zero = false) {
  if (!dflt.value) {
    TrainConfig initial;
    const T v = ref(initial);
    dflt.value = [v](const TrainConfig&) { return v; };
    if (dflt.text.empty()) dflt.text = shown(v);
  }
  k.fallback = dflt.text;
  k.write = [ref, omit_zero](YAML::Emitter& e, const TrainConfig& c) {
    const T& v = ref(const_cast<TrainConfig&>(c));  // reads only
    if (!(omit_zero && v == T{})) e << v;
  };
}

inline Key text_key(std::string path, Ref<std::string> ref, std::vector<std::string> choices, std::string allowed,
                    Default<std::string> dflt = {}) {
  Key k{path, "", std::move(allowed)};
  finish(k, ref, dflt);
  k.read = [=](const Reader& r, const YAML::Node& sec, TrainConfig& c) {
    ref(c) = r.str(sec, path, dflt.value(c), choices);
  };
  return k;
}

inline Key int_key(std::string path, Ref<std::int64_t> ref, From<std::int64_t> lo, From<std::int64_t> hi,
                  std::string allowed, Default<std::int64_t> dflt = {}, bool omit_zero = false) {
  Key k{path, "", std::move(allowed)};
  finish(k, ref, dflt, omit_zero);
  k.read = [=](const Reader& r, const YAML::Node& sec, TrainConfig& c) {
    ref(c) = r.integer(sec, path, dflt.value(c), lo(c), hi(c));
  };
  return k;
}

struct Interval {
  double lo, hi;
  bool open_lo = false, open_hi = false;
};

inline Key real_key(std::string path, Ref<double> ref, std::function<Interval(const TrainConfig&)> range,
                    std::string allowed, Default<double> dflt = {}, bool omit_zero = false) {
  Key k{path, "", std::move(allowed)};
  finish(k, ref, dflt, omit_zero);
  k.read = [=](const Reader& r, const YAML::Node& sec, TrainConfig& c) {
    const auto i = range(c);
    ref(c) = r.real(sec, path, dflt.value(c), i.lo, i.hi, i.open_hi, i.open_lo);
  };
  return k;
}

inline Key bool_key(std::string path, Ref<bool> ref, std::string allowed) {
  Key k{path, "", std::move(allowed)};
  Default<bool> dflt;
  finish(k, ref, dflt);
  k.read = [=](const Reader& r, const YAML::Node& sec, TrainConfig& c) {
    ref(c) = r.boolean(sec, path, dflt.value(c));
  };
  return k;
}

inline From<std::int64_t> bound(std::int64_t v) {
  return [v](const TrainConfig&) { return v; };
}
inline std::function<Interval(const TrainConfig&)> within(Interval i) {
  return [i](const TrainConfig&) { return i; };
}

}  // namespace trident::config::config_keys
