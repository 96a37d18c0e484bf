// See Note [ATen programs] in aten_op.h.
#include "aten_op.h"

#include <ATen/core/dispatch/Dispatcher.h>
#include <torch/version.h>

#include <cmath>
#include <cstring>
#include <limits>
#include <stdexcept>

#include "trident/base/json.h"
#include "trident/base/text.h"
#include "trident/nn/random.h"

namespace trident::nn {

using graph::GraphError;
using nlohmann::json;

namespace {

constexpr const char* kCaptureFormat = "aten/1";

std::string build_version() {
  return std::to_string(TORCH_VERSION_MAJOR) + "." + std::to_string(TORCH_VERSION_MINOR) + "." +
         std::to_string(TORCH_VERSION_PATCH);
}

std::string captured_by(const graph::OpGraph& g) { return g.capture().value("torch", std::string("an unknown PyTorch")); }

c10::optional<c10::OperatorHandle> find_op(const std::string& name, const std::string& overload) {
  return c10::Dispatcher::singleton().findSchema({name, overload});
}

// One argument, prepared once; see Note [ATen programs].
struct Arg {
  enum Kind { kValue, kInput, kCall, kBatch, kDevice, kList, kConstant } kind = kValue;
  c10::IValue value;
  int index = 0, item = -1;
  std::int64_t a = 0, c = 0;
  std::vector<Arg> items;
  c10::TypeKind element = c10::TypeKind::AnyType;  // kList: how to build the list
};

struct Call {
  c10::OperatorHandle op;
  std::vector<Arg> args;  // in schema order, defaults filled in
  size_t returns = 1;
  int generator = -1;     // a random call: the index of its Generator? argument (Note [Random ops])
};

c10::ScalarType scalar_type_of(const std::string& name, const std::string& where) {
  static const std::map<std::string, c10::ScalarType> kTypes = {
      {"float32", c10::kFloat}, {"float64", c10::kDouble}, {"float16", c10::kHalf}, {"bfloat16", c10::kBFloat16},
      {"int64", c10::kLong},    {"int32", c10::kInt},      {"int16", c10::kShort}, {"int8", c10::kChar},
      {"uint8", c10::kByte},    {"bool", c10::kBool}};
  auto it = kTypes.find(name);
  if (it == kTypes.end()) throw GraphError(where + ": dtype '" + name + "' is not one trident reads");
  return it->second;
}

c10::TypePtr unwrap_optional(c10::TypePtr t) {
  if (auto o = t->cast<c10::OptionalType>()) return o->getElementType();
  return t;
}

bool takes_float(const c10::TypePtr& t) { return unwrap_optional(t)->kind() == c10::TypeKind::FloatType; }

class Builder {
 public:
  Builder(const graph::Op& op, const std::function<torch::Tensor(const std::string&)>& param,
          const std::map<std::string, torch::Tensor>& constants)
      : op_(op), param_(param), constants_(constants) {}

