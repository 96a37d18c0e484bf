// Runs parsed ATen programs (see Note [ATen programs] in graph/aten_program.h).
#include "aten_op.h"
#include "precision_casts.h"

#include <ATen/core/dispatch/Dispatcher.h>
#include <torch/version.h>

#include <cmath>
#include <cstring>
#include <limits>
#include <stdexcept>

#include "trident/base/json.h"
#include "trident/base/text.h"
#include "trident/graph/constants.h"
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
  int generator = -1;     // a random call: the index of its Generator? argument (see Note [Random ops])
  // aten::bernoulli draws a mask whose gradient is zero, but LibTorch 2.x
  // implements no derivative for bernoulli.p: where its input carries a
  // gradient (a tensor a pipeline stage received) its backward would fail,
  // so it is called on detached inputs.
  bool detach = false;
  graph::OpPrecision precision = graph::OpPrecision::kFollow;  // its class under bf16 (Note [Precision policy])
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

// Turns a parsed program's arguments (graph/aten_program.h) into values by
// each operator's schema, once per op.
class Builder {
 public:
  Builder(const std::function<torch::Tensor(const std::string&)>& param,
          const std::map<std::string, torch::Tensor>& constants)
      : param_(param), constants_(constants) {}

  Arg arg(const graph::AtenArg& a, const c10::TypePtr& type, const std::string& where) const {
    using Kind = graph::AtenArg::Kind;
    const bool takes_tensor = unwrap_optional(type)->kind() == c10::TypeKind::TensorType;
    switch (a.kind) {
      case Kind::kNone: return {};
      case Kind::kBool: return value(c10::IValue(a.boolean));
      case Kind::kInt:
      case Kind::kFloat: {
        if (takes_tensor) {
          // A Python number where the schema takes a tensor (`x + 1.0` calls add.Tensor): Python wraps it
          // into a 0-dim "wrapped number", which takes part in type promotion as a scalar does.
          auto t = a.kind == Kind::kInt ? at::scalar_tensor(a.integer, at::kLong) : at::scalar_tensor(a.real, at::kDouble);
          t.unsafeGetTensorImpl()->set_wrapped_number(true);
          return value(t);
        }
        if (a.kind == Kind::kFloat) return value(c10::IValue(a.real));
        return takes_float(type) ? value(c10::IValue(static_cast<double>(a.integer))) : value(c10::IValue(a.integer));
      }
      case Kind::kString: return value(c10::IValue(a.text));
      case Kind::kList: return list(a, type, where);
      case Kind::kDtype: return value(c10::IValue(static_cast<std::int64_t>(scalar_type_of(a.text, where))));
      case Kind::kLayout: return value(c10::IValue(static_cast<std::int64_t>(c10::kStrided)));
      case Kind::kMemoryFormat: return value(c10::IValue(static_cast<std::int64_t>(memory_format(a.text))));
      case Kind::kInput: return ref(Arg::kInput, a.index);
      case Kind::kCall: {
        auto r = ref(Arg::kCall, a.index);
        r.item = a.item;
        return r;
      }
      case Kind::kBatch: {
        Arg r;
        r.kind = Arg::kBatch;
        r.a = a.integer;
        r.c = a.plus;
        return r;
      }
      case Kind::kParam: return value(param_(a.text));
      case Kind::kConst: {
        auto r = value(constants_.at(a.text));  // present: checked by parse_aten_program
        r.kind = Arg::kConstant;
        return r;
      }
      case Kind::kDevice: return ref(Arg::kDevice, 0);
    }
    throw GraphError(where + ": cannot read argument");
  }

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
  static c10::MemoryFormat memory_format(const std::string& m) {
    if (m == "preserve_format") return c10::MemoryFormat::Preserve;
    if (m == "channels_last") return c10::MemoryFormat::ChannelsLast;
    return c10::MemoryFormat::Contiguous;  // contiguous_format: the only other name parse_aten_program lets through
  }

  // The list kinds Program::list builds; anything else is refused here, at load time.
  static bool builds_list_of(const c10::TypePtr& element) {
    switch (element->kind()) {
      case c10::TypeKind::TensorType:
      case c10::TypeKind::FloatType:
      case c10::TypeKind::BoolType:
      case c10::TypeKind::IntType:
      case c10::TypeKind::SymIntType:
        return true;
      case c10::TypeKind::OptionalType:
        return unwrap_optional(element)->kind() == c10::TypeKind::TensorType;
      default:
        return false;
    }
  }

