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
//          attention layers' projections and products, GCNII's
//          identity_map; in captured ATen
//          programs linear, matmul, mm, bmm, addmm, baddbmm, addbmm,
//          conv1d/2d/3d, convolution, _convolution, conv_transpose*.
//   fp32   norms, softmax, losses and reductions compute in fp32 — their
//          floating inputs are cast up: layer_norm, batch_norm, softmax
//          (also inside attention), cross_entropy, masked_cross_entropy,
//          mse, mean, sum, the average pools, and graph_aggregate (a sparse
//          product: LibTorch 1.13 has no bf16 kernel for it); ATen's native/plain layer, batch and group norms,
//          (log_)softmax, the losses, mean and sum.
//   follow everything else (activations, element-wise arithmetic, shapes,
//          max pooling, embeddings) computes in the dtype that arrives; when
//          its floating inputs differ, in the widest (fp32).
// Weights, gradients and optimizer state stay fp32: a cast's backward
// returns the gradient in the weight's dtype. A tensor that crosses a stage
// boundary travels in the dtype the policy computes it in (computed_dtypes),
// its gradient likewise: a bf16 activation moves half an fp32's bytes. An
// ATen op's output is taken as declared (its calls are cast inside it; a
// bf16 result is cast up exactly before it is sent).
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "trident/graph/op_graph.h"

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

// The dtype of each op's output (by op id) when the interpreter runs the
// graph under `precision`: the declared one under fp32, for inputs, for
// integer outputs and for aten ops; bf16 for kLow; fp32 for kFp32; for
// kFollow the dtype its floating inputs share (fp32 when they differ; the
// declared one when it reads none, as an embedding reads indices).
std::vector<DType> computed_dtypes(const OpGraph& graph, Precision precision);

// What an op keeps from forward for backward under the policy (the memory
// model's): per row, its activations in the dtype it computes in
// (`computed`, from computed_dtypes); per micro-batch, under bf16, the bf16
// copy of a product's weights (a cast per use, saved for backward).
double kept_bytes_per_row(const Op& op, DType computed);
double weight_copy_bytes(const Op& op, Precision precision);

}  // namespace trident::graph