  Arg arg(const json& j, const c10::TypePtr& type, const std::string& where) {
    Arg out;
    if (j.is_null()) return out;
    if (j.is_number() && unwrap_optional(type)->kind() == c10::TypeKind::TensorType) {
      // A Python number where the schema takes a tensor (`x + 1.0` calls add.Tensor): Python wraps it
      // into a 0-dim "wrapped number", which takes part in type promotion as a scalar does.
      auto t = j.is_number_integer() ? at::scalar_tensor(j.get<std::int64_t>(), at::kLong)
                                     : at::scalar_tensor(j.get<double>(), at::kDouble);
      t.unsafeGetTensorImpl()->set_wrapped_number(true);
      return value(t);
    }
    if (j.is_boolean()) return value(c10::IValue(j.get<bool>()));
    if (j.is_number_integer()) {
      const auto v = j.get<std::int64_t>();
      return takes_float(type) ? value(c10::IValue(static_cast<double>(v))) : value(c10::IValue(v));
    }
    if (j.is_number_float()) return value(c10::IValue(j.get<double>()));
    if (j.is_string()) return value(c10::IValue(j.get<std::string>()));
    if (j.is_array()) return list(j, type, where);
    if (!j.is_object()) throw GraphError(where + ": cannot read argument " + j.dump());
    if (j.contains("in")) return ref(Arg::kInput, get_checked<int>(j.at("in")));
    if (j.contains("call")) {
      auto r = ref(Arg::kCall, get_checked<int>(j.at("call")));
      r.item = j.value("item", -1);
      if (r.index < 0 || r.index >= calls_made_) throw GraphError(where + ": refers to call " + j.at("call").dump() + " before it is made");
      return r;
    }
    if (j.contains("batch")) {
      Arg r;
      r.kind = Arg::kBatch;
      r.a = get_checked<std::int64_t>(j.at("batch"));
      r.c = get_checked<std::int64_t>(j.at("plus"));
      return r;
    }
    if (j.contains("param")) return value(param_(get_checked<std::string>(j.at("param"))));
    if (j.contains("const")) {
      const auto name = get_checked<std::string>(j.at("const"));
      auto it = constants_.find(name);
      if (it == constants_.end()) throw GraphError(where + ": constant '" + name + "' is not in the graph's constants");
      auto r = value(it->second);
      r.kind = Arg::kConstant;
      return r;
    }
    if (j.contains("device")) return ref(Arg::kDevice, 0);
    if (j.contains("dtype"))
      return value(c10::IValue(static_cast<std::int64_t>(scalar_type_of(get_checked<std::string>(j.at("dtype")), where))));
    if (j.contains("layout")) {
      const auto l = get_checked<std::string>(j.at("layout"));
      if (l != "strided") throw GraphError(where + ": layout '" + l + "' is not supported; trident runs strided tensors");
      return value(c10::IValue(static_cast<std::int64_t>(c10::kStrided)));
    }
    if (j.contains("memory_format")) return value(c10::IValue(static_cast<std::int64_t>(memory_format(j, where))));
    if (j.contains("float")) {
      const auto f = get_checked<std::string>(j.at("float"));
      const double inf = std::numeric_limits<double>::infinity();
      return value(c10::IValue(f == "inf" ? inf : f == "-inf" ? -inf : std::numeric_limits<double>::quiet_NaN()));
    }
    throw GraphError(where + ": cannot read argument " + j.dump());
  }

  void made_call() { ++calls_made_; }

 private:
  static Arg value(c10::IValue v) {
    Arg out;
    out.value = std::move(v);
    return out;
  }
  static Arg ref(Arg::Kind kind, int index) {
    Arg out;
    out.kind = kind;
    out.index = index;
    return out;
  }
  static c10::MemoryFormat memory_format(const json& j, const std::string& where) {
    const auto m = get_checked<std::string>(j.at("memory_format"));
    if (m == "contiguous_format") return c10::MemoryFormat::Contiguous;
    if (m == "preserve_format") return c10::MemoryFormat::Preserve;
    if (m == "channels_last") return c10::MemoryFormat::ChannelsLast;
    throw GraphError(where + ": memory_format '" + m + "' is not supported");
  }

  Arg list(const json& j, const c10::TypePtr& type, const std::string& where) {
    auto t = unwrap_optional(type);
    auto lt = t->cast<c10::ListType>();
    if (!lt) throw GraphError(where + ": a list where the schema takes " + t->str());
    Arg out;
    out.kind = Arg::kList;
    out.element = lt->getElementType()->kind();
    for (const auto& e : j) out.items.push_back(arg(e, lt->getElementType(), where));
    return out;
  }

