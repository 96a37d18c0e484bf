// Hand-written nested torch modules of the zoo's tiny models, written the way
// a PyTorch user would write them (torch::nn building blocks, explicit
// forward). GraphModule + GraphExecutor must match them exactly. Parameter
// names mirror the zoo's op names; torch's MultiheadAttention names its
// packed projection `in_proj_weight`/`in_proj_bias` (see graph_name()).
#pragma once

#include <torch/torch.h>

namespace trident::nn::reference {

using torch::Tensor;
using Batch = std::map<std::string, Tensor>;

inline std::string graph_name(std::string n) {
  for (const char* from : {"in_proj_weight", "in_proj_bias"}) {
    auto pos = n.find(from);
    if (pos != std::string::npos) n.replace(pos + 7, 1, ".");
  }
  return n;
}

inline Tensor ce_sum(const Tensor& logits, const Tensor& label) {
  return torch::nn::functional::cross_entropy(logits, label,
                                               torch::nn::functional::CrossEntropyFuncOptions().reduction(torch::kSum));
}

struct Model : torch::nn::Module {
  virtual Tensor loss(const Batch& b) = 0;
};

// Linear+ReLU layers fc0..fc{n-1}, optionally followed by a plain `out` layer.
struct FF : torch::nn::Module {
  std::vector<torch::nn::Linear> fc;
  torch::nn::Linear out{nullptr};
  FF(int64_t in, int layers, int64_t hidden, int64_t out_features = 0) {
    for (int l = 0; l < layers; ++l) {
      fc.push_back(register_module("fc" + std::to_string(l), torch::nn::Linear(l ? hidden : in, hidden)));
    }
    if (out_features) out = register_module("out", torch::nn::Linear(hidden, out_features));
  }
  Tensor forward(Tensor x) {
    for (auto& l : fc) x = torch::relu(l(x));
    return out ? out(x) : x;
  }
};

struct Mlp : Model {
  torch::nn::Linear fc0{nullptr}, fc1{nullptr}, head{nullptr};
  Mlp() {
    fc0 = register_module("fc0", torch::nn::Linear(784, 256));
    fc1 = register_module("fc1", torch::nn::Linear(256, 256));
    head = register_module("head", torch::nn::Linear(256, 10));
  }
  Tensor loss(const Batch& b) override {
    auto x = b.at("image").flatten(1);
    return ce_sum(head(torch::relu(fc1(torch::relu(fc0(x))))), b.at("label"));
  }
};

struct Cnn : Model {
  torch::nn::Conv2d conv1{nullptr}, conv2{nullptr};
  torch::nn::Linear fc1{nullptr}, head{nullptr};
  Cnn() {
    conv1 = register_module("conv1", torch::nn::Conv2d(torch::nn::Conv2dOptions(1, 32, 5).padding(2)));
    conv2 = register_module("conv2", torch::nn::Conv2d(torch::nn::Conv2dOptions(32, 64, 5).padding(2)));
    fc1 = register_module("fc1", torch::nn::Linear(64 * 7 * 7, 128));
    head = register_module("head", torch::nn::Linear(128, 10));
  }
  Tensor loss(const Batch& b) override {
    auto x = torch::max_pool2d(torch::relu(conv1(b.at("image"))), 2, 2);
    x = torch::max_pool2d(torch::relu(conv2(x)), 2, 2);
    return ce_sum(head(torch::relu(fc1(x.flatten(1)))), b.at("label"));
  }
};

inline torch::nn::Conv2d conv(int64_t in, int64_t out, int64_t k) {
  return torch::nn::Conv2d(torch::nn::Conv2dOptions(in, out, k).padding(k / 2));
}

struct Head : torch::nn::Module {
  torch::nn::Linear fc{nullptr}, out{nullptr};
  Head(int64_t in, int64_t hidden, int64_t classes) {
    fc = register_module("fc", torch::nn::Linear(in, hidden));
    out = register_module("out", torch::nn::Linear(hidden, classes));
  }
  Tensor forward(const Tensor& x) { return out(torch::relu(fc(x))); }
};

struct Branch : torch::nn::Module {};

struct InceptionBlock : torch::nn::Module {
  torch::nn::Conv2d b1{nullptr}, b2r{nullptr}, b2{nullptr}, b3r{nullptr}, b3{nullptr}, b4{nullptr};
  InceptionBlock(int64_t in, int64_t w) {
    auto m1 = register_module("b1", std::make_shared<Branch>());
    b1 = m1->register_module("conv", conv(in, w, 1));
    auto m2 = register_module("b2", std::make_shared<Branch>());
    b2r = m2->register_module("reduce", conv(in, w / 2, 1));
    b2 = m2->register_module("conv3", conv(w / 2, w, 3));
    auto m3 = register_module("b3", std::make_shared<Branch>());
    b3r = m3->register_module("reduce", conv(in, w / 4, 1));
    b3 = m3->register_module("conv5", conv(w / 4, w / 2, 5));
    auto m4 = register_module("b4", std::make_shared<Branch>());
    b4 = m4->register_module("proj", conv(in, w / 2, 1));
  }
  Tensor forward(const Tensor& x) {
    auto y1 = torch::relu(b1(x));
    auto y2 = torch::relu(b2(torch::relu(b2r(x))));
    auto y3 = torch::relu(b3(torch::relu(b3r(x))));
    auto y4 = torch::relu(b4(torch::max_pool2d(x, 3, 1, 1)));
    return torch::cat({y1, y2, y3, y4}, 1);
  }
};

struct Inception : Model {
  torch::nn::Conv2d stem{nullptr};
  std::shared_ptr<InceptionBlock> block1, block2;
  std::shared_ptr<Head> head;
  Inception() {
    stem = register_module("stem", conv(1, 32, 3));
    block1 = register_module("block1", std::make_shared<InceptionBlock>(32, 32));
    block2 = register_module("block2", std::make_shared<InceptionBlock>(96, 48));
    head = register_module("head", std::make_shared<Head>(144 * 3 * 3, 128, 10));
  }
  Tensor loss(const Batch& b) override {
    auto x = torch::max_pool2d(torch::relu(stem(b.at("image"))), 2, 2);
    x = torch::max_pool2d(block1->forward(x), 2, 2);
    x = torch::max_pool2d(block2->forward(x), 2, 2);
    return ce_sum(head->forward(x.flatten(1)), b.at("label"));
  }
};

// Pre-norm encoder layer on torch's own MultiheadAttention.
struct EncoderLayer : torch::nn::Module {
  torch::nn::LayerNorm ln1{nullptr}, ln2{nullptr};
  torch::nn::MultiheadAttention attn{nullptr};
  torch::nn::Linear fc1{nullptr}, fc2{nullptr};
  EncoderLayer(int64_t h, int64_t heads, int64_t ffn) {
    ln1 = register_module("ln1", torch::nn::LayerNorm(torch::nn::LayerNormOptions({h})));
    attn = register_module("attn", torch::nn::MultiheadAttention(h, heads));
    ln2 = register_module("ln2", torch::nn::LayerNorm(torch::nn::LayerNormOptions({h})));
    fc1 = register_module("fc1", torch::nn::Linear(h, ffn));
    fc2 = register_module("fc2", torch::nn::Linear(ffn, h));
  }
  Tensor forward(Tensor x) {  // [B, S, H]
    auto n = ln1(x).transpose(0, 1);
    x = x + std::get<0>(attn(n, n, n)).transpose(0, 1);
    return x + fc2(torch::gelu(fc1(ln2(x))));
  }
};

struct Transformer : Model {
  torch::nn::Linear embed{nullptr}, head{nullptr};
  std::vector<std::shared_ptr<EncoderLayer>> layers;
  torch::nn::LayerNorm ln_f{nullptr};
  Transformer() {
    embed = register_module("embed", torch::nn::Linear(28, 64));
    for (int l = 0; l < 2; ++l)
      layers.push_back(register_module("layer" + std::to_string(l), std::make_shared<EncoderLayer>(64, 4, 256)));
    ln_f = register_module("ln_f", torch::nn::LayerNorm(torch::nn::LayerNormOptions({64})));
    head = register_module("head", torch::nn::Linear(64, 10));
  }
  Tensor loss(const Batch& b) override {
    auto x = embed(b.at("image").reshape({-1, 28, 28}));
    for (auto& l : layers) x = l->forward(x);
    return ce_sum(head(ln_f(x).mean(1)), b.at("label"));
  }
};

struct MmtBranch : torch::nn::Module {
  torch::nn::Linear proj{nullptr};
  std::vector<std::shared_ptr<EncoderLayer>> layers;
  MmtBranch() {
    proj = register_module("proj", torch::nn::Linear(16, 32));
    for (int l = 0; l < 2; ++l)
      layers.push_back(register_module("layer" + std::to_string(l), std::make_shared<EncoderLayer>(32, 4, 64)));
  }
  Tensor forward(const Tensor& in) {
    auto x = proj(in);
    for (auto& l : layers) x = l->forward(x);
    return x.mean(1);
  }
};

struct Mmt : Model {
  std::vector<std::shared_ptr<MmtBranch>> branches;
  std::shared_ptr<Head> head;
  Mmt() {
    for (int m = 0; m < 2; ++m)
      branches.push_back(register_module("branch" + std::to_string(m), std::make_shared<MmtBranch>()));
    head = register_module("head", std::make_shared<Head>(64, 32, 8));
  }
  Tensor loss(const Batch& b) override {
    std::vector<Tensor> parts;
    for (size_t m = 0; m < branches.size(); ++m)
      parts.push_back(branches[m]->forward(b.at("modality" + std::to_string(m))));
    return ce_sum(head->forward(torch::cat(parts, 1)), b.at("label"));
  }
};

struct Bag : torch::nn::Module {
  torch::nn::EmbeddingBag bag{nullptr};
  Bag() { bag = register_module("bag", torch::nn::EmbeddingBag(torch::nn::EmbeddingBagOptions(100, 8).mode(torch::kMean))); }
};

struct Dlrm : Model {
  std::vector<std::shared_ptr<FF>> dense;
  std::vector<std::shared_ptr<Bag>> sparse;
  std::shared_ptr<FF> top;
  Dlrm() {
    for (int d = 0; d < 2; ++d) dense.push_back(register_module("dense" + std::to_string(d), std::make_shared<FF>(16, 4, 32)));
    for (int e = 0; e < 2; ++e) sparse.push_back(register_module("sparse" + std::to_string(e), std::make_shared<Bag>()));
    top = register_module("top", std::make_shared<FF>(2 * 32 + 2 * 8, 1, 32, 8));
  }
  Tensor loss(const Batch& b) override {
    std::vector<Tensor> parts;
    for (size_t d = 0; d < dense.size(); ++d) parts.push_back(dense[d]->forward(b.at("dense" + std::to_string(d))));
    for (size_t e = 0; e < sparse.size(); ++e) parts.push_back(sparse[e]->bag(b.at("sparse" + std::to_string(e))));
    return ce_sum(top->forward(torch::cat(parts, 1)), b.at("label"));
  }
};

struct CandleUno : Model {
  std::vector<std::shared_ptr<FF>> branches;
  std::shared_ptr<FF> merged;
  CandleUno() {
    for (int f = 0; f < 3; ++f) branches.push_back(register_module("branch" + std::to_string(f), std::make_shared<FF>(16, 4, 32)));
    merged = register_module("merged", std::make_shared<FF>(3 * 32, 2, 32, 8));
  }
  Tensor loss(const Batch& b) override {
    std::vector<Tensor> parts;
    for (size_t f = 0; f < branches.size(); ++f) parts.push_back(branches[f]->forward(b.at("feature" + std::to_string(f))));
    return ce_sum(merged->forward(torch::cat(parts, 1)), b.at("label"));
  }
};

inline std::shared_ptr<Model> make(const std::string& name) {
  if (name == "mlp") return std::make_shared<Mlp>();
  if (name == "cnn") return std::make_shared<Cnn>();
  if (name == "inception") return std::make_shared<Inception>();
  if (name == "transformer") return std::make_shared<Transformer>();
  if (name == "mmt") return std::make_shared<Mmt>();
  if (name == "dlrm") return std::make_shared<Dlrm>();
  return std::make_shared<CandleUno>();
}

}  // namespace trident::nn::reference
