// The precision policy: in which dtype each op computes when a run trains
// in bf16 (train.precision). Torch-free, so the config, the planner and the
// executors read one table.
//
// Note [Precision policy]
// ~~~~~~~~~~~~~~~~~~~~~~~
// (docs/design.md, contract "One precision policy") Under bf16:
//   low    matrix products and convolutions compute in bf16 — their
//          floating inputs, weights included, are cast to bf16 at each use
//          (never a cached copy, so never stale after an optimizer update)
//          and their output is bf16: linear, conv1d, conv2d, matmul, the
//          attention layers' projections and products; in captured ATen
//          programs linear, matmul, mm, bmm, addmm, baddbmm, addbmm,
//          conv1d/2d/3d, convolution, _convolution, conv_transpose*.
//   fp32   norms, softmax, losses and reductions compute in fp32 — their
//          floating inputs are cast up: layer_norm, batch_norm, softmax
//          (also inside attention), cross_entropy, mse, mean, sum, the
//          average pools; ATen's native/plain layer, batch and group norms,
//          (log_)softmax, the losses, mean and sum.
//   follow everything else (activations, element-wise arithmetic, shapes,
//          max pooling, embeddings) computes in the dtype that arrives; when
//          its floating inputs differ, in the widest (fp32).
// Weights, gradients and optimizer state stay fp32: a cast's backward
// returns the gradient in the weight's dtype. A tensor that crosses a stage
// boundary travels in its edge's declared dtype (fp32 for now: the cast is
// exact for bf16 values; bf16 on the wire is future work of issue 41).
#pragma once

#include <optional>
#include <string>

namespace trident::graph {

enum class Precision { kFp32, kBf16 };

// "fp32" | "bf16"; nullopt for anything else.
std::optional<Precision> precision_from_string(const std::string& text);
std::string to_string(Precision precision);

enum class OpPrecision { kLow, kFp32, kFollow };

// The class of an op of trident's own kinds ("linear", "softmax", ...);
// "aten" ops are kFollow as a whole: each call of their program has its
// own class (aten_call_precision).
OpPrecision op_precision(const std::string& kind);
// The class of one call of a captured program, by its operator name
// ("aten::linear", "aten::native_layer_norm", ...).
OpPrecision aten_call_precision(const std::string& name);

}  // namespace trident::graph