  const graph::Op& op_;
  const std::function<torch::Tensor(const std::string&)>& param_;
  const std::map<std::string, torch::Tensor>& constants_;
  int calls_made_ = 0;
};

// The program of one op, run per micro-batch.
class Program {
 public:
  Program(const graph::Op& op, const std::function<torch::Tensor(const std::string&)>& param,
          const std::map<std::string, torch::Tensor>& constants)
      : name_(op.name) {
    Builder b(op, param, constants);
    const auto& calls = op.attrs.value("calls", json::array());
    for (size_t i = 0; i < calls.size(); ++i) {
      const auto& jc = calls[i];
      const std::string where = "op '" + op.name + "' call " + std::to_string(i);
      const auto name = get_checked<std::string>(jc.at("op"));
      const auto overload = jc.value("overload", std::string());
      auto handle = find_op(name, overload);
      if (!handle) throw GraphError(where + ": operator " + name + (overload.empty() ? "" : "." + overload) + " is unknown");
      Call call{*handle, {}, handle->schema().returns().size()};
      const auto& schema = handle->schema();
      const auto& args = jc.value("args", json::array());
      const auto& kwargs = jc.value("kwargs", json::object());
      if (args.size() > schema.arguments().size())
        throw GraphError(where + ": " + std::to_string(args.size()) + " arguments for " + toString(schema));
      for (size_t k = 0; k < schema.arguments().size(); ++k) {
        const auto& s = schema.arguments()[k];
        const std::string at = where + " argument '" + s.name() + "'";
        if (k < args.size()) call.args.push_back(b.arg(args[k], s.type(), at));
        else if (kwargs.contains(s.name())) call.args.push_back(b.arg(kwargs.at(s.name()), s.type(), at));
        else if (s.default_value()) {
          Arg d;
          d.value = *s.default_value();
          call.args.push_back(std::move(d));
        } else {
          throw GraphError(at + " is missing (schema " + toString(schema) + ")");
        }
      }
      if (jc.value("random", false)) {
        for (size_t k = 0; k < schema.arguments().size(); ++k)
          if (unwrap_optional(schema.arguments()[k].type())->kind() == c10::TypeKind::GeneratorType) call.generator = static_cast<int>(k);
      }
      calls_.push_back(std::move(call));
      b.made_call();
    }
    if (calls_.empty()) throw GraphError("op '" + op.name + "' (aten) has no calls");
    result_ = b.arg(op.attrs.value("result", json()), c10::TensorType::get(), "op '" + op.name + "' result");
    if (result_.kind != Arg::kCall && result_.kind != Arg::kInput)
      throw GraphError("op '" + op.name + "' (aten): 'result' must name a call or an input");
  }

  torch::Tensor operator()(const std::vector<torch::Tensor>& inputs) const {
    std::vector<torch::jit::Stack> results(calls_.size());
    const Env env{inputs, results, inputs.empty() ? 0 : inputs[0].size(0),
                  inputs.empty() ? c10::Device(c10::kCPU) : inputs[0].device()};
    for (size_t i = 0; i < calls_.size(); ++i) {
      auto& stack = results[i];
      stack.reserve(calls_[i].args.size());
      for (const auto& a : calls_[i].args) stack.push_back(materialise(a, env));
      if (calls_[i].generator >= 0) {
        if (auto seed = random_seed_for(name_, static_cast<int>(i))) {
          stack[calls_[i].generator] = seeded_generator(env.device, *seed);
        }
      }
      calls_[i].op.callBoxed(&stack);
    }
    return materialise(result_, env).toTensor();
  }

 private:
  struct Env {
    const std::vector<torch::Tensor>& inputs;
    const std::vector<torch::jit::Stack>& results;
    std::int64_t batch;
    c10::Device device;
  };

  c10::IValue materialise(const Arg& a, const Env& env) const {
    switch (a.kind) {
      case Arg::kValue: return a.value;
      case Arg::kConstant: {  // decoded on the CPU; a GPU run copies it each call (small index tables)
        const auto& t = a.value.toTensor();
        return t.device() == env.device ? a.value : c10::IValue(t.to(env.device));
      }
      case Arg::kInput: return env.inputs.at(a.index);
      case Arg::kBatch: return c10::IValue(a.a * env.batch + a.c);
      case Arg::kDevice: return c10::IValue(env.device);
      case Arg::kCall: {
        const auto& out = env.results.at(a.index);
        if (a.item < 0) return out.at(0);
        if (calls_[a.index].returns > 1) return out.at(a.item);
        return out.at(0).toListRef().at(a.item);
      }
      case Arg::kList: return list(a, env);
    }
    return {};
  }

