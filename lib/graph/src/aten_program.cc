// See Note [ATen programs] in aten_program.h.
#include "trident/graph/aten_program.h"

#include <algorithm>
#include <limits>

#include "trident/base/json.h"

namespace trident::graph {
namespace {

using nlohmann::json;
using Kind = AtenArg::Kind;

const std::vector<std::string>& layout_names() {
  static const std::vector<std::string> names{"strided"};
  return names;
}
const std::vector<std::string>& memory_format_names() {
  static const std::vector<std::string> names{"contiguous_format", "preserve_format", "channels_last"};
  return names;
}

std::string joined(const std::vector<std::string>& names) {
  std::string out;
  for (const auto& n : names) out += (out.empty() ? "" : ", ") + n;
  return out;
}

// Reads one program of one op; `where` prefixes every message.
class Reader {
 public:
  Reader(const OpGraph& graph, const Op& op) : graph_(graph), op_(op) {}

  AtenProgram program() {
    const std::string at = "op '" + op_.name + "' (aten)";
    const auto calls = op_.attrs.find("calls");
    if (calls == op_.attrs.end() || !calls->is_array() || calls->empty())
      throw GraphError(at + ": attrs 'calls' must be a non-empty list of calls");
    AtenProgram p;
    for (std::size_t i = 0; i < calls->size(); ++i) {
      p.calls.push_back(call((*calls)[i], at + " call " + std::to_string(i)));
      ++made_;
    }
    const auto result = op_.attrs.find("result");
    if (result == op_.attrs.end()) throw GraphError(at + ": attrs 'result' is missing; it names a call or an input");
    p.result = arg(*result, at + " result");
    if (p.result.kind != Kind::kCall && p.result.kind != Kind::kInput)
      throw GraphError(at + ": 'result' must name a call or an input, got " + result->dump());
    return p;
  }

 private:
  AtenCall call(const json& j, const std::string& where) {
    if (!j.is_object()) throw GraphError(where + ": a call is an object {\"op\", \"args\", ...}, got " + j.dump());
    AtenCall c;
    c.op = text(j, "op", where, true);
    c.overload = text(j, "overload", where, false);
    const auto args = j.find("args");
    if (args != j.end()) {
      if (!args->is_array()) throw GraphError(where + ": 'args' must be a list, got " + args->dump());
      for (std::size_t k = 0; k < args->size(); ++k) c.args.push_back(arg((*args)[k], where + " argument " + std::to_string(k)));
    }
    const auto kwargs = j.find("kwargs");
    if (kwargs != j.end()) {
      if (!kwargs->is_object()) throw GraphError(where + ": 'kwargs' must be an object, got " + kwargs->dump());
      for (const auto& [name, v] : kwargs->items()) c.kwargs.emplace(name, arg(v, where + " argument '" + name + "'"));
    }
    const auto random = j.find("random");
    if (random != j.end()) {
      if (!random->is_boolean()) throw GraphError(where + ": 'random' must be true or false, got " + random->dump());
      c.random = random->get<bool>();
    }
    for (const auto& [key, v] : j.items())
      if (key != "op" && key != "overload" && key != "args" && key != "kwargs" && key != "random")
        throw GraphError(where + ": unknown key '" + key + "'; a call has op, overload, args, kwargs, random");
    return c;
  }

  static std::string text(const json& j, const char* key, const std::string& where, bool required) {
    const auto it = j.find(key);
    if (it == j.end()) {
      if (required) throw GraphError(where + ": '" + key + "' is missing");
      return {};
    }
    if (!it->is_string()) throw GraphError(where + ": '" + key + "' must be a string, got " + it->dump());
    return it->get<std::string>();
  }

  static std::string one_of(const json& v, const std::vector<std::string>& names, const std::string& what,
                            const std::string& where) {
    if (!v.is_string() || std::find(names.begin(), names.end(), v.get<std::string>()) == names.end())
      throw GraphError(where + ": " + what + " " + v.dump() + " is not one trident reads; allowed: " + joined(names));
    return v.get<std::string>();
  }

  template <class Int>
  static Int integer(const json& v, const std::string& what, const std::string& where) {
    try {
      return get_checked<Int>(v);
    } catch (const json::exception&) {
      throw GraphError(where + ": " + what + " must be an integer, got " + v.dump());
    } catch (const std::out_of_range&) {
      throw GraphError(where + ": " + what + " " + v.dump() + " is out of range");
    }
  }

