// Reading integers from JSON that came from outside (plan, model, profile and
// checkpoint files).
//
// Note [Checked integers]
// ~~~~~~~~~~~~~~~~~~~~~~~
// Nlohmann's `get<Int>()` converts a JSON number by
// a plain cast: a float out of Int's range (1e+123, found by fuzz_model) is
// undefined behaviour, and an integer out of range (4294967297 as an int)
// silently becomes another number. get_checked<T> reads integers, and lists
// and maps of them, only when the value is a whole number that fits; anything
// else throws nlohmann::json::type_error, as a wrong type does, so each
// caller's existing "must be an integer" message covers it. Other types are
// read as get<T>() reads them.
#pragma once

#include <cmath>
#include <cstdint>
#include <limits>
#include <map>
#include <string>
#include <type_traits>
#include <vector>

#include <nlohmann/json.hpp>

namespace trident {

namespace detail {
template <class T>
struct is_vector : std::false_type {};
template <class T>
struct is_vector<std::vector<T>> : std::true_type {};
template <class T>
struct is_string_map : std::false_type {};
template <class T>
struct is_string_map<std::map<std::string, T>> : std::true_type {};

template <class Int>
Int checked_integer(const nlohmann::json& j) {
  using limits = std::numeric_limits<Int>;
  const auto fail = [&] {
    return nlohmann::json::type_error::create(302, "number " + j.dump() + " is not a whole number in [" +
                                                       std::to_string(limits::min()) + ", " +
                                                       std::to_string(limits::max()) + "]",
                                              &j);
  };
  if (j.is_number_float()) {
    const double v = j.get<double>();
    const double bound = std::ldexp(1.0, limits::digits);  // 2^digits: the first value past max
    if (!(v >= (limits::is_signed ? -bound : 0.0) && v < bound) || v != std::trunc(v)) throw fail();
    return static_cast<Int>(v);
  }
  if (j.is_number_unsigned()) {
    const auto v = j.get<std::uint64_t>();
    if (v > static_cast<std::uint64_t>(limits::max())) throw fail();
    return static_cast<Int>(v);
  }
  if (j.is_number_integer()) {
    const auto v = j.get<std::int64_t>();
    if (v < 0 && !limits::is_signed) throw fail();
    if (limits::is_signed && (v < static_cast<std::int64_t>(limits::min()) ||
                              v > static_cast<std::int64_t>(limits::max())))
      throw fail();
    return static_cast<Int>(v);
  }
  return j.get<Int>();  // not a number: throws get's own type_error
}
}  // namespace detail

// j.get<T>(), with integers checked (see Note [Checked integers]).
template <class T>
T get_checked(const nlohmann::json& j) {
  if constexpr (std::is_integral_v<T> && !std::is_same_v<T, bool>) {
    return detail::checked_integer<T>(j);
  } else if constexpr (detail::is_vector<T>::value) {
    if (!j.is_array()) return j.get<T>();
    T out;
    for (const auto& e : j) out.push_back(get_checked<typename T::value_type>(e));
    return out;
  } else if constexpr (detail::is_string_map<T>::value) {
    if (!j.is_object()) return j.get<T>();
    T out;
    for (const auto& [k, v] : j.items()) out.emplace(k, get_checked<typename T::mapped_type>(v));
    return out;
  } else {
    return j.get<T>();
  }
}

// obj.value(key, fallback), with integers checked.
template <class T>
T value_checked(const nlohmann::json& obj, const std::string& key, T fallback) {
  if (!obj.is_object()) return obj.value(key, fallback);  // throws value()'s own type_error
  const auto it = obj.find(key);
  return it == obj.end() ? fallback : get_checked<T>(*it);
}

// The first place where two documents differ, as "JSON pointer: a vs b"
// (e.g. "/stages/1/devices/0: 3 vs 2"), values cut at 60 characters; empty
// when they are equal. For messages such as "rank 2's plan differs at ...".
std::string first_difference(const nlohmann::json& a, const nlohmann::json& b);

// Whether `doc` is an object whose "format" is the string `format`. Unlike
// doc.value("format", "") == format, which throws a type_error when
// "format" holds a number or a list (found by fuzz_profile), it never throws.
inline bool has_format(const nlohmann::json& doc, const std::string& format) {
  if (!doc.is_object()) return false;
  const auto it = doc.find("format");
  return it != doc.end() && it->is_string() && it->get_ref<const std::string&>() == format;
}

}  // namespace trident
