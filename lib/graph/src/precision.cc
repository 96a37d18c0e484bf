#include "trident/graph/precision.h"

#include <set>

#include "trident/base/enum_names.h"

namespace trident::graph {
namespace {

const EnumNames<Precision>& precision_names() {  // a function: other files' static tables may call it
  static const EnumNames<Precision> names{{Precision::kFp32, "fp32"}, {Precision::kBf16, "bf16"}};
  return names;
}

}  // namespace

std::optional<Precision> precision_from_string(const std::string& text) { return precision_names().parse(text); }

std::string to_string(Precision precision) { return precision_names().name(precision); }

// See Note [Precision policy].
OpPrecision op_precision(const std::string& kind) {
  static const std::set<std::string> low = {"linear", "conv1d", "conv2d", "matmul", "self_attention",
                                            "multihead_attention", "identity_map", "unembed"};
  static const std::set<std::string> fp32 = {"layer_norm",  "batch_norm", "softmax",
                                             "cross_entropy", "mse",      "mean",
                                             "sum",         "mean_seq",   "global_avg_pool",
                                             "avg_pool2d",  "adaptive_avg_pool2d", "graph_aggregate",
                                             "masked_cross_entropy", "block_aggregate", "graph_attention",
                                             "block_attention"};
  if (low.count(kind)) return OpPrecision::kLow;
  if (fp32.count(kind)) return OpPrecision::kFp32;
  return OpPrecision::kFollow;
}

OpPrecision aten_call_precision(const std::string& name) {
  static const std::set<std::string> low = {
      "aten::linear",  "aten::matmul",  "aten::mm",          "aten::bmm",          "aten::addmm",
      "aten::baddbmm", "aten::addbmm",  "aten::conv1d",      "aten::conv2d",       "aten::conv3d",
      "aten::convolution", "aten::_convolution", "aten::conv_transpose1d", "aten::conv_transpose2d",
      "aten::conv_transpose3d"};
  static const std::set<std::string> fp32 = {
      "aten::layer_norm",   "aten::native_layer_norm", "aten::batch_norm",  "aten::native_batch_norm",
      "aten::_native_batch_norm_legit", "aten::group_norm", "aten::native_group_norm",
      "aten::softmax",      "aten::_softmax",          "aten::log_softmax", "aten::_log_softmax",
      "aten::cross_entropy_loss", "aten::nll_loss",    "aten::nll_loss_nd", "aten::mse_loss",
      "aten::mean",         "aten::sum",               "aten::avg_pool2d",  "aten::adaptive_avg_pool2d"};
  if (low.count(name)) return OpPrecision::kLow;
  if (fp32.count(name)) return OpPrecision::kFp32;
  return OpPrecision::kFollow;
}

std::vector<DType> computed_dtypes(const OpGraph& graph, Precision precision) {
  std::vector<DType> out;
  for (const auto& op : graph.ops()) {
    DType d = op.output.dtype;
    const bool floating = d == DType::kFloat32;
    if (precision == Precision::kBf16 && floating && !op.is_input() && op.kind != "aten") {
      const auto cls = op_precision(op.kind);
      if (cls == OpPrecision::kLow) {
        d = DType::kBFloat16;
      } else if (cls == OpPrecision::kFollow) {
        std::optional<DType> shared;
        bool differ = false;
        for (const auto& in : op.inputs) {
          const DType t = out[static_cast<std::size_t>(in.producer)];
          if (t != DType::kFloat32 && t != DType::kBFloat16) continue;
          if (shared && *shared != t) differ = true;
          shared = t;
        }
        if (shared) d = differ ? DType::kFloat32 : *shared;
      }
    }
    out.push_back(d);
  }
  return out;
}

double kept_bytes_per_row(const Op& op, DType computed) {
  const double kept = static_cast<double>(op.activation_bytes);
  if (op.output.dtype != DType::kFloat32) return kept;
  return kept * static_cast<double>(element_bytes(computed)) / static_cast<double>(element_bytes(DType::kFloat32));
}

double weight_copy_bytes(const Op& op, Precision precision) {
  if (precision == Precision::kFp32 || op_precision(op.kind) != OpPrecision::kLow) return 0;
  return static_cast<double>(op.param_bytes()) / 2;
}

}  // namespace trident::graph