  AtenArg arg(const json& j, const std::string& where) {
    AtenArg a;
    if (j.is_null()) return a;
    if (j.is_boolean()) a.kind = Kind::kBool, a.boolean = j.get<bool>();
    else if (j.is_number_integer()) a.kind = Kind::kInt, a.integer = integer<std::int64_t>(j, "the integer", where);
    else if (j.is_number_float()) a.kind = Kind::kFloat, a.real = j.get<double>();
    else if (j.is_string()) a.kind = Kind::kString, a.text = j.get<std::string>();
    else if (j.is_array()) {
      a.kind = Kind::kList;
      for (std::size_t k = 0; k < j.size(); ++k) a.items.push_back(arg(j[k], where + " item " + std::to_string(k)));
    } else {
      a = reference(j, where);
    }
    return a;
  }

  AtenArg reference(const json& j, const std::string& where) {
    if (j.size() == 0) throw GraphError(where + ": cannot read argument {}");
    const auto key = j.begin().key();
    const auto& v = j.begin().value();
    const bool batch = key == "batch" || key == "plus";
    if (j.size() > (batch || key == "call" || key == "item" ? 2u : 1u))
      throw GraphError(where + ": cannot read argument " + j.dump() + " (one reference per argument)");
    AtenArg a;
    if (key == "float") {
      const auto f = one_of(v, {"inf", "-inf", "nan"}, "float", where);
      const double inf = std::numeric_limits<double>::infinity();
      a.kind = Kind::kFloat, a.real = f == "inf" ? inf : f == "-inf" ? -inf : std::numeric_limits<double>::quiet_NaN();
    } else if (key == "dtype") {
      a.kind = Kind::kDtype, a.text = one_of(v, aten_dtype_names(), "dtype", where);
    } else if (key == "layout") {
      a.kind = Kind::kLayout, a.text = one_of(v, layout_names(), "layout", where);
    } else if (key == "memory_format") {
      a.kind = Kind::kMemoryFormat, a.text = one_of(v, memory_format_names(), "memory_format", where);
    } else if (key == "in") {
      a.kind = Kind::kInput, a.index = integer<int>(v, "input", where);
      if (a.index < 0 || a.index >= static_cast<int>(op_.inputs.size()))
        throw GraphError(where + ": input " + v.dump() + " is out of range; the op reads " +
                         std::to_string(op_.inputs.size()) + " input(s)");
    } else if (key == "call" || key == "item") {
      if (!j.contains("call")) throw GraphError(where + ": 'item' without 'call' in " + j.dump());
      a.kind = Kind::kCall, a.index = integer<int>(j.at("call"), "call", where);
      a.item = j.contains("item") ? integer<int>(j.at("item"), "item", where) : -1;
      if (a.index < 0 || a.index >= made_)
        throw GraphError(where + ": refers to call " + j.at("call").dump() + " before it is made");
      if (a.item < -1) throw GraphError(where + ": item " + j.at("item").dump() + " must be >= 0");
    } else if (key == "param") {
      a.kind = Kind::kParam, a.text = name(v, "param", where);
    } else if (key == "const") {
      a.kind = Kind::kConst, a.text = name(v, "const", where);
      if (!graph_.constants().is_object() || !graph_.constants().contains(a.text))
        throw GraphError(where + ": constant '" + a.text + "' is not in the graph's constants");
    } else if (batch) {
      if (!j.contains("batch") || !j.contains("plus"))
        throw GraphError(where + ": {\"batch\": a, \"plus\": c} needs both, got " + j.dump());
      a.kind = Kind::kBatch, a.integer = integer<std::int64_t>(j.at("batch"), "batch", where);
      a.plus = integer<std::int64_t>(j.at("plus"), "plus", where);
    } else if (key == "device") {
      a.kind = Kind::kDevice;
    } else {
      throw GraphError(where + ": cannot read argument " + j.dump());
    }
    return a;
  }

  static std::string name(const json& v, const char* what, const std::string& where) {
    if (!v.is_string() || v.get<std::string>().empty())
      throw GraphError(where + ": " + what + " must name one, got " + v.dump());
    return v.get<std::string>();
  }

  const OpGraph& graph_;
  const Op& op_;
  int made_ = 0;  // calls read so far: a call refers only to earlier ones
};

}  // namespace

const std::vector<std::string>& aten_dtype_names() {
  static const std::vector<std::string> names{"float32", "float64", "float16", "bfloat16", "int64",
                                              "int32",   "int16",   "int8",    "uint8",    "bool"};
  return names;
}

AtenProgram parse_aten_program(const OpGraph& graph, const Op& op) { return Reader(graph, op).program(); }

}  // namespace trident::graph