  Arg list(const graph::AtenArg& a, const c10::TypePtr& type, const std::string& where) const {
    auto t = unwrap_optional(type);
    auto lt = t->cast<c10::ListType>();
    if (!lt) throw GraphError(where + ": a list where the schema takes " + t->str());
    if (!builds_list_of(lt->getElementType()))
      throw GraphError(where + ": a list of " + lt->getElementType()->str() + " is not one trident builds");
    Arg out;
    out.kind = Arg::kList;
    out.element = lt->getElementType()->kind();
    for (const auto& e : a.items) out.items.push_back(arg(e, lt->getElementType(), where));
    return out;
  }

  const std::function<torch::Tensor(const std::string&)>& param_;
  const std::map<std::string, torch::Tensor>& constants_;
};

// The program of one op, run per micro-batch.
class Program {
 public:
  Program(const graph::Op& op, const graph::AtenProgram& program,
          const std::function<torch::Tensor(const std::string&)>& param,
          const std::map<std::string, torch::Tensor>& constants, const graph::Precision* precision)
      : name_(op.name), precision_(precision) {
    const Builder b(param, constants);
    for (size_t i = 0; i < program.calls.size(); ++i) {
      const auto& c = program.calls[i];
      const std::string where = "op '" + op.name + "' call " + std::to_string(i);
      auto handle = find_op(c.op, c.overload);
      if (!handle) throw GraphError(where + ": operator " + c.op + (c.overload.empty() ? "" : "." + c.overload) + " is unknown");
      Call call{*handle, {}, handle->schema().returns().size()};
      call.precision = graph::aten_call_precision(handle->schema().name());
      const auto& schema = handle->schema();
      if (c.args.size() > schema.arguments().size())
        throw GraphError(where + ": " + std::to_string(c.args.size()) + " arguments for " + toString(schema));
      for (size_t k = 0; k < schema.arguments().size(); ++k) {
        const auto& s = schema.arguments()[k];
        const std::string at = where + " argument '" + s.name() + "'";
        const auto kw = c.kwargs.find(s.name());
        if (k < c.args.size()) call.args.push_back(b.arg(c.args[k], s.type(), at));
        else if (kw != c.kwargs.end()) call.args.push_back(b.arg(kw->second, s.type(), at));
        else if (s.default_value()) {
          Arg d;
          d.value = *s.default_value();
          call.args.push_back(std::move(d));
        } else {
          throw GraphError(at + " is missing (schema " + toString(schema) + ")");
        }
      }
      call.detach = schema.name() == "aten::bernoulli";
      if (c.random) {  // See Note [Random ops]: seeded through its generator, never unseeded
        for (size_t k = 0; k < schema.arguments().size(); ++k)
          if (unwrap_optional(schema.arguments()[k].type())->kind() == c10::TypeKind::GeneratorType) call.generator = static_cast<int>(k);
        if (call.generator < 0)
          throw GraphError(where + ": marked random, but " + toString(schema) +
                           " takes no generator, so it would run unseeded");
      }
      calls_.push_back(std::move(call));
    }
    result_ = b.arg(program.result, c10::TensorType::get(), "op '" + op.name + "' result");
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
      if (precision_ && *precision_ == graph::Precision::kBf16) cast_stack(stack, calls_[i].precision);
      if (calls_[i].detach)
        for (auto& v : stack)
          if (v.isTensor()) v = v.toTensor().detach();
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
  const graph::Precision* precision_ = nullptr;  // the module's (it outlives the program)
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
    const auto c = graph::decode_constant(name, j);
    auto t = torch::empty(c.shape, torch::TensorOptions().dtype(scalar_type_of(c.dtype, "graph constant '" + name + "'")));
    std::memcpy(t.data_ptr(), c.bytes.data(), c.bytes.size());
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
    for (const auto& c : graph::parse_aten_program(graph, op).calls) {
      const auto& name = c.op;
      const auto& overload = c.overload;
      if (find_op(name, overload)) continue;
      throw GraphError("op '" + op.name + "' calls ATen operator " + name + (overload.empty() ? "" : "." + overload) +
                       ", which this build's LibTorch " + build_version() + " does not have (the graph was captured with "
                       "PyTorch " + captured_by(graph) + "); export it again with PyTorch " + build_version() +
                       " (Debian's python3-torch), or build trident against a LibTorch at least as new as the capture's");
    }
  }
}

OpFn aten_function(const graph::OpGraph& graph, const graph::Op& op,
                   const std::function<torch::Tensor(const std::string&)>& param,
                   const std::map<std::string, torch::Tensor>& constants, const graph::Precision* precision) {
  auto program = std::make_shared<Program>(op, graph::parse_aten_program(graph, op), param, constants, precision);
  return [program](const std::vector<torch::Tensor>& in) { return (*program)(in); };
}

}  // namespace trident::nn