  c10::IValue list(const Arg& a, const Env& env) const {
    switch (a.element) {
      case c10::TypeKind::TensorType: {
        c10::List<at::Tensor> l;
        for (const auto& e : a.items) l.push_back(materialise(e, env).toTensor());
        return l;
      }
      case c10::TypeKind::OptionalType: {
        c10::List<c10::optional<at::Tensor>> l;
        for (const auto& e : a.items) {
          auto v = materialise(e, env);
          l.push_back(v.isNone() ? c10::optional<at::Tensor>() : c10::optional<at::Tensor>(v.toTensor()));
        }
        return l;
      }
      case c10::TypeKind::FloatType: {
        std::vector<double> l;
        for (const auto& e : a.items) l.push_back(materialise(e, env).toScalar().toDouble());
        return l;
      }
      case c10::TypeKind::BoolType: {
        c10::List<bool> l;
        for (const auto& e : a.items) l.push_back(materialise(e, env).toBool());
        return l;
      }
      default: {  // int[] and SymInt[]
        std::vector<std::int64_t> l;
        for (const auto& e : a.items) l.push_back(materialise(e, env).toInt());
        return l;
      }
    }
  }

  std::string name_;
  std::vector<Call> calls_;
  Arg result_;
};

}  // namespace

at::Generator seeded_generator(c10::Device device, std::uint64_t seed) {
  if (device.is_cpu()) return at::detail::createCPUGenerator(seed);
  auto gen = at::globalContext().defaultGenerator(device).clone();
  gen.set_current_seed(seed);
  return gen;
}

std::map<std::string, torch::Tensor> decode_constants(const graph::OpGraph& graph) {
  std::map<std::string, torch::Tensor> out;
  if (!graph.constants().is_object()) return out;
  for (const auto& [name, j] : graph.constants().items()) {
    const std::string where = "graph constant '" + name + "'";
    if (!j.is_object() || !j.contains("dtype") || !j.contains("shape") || !j.contains("base64"))
      throw GraphError(where + " must be {\"dtype\", \"shape\", \"base64\"}");
    const auto type = scalar_type_of(get_checked<std::string>(j.at("dtype")), where);
    const auto shape = get_checked<std::vector<std::int64_t>>(j.at("shape"));
    std::string bytes;
    try {
      bytes = base64_decode(get_checked<std::string>(j.at("base64")));
    } catch (const std::invalid_argument& e) {
      throw GraphError(where + ": " + e.what());
    }
    auto t = torch::empty(shape, torch::TensorOptions().dtype(type));
    if (static_cast<std::int64_t>(bytes.size()) != t.numel() * static_cast<std::int64_t>(t.element_size()))
      throw GraphError(where + " holds " + std::to_string(bytes.size()) + " bytes; its shape and dtype need " +
                       std::to_string(t.numel() * t.element_size()));
    std::memcpy(t.data_ptr(), bytes.data(), bytes.size());
    out.emplace(name, t);
  }
  return out;
}

void check_aten_ops(const graph::OpGraph& graph) {
  bool any = false;
  for (const auto& op : graph.ops()) any = any || op.kind == "aten";
  if (!any) return;
  const auto format = graph.capture().value("format", std::string());
  if (format != kCaptureFormat)
    throw GraphError("model graph '" + graph.name() + "': capture format '" + format + "' (by " + captured_by(graph) +
                     ") is not one this trident reads (" + kCaptureFormat +
                     "); export the model again with this trident's tools/export");
  for (const auto& op : graph.ops()) {
    if (op.kind != "aten") continue;
    for (const auto& c : op.attrs.value("calls", json::array())) {
      const auto name = c.value("op", std::string());
      const auto overload = c.value("overload", std::string());
      if (find_op(name, overload)) continue;
      throw GraphError("op '" + op.name + "' calls ATen operator " + name + (overload.empty() ? "" : "." + overload) +
                       ", which this build's LibTorch " + build_version() + " does not have (the graph was captured with "
                       "PyTorch " + captured_by(graph) + "); export it again with PyTorch " + build_version() +
                       " (Debian's python3-torch), or build trident against a LibTorch at least as new as the capture's");
    }
  }
}

OpFn aten_function(const graph::Op& op, const std::function<torch::Tensor(const std::string&)>& param,
                   const std::map<std::string, torch::Tensor>& constants) {
  try {
    auto program = std::make_shared<Program>(op, param, constants);
    return [program](const std::vector<torch::Tensor>& in) { return (*program)(in); };
  } catch (const json::exception& e) {
    throw GraphError("op '" + op.name + "' (aten): " + e.what());
  }
}

}  // namespace trident::nn
